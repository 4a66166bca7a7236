"""Wake-ups: every waiter is released, and a wake-up that came while a waiter looked is not lost."""

from __future__ import annotations

import asyncio

from durable_flow.runtime._signals import Signals, signals_for


async def test_wake_releases_every_waiter() -> None:
    signals = Signals()
    waiters = [asyncio.create_task(signals.wait(5)) for _ in range(3)]
    await asyncio.sleep(0)
    signals.wake()
    assert await asyncio.gather(*waiters) == [True, True, True]


async def test_wait_returns_false_after_its_timeout() -> None:
    assert await Signals().wait(0.01) is False


async def test_a_wake_between_looking_and_waiting_is_not_slept_through() -> None:
    signals = Signals()
    seen = signals.wakes
    signals.wake()  # e.g. a run submitted while the worker's claim found nothing
    assert await asyncio.wait_for(signals.wait(30, since=seen), 1) is True
    assert await signals.wait(0.01, since=signals.wakes) is False


class _Store:
    pass


def test_each_store_object_has_its_own_signals() -> None:
    a, b = _Store(), _Store()
    assert signals_for(a) is signals_for(a)
    assert signals_for(a) is not signals_for(b)
