"""PostgreSQL's start of a run in one round trip.

``Runtime.run`` creates a run with its lease and its first checkpoint
(``create_run``); the usual transaction is BEGIN, the check that the run
does not exist, the run's row, the checkpoint, its values, COMMIT. A plain
start (one top-level checkpoint, nothing recorded against it, a status
that wakes no worker) is one statement instead, ``commit_start``
(``sql/_tables.py``): the run's row inserted unless a run of that id exists
(``ON CONFLICT DO NOTHING``), and the checkpoint, its values and its chunks
inserted only when it was, the data-modifying CTEs of ``_advance``.

A statement that inserted no run (the id is taken) goes the usual way,
which raises ``RunExistsError`` as it always did. With the connection lost
mid-statement, the usual way decides too; when it finds the run existing,
the run whose row holds this very lease and checkpoint is the one the
statement created.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...errors import RunExistsError
from .._machine import created
from .._segments import merge_block
from ..sql import _codec as t
from ._advance import UNKNOWN, checkpoint_params, send

if TYPE_CHECKING:
    from .._approval_rows import DecisionDraft
    from .._rows import CheckpointWrite, Lease, RequestRow, RunRecord, StepRow, TaskWrite

__all__ = ["OneStatementStart", "plain_start"]


def plain_start(run: RunRecord, checkpoints: Sequence[CheckpointWrite], lease: Lease | None,
                recorded: int) -> bool:
    """Whether a run's creation is one top-level checkpoint and the run's row, nothing more."""
    return (len(checkpoints) == 1 and recorded == 0 and lease is not None
            and checkpoints[0].meta.thread == "" and merge_block(checkpoints[0].meta.seq) is None
            and run.head_checkpoint_id == checkpoints[0].meta.id
            and not created(run.status).notify and not run.labels)  # labels: their rows too


def _params(run: RunRecord, cp: CheckpointWrite, lease: Lease) -> dict[str, object]:
    row = {**t.run_params(run), "lease_owner": lease.owner, "lease_epoch": lease.epoch,
           "lease_expires_at": t.to_us(lease.expires_at)}
    return {**{f"run_{k}": v for k, v in row.items()}, **checkpoint_params(cp)}


class OneStatementStart:
    """``PostgresStore.create_run``: a plain start in one statement, anything else as usual."""

    driver: Any
    _q: Any

    async def create_run(
        self, run: RunRecord, checkpoints: Sequence[CheckpointWrite], lease: Lease | None,
        *, task_writes: Sequence[TaskWrite] = (), steps: Sequence[StepRow] = (),
        requests: Sequence[RequestRow] = (), decisions: Sequence[DecisionDraft] = (),
    ) -> None:
        """Insert a run with its first checkpoint(s), their recorded rows and lease atomically."""
        usual = super().create_run  # type: ignore[misc]
        rows = {"task_writes": task_writes, "steps": steps, "requests": requests,
                "decisions": decisions}
        stmt = self._q.commit_start
        if stmt is None or lease is None or not plain_start(
                run, checkpoints, lease,
                len(task_writes) + len(steps) + len(requests) + len(decisions)):
            return await usual(run, checkpoints, lease, **rows)  # type: ignore[no-any-return]
        done = await send(self.driver.pool, self.driver.lost, stmt,
                          _params(run, checkpoints[0], lease))
        if done is True:
            return None
        try:
            return await usual(run, checkpoints, lease, **rows)  # type: ignore[no-any-return]
        except RunExistsError:
            if done != UNKNOWN or not await self._started(run, checkpoints[0], lease):
                raise
        return None

    async def _started(self, run: RunRecord, cp: CheckpointWrite, lease: Lease) -> bool:
        """Whether the run's row holds this lease and checkpoint: the statement created it."""
        record = await self.get_run(run.run_id)  # type: ignore[attr-defined]
        return bool(record is not None and record.head_checkpoint_id == cp.meta.id
                    and record.lease_owner == lease.owner and record.lease_epoch == lease.epoch)
