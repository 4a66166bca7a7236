"""In-process wake-ups: a run was submitted, answered or given back.

Workers wait on their store's :class:`Signals` (with their poll interval as
the fallback), and ``Runtime.submit``/``respond`` wake them, so a worker in
the same process reacts at once. A store that can hear other processes
(PostgreSQL ``LISTEN``) wakes the same object when a notification arrives.
"""

from __future__ import annotations

import asyncio
import weakref

__all__ = ["Signals", "signals_for"]


class Signals:
    """A wake-up flag many waiters share: ``wake`` releases every current waiter."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def wake(self) -> None:
        """Release everyone waiting now."""
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, timeout: float) -> bool:
        """Wait for the next ``wake``, at most ``timeout`` seconds; True if woken."""
        event = self._event
        try:
            async with asyncio.timeout(timeout):
                await event.wait()
        except TimeoutError:
            return False
        return True


_BY_STORE: weakref.WeakKeyDictionary[object, Signals] = weakref.WeakKeyDictionary()


def signals_for(store: object) -> Signals:
    """The signals of one store object (created on first use, gone with the store)."""
    signals = _BY_STORE.get(store)
    if signals is None:
        signals = _BY_STORE[store] = Signals()
    return signals
