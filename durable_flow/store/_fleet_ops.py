"""The store's fleet operations: pausing, unpausing and retrying runs (one protocol).

Part of :class:`~durable_flow.store._protocols.CheckpointStore`. Each is one
transaction that locks the run, lets the state machine (``store/_machine.py``)
decide its status and records its decision with it.
"""

from __future__ import annotations

from typing import Protocol

from ..model._records import ErrorInfo
from ._approval_rows import DecisionDraft
from ._rows import RunRecord

__all__ = ["FleetOps"]


class FleetOps(Protocol):
    """Pause, unpause and retry runs."""

    async def pause_run(self, run_id: str, *, reason: str | None = None,
                        decision: DecisionDraft | None = None,
                        error: ErrorInfo | None = None) -> RunRecord:
        """Pause a run in one transaction, with its ``decision``; return the paused row.

        The run is never claimed while paused; a holder keeps its lease, is
        told at its next renewal (``Lease.paused``), commits its superstep in
        flight and frees the lease, the run staying paused. A paused run is
        returned unchanged. ``InvalidInputError`` for a completed, failed or
        cancelled run; ``RunNotFoundError``.
        """
        ...

    async def unpause_run(self, run_id: str, *,
                          decision: DecisionDraft | None = None) -> RunRecord:
        """Make a paused run claimable again in one transaction, with its ``decision``.

        It becomes ``queued`` (workers are woken), ``waiting`` when it still
        waits, or ``running`` while its holder still finishes its superstep.
        A run that is not paused is returned unchanged.
        """
        ...

    async def retry_run(self, run_id: str) -> RunRecord:
        """Queue a ``failed`` run again in one transaction (workers are woken).

        The worker that claims it resumes it from its head. Any other run is
        returned unchanged; ``RunNotFoundError``.
        """
        ...
