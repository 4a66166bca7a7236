"""Keeping a run's lease alive while it executes.

A renewal that fails for a passing reason (a busy database, a dropped
connection) is tried again with backoff and logged; giving up would let the
lease expire and another runtime run the same nodes again. Only a lost lease
(``LeaseLostError``: another runtime took the run over, or it was cancelled)
ends the renewal, and then the run's tasks are stopped at once.
"""

from __future__ import annotations

import asyncio
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
from ..engine._loop import RunContext
from ..errors import LeaseLostError
from ..store._protocols import CheckpointStore, Lease

__all__ = ["keep_lease"]

_log = get_logger()


async def keep_lease(store: CheckpointStore, rc: RunContext, ttl: float,
                     on_lost: Callable[[LeaseLostError], None]) -> None:
    """Renew ``rc.lease`` every ``ttl / 3`` seconds until cancelled (the run ended).

    A failed renewal is logged (``lease_renew_failed``, a warning with
    ``run_id``, ``attempt`` and the error) and tried again after a backoff
    that starts at ``ttl / 30`` and never exceeds ``ttl / 6``, so several
    tries fit into one lease. On ``LeaseLostError`` the loop logs
    ``lease_lost``, calls ``on_lost`` with the error and returns.
    """
    while True:
        await asyncio.sleep(ttl / 3)
        try:
            rc.lease = await _renew(store, rc, ttl)
            if is_configured():
                _log.debug("lease_renewed", run_id=rc.run_id, epoch=rc.lease.epoch,
                           expires_at=rc.lease.expires_at.isoformat())
        except LeaseLostError as exc:
            _log.warning("lease_lost", run_id=rc.run_id, epoch=rc.lease.epoch)
            on_lost(exc)
            return


async def _renew(store: CheckpointStore, rc: RunContext, ttl: float) -> Lease:
    """One renewal, tried until it succeeds or the lease is lost."""

    async def log_failure(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        _log.warning("lease_renew_failed", run_id=rc.run_id, attempt=state.attempt_number,
                     error=f"{type(exc).__name__}: {exc}")

    wait: Any = wait_exponential(multiplier=ttl / 30, max=ttl / 6) + wait_random(0, ttl / 30)
    retrying = AsyncRetrying(stop=stop_never, wait=wait, retry=retry_if_exception(_passing),
                             before_sleep=log_failure, reraise=True)
    lease: Lease = await retrying(store.renew_lease, rc.lease, ttl)
    return lease


def _passing(exc: BaseException) -> bool:
    """Worth another try: any error but a lost lease (and never a cancellation)."""
    return isinstance(exc, Exception) and not isinstance(exc, LeaseLostError)
