"""Wake-ups: a run was submitted, answered or given back.

Workers wait on their store's :class:`Signals` (with their poll interval as
the fallback), and ``Runtime.submit``/``respond`` wake them, so a worker in
the same process reacts at once. A store that hears other processes
(:class:`Listening`: PostgreSQL ``LISTEN``) wakes the same object when one of
them makes a run claimable, so workers everywhere react at once too.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Protocol, runtime_checkable

__all__ = ["Listening", "Signals", "signals_for"]


class Signals:
    """A wake-up flag many waiters share: ``wake`` releases every current waiter.

    ``wakes`` counts the wake-ups so far: a waiter that read it before
    looking at the queue passes it as ``since`` and returns at once if a
    wake-up came while it looked, instead of sleeping through it.
    """

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.wakes = 0

    def wake(self) -> None:
        """Release everyone waiting now."""
        self.wakes += 1
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, timeout: float, *, since: int | None = None) -> bool:
        """Wait for the next ``wake`` (or one after ``since``), at most ``timeout`` s; True if woken."""
        if since is not None and since != self.wakes:
            return True
        event = self._event
        try:
            async with asyncio.timeout(timeout):
                await event.wait()
        except TimeoutError:
            return False
        return True


@runtime_checkable
class Listening(Protocol):
    """A store that hears other processes make runs claimable."""

    async def listen(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` whenever a run may have become claimable, until the store closes.

        Returns once listening (or once a first attempt failed: the store
        keeps trying in the background, and waiters still poll).
        """
        ...


_BY_STORE: weakref.WeakKeyDictionary[object, Signals] = weakref.WeakKeyDictionary()


def signals_for(store: object) -> Signals:
    """The signals of one store object (created on first use, gone with the store)."""
    signals = _BY_STORE.get(store)
    if signals is None:
        signals = _BY_STORE[store] = Signals()
    return signals
