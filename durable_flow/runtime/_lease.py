"""Keeping a run's lease alive while it executes, and stopping the run when it cannot.

Two tasks guard every execution. The renewer renews the lease every
``lease_ttl / 3``; a renewal that fails for a passing reason (a busy
database, a dropped connection) or hangs is tried again with backoff and
logged. The watchdog holds the lease's local deadline
(:class:`~durable_flow.engine.LeaseClock`: ``lease_ttl`` less a
margin from the moment the last successful renewal was *sent*): when it
passes with no newer success, it stops the run's tasks, before any other
process may take the run over. So a holder cut off from the database stops
acting on its own clock, and never overlaps the holder that takes over.

A lost lease (``LeaseLostError``: another runtime took the run over, or it
was cancelled) ends the renewal and stops the run's tasks at once. Once the
engine sends the commit that frees the lease (the run waits, completes or
fails), renewals stop; a renewal that raced that commit and found the lease
gone is not a loss and is not reported as one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_never,
    wait_exponential,
    wait_random,
)

from .._logs import get_logger, is_configured
from ..engine import LOCAL_EXPIRY, LeaseClock, RunContext
from ..errors import LeaseLostError
from ..store._protocols import CheckpointStore, Lease

__all__ = ["keep_lease"]

_log = get_logger()


async def keep_lease(store: CheckpointStore, rc: RunContext, ttl: float,
                     on_lost: Callable[[LeaseLostError], None]) -> None:
    """Renew ``rc.lease`` every ``ttl / 3`` seconds until cancelled (the run ended).

    A failed renewal is logged (``lease_renew_failed``, a warning with
    ``run_id``, ``attempt`` and the error) and tried again after a backoff
    that starts at ``ttl / 30`` and never exceeds ``ttl / 6``. On
    ``LeaseLostError`` the loop logs ``lease_lost``, calls ``on_lost`` and
    returns; when the lease's local deadline passes first, the watchdog logs
    ``lease_expired`` and calls ``on_lost`` with a ``LeaseLostError`` whose
    reason is :data:`LOCAL_EXPIRY`.
    """
    watchdog = None if rc.clock is None else asyncio.create_task(_watch(rc, rc.clock, on_lost))
    try:
        while True:
            await asyncio.sleep(ttl / 3)
            if rc.releasing:
                return
            try:
                await _renew(store, rc, ttl)
            except LeaseLostError as exc:
                if rc.releasing:  # the run freed its lease meanwhile: nobody took it
                    return
                _log.warning("lease_lost", run_id=rc.run_id, epoch=rc.lease.epoch)
                on_lost(exc)
                return
    finally:
        if watchdog is not None:
            watchdog.cancel()


async def _watch(rc: RunContext, clock: LeaseClock,
                 on_lost: Callable[[LeaseLostError], None]) -> None:
    """Stop the run's tasks once the lease's local deadline passes with no renewal."""
    # a renewal moves the deadline while this sleeps: wake at the old one, look again
    while (left := clock.remaining()) > 0:  # noqa: ASYNC110
        await asyncio.sleep(left)
    if not rc.releasing:
        _log.warning("lease_expired", run_id=rc.run_id, epoch=rc.lease.epoch,
                     reason=LOCAL_EXPIRY)
        on_lost(LeaseLostError(rc.run_id, rc.lease.epoch, LOCAL_EXPIRY))


async def _renew(store: CheckpointStore, rc: RunContext, ttl: float) -> None:
    """One renewal, tried until it succeeds or the lease is lost.

    Each attempt is bounded by ``ttl / 3``: an attempt stuck on a stalled
    connection is abandoned and tried again rather than awaited past the
    lease. The deadline moves from the moment the successful attempt was sent.
    """

    async def attempt() -> tuple[float, Lease]:
        sent = time.monotonic()
        async with asyncio.timeout(ttl / 3):
            return sent, await store.renew_lease(rc.lease, ttl)

    async def log_failure(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        _log.warning("lease_renew_failed", run_id=rc.run_id, attempt=state.attempt_number,
                     error=f"{type(exc).__name__}: {exc}")

    wait: Any = wait_exponential(multiplier=ttl / 30, max=ttl / 6) + wait_random(0, ttl / 30)
    retrying = AsyncRetrying(stop=stop_never, wait=wait, retry=retry_if_exception(_passing),
                             before_sleep=log_failure, reraise=True)
    outcome: tuple[float, Lease] = await retrying(attempt)
    sent, lease = outcome
    rc.lease = lease
    if lease.paused:  # paused meanwhile: finish the superstep in flight, then give it back
        rc.stopping = True
    if rc.clock is not None:
        rc.clock.renewed(sent)
    if is_configured():
        _log.debug("lease_renewed", run_id=rc.run_id, epoch=lease.epoch,
                   expires_at=lease.expires_at.isoformat())


def _passing(exc: BaseException) -> bool:
    """Worth another try: any error but a lost lease (and never a cancellation)."""
    return isinstance(exc, Exception) and not isinstance(exc, LeaseLostError)
