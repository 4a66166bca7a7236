"""The runtime's fleet operations: pause, unpause and retry, finding runs by query, pruning.

``Runtime.pause`` and ``Runtime.unpause`` record a decision (kinds
``"pause"``/``"unpause"``) in the transaction that changes the run; the store's
state machine decides the run's status (``store/_machine.py``). A run this
runtime executes is told at once to stop after its superstep in flight; one
executing elsewhere learns of it at its next lease renewal.
``Runtime.select_runs`` finds the ids bulk actions work on.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ..errors import InvalidInputError, RunNotFoundError
from ..model._approvals import Principal, principal_of
from ..model._clock import utcnow
from ..model._records import RunInfo, RunStatus
from ..store._approval_rows import DecisionDraft
from ..store._protocols import CheckpointStore, RunRecord
from ._inspect import Inspector

if TYPE_CHECKING:
    from ._execution import Executor

__all__ = ["Fleet", "check_labels", "run_filters", "unpause_run"]

#: the principal recorded when a fleet action names nobody
_RUNTIME = "runtime"


def check_labels(labels: Mapping[str, str] | None, what: str = "labels") -> dict[str, str]:
    """``labels`` as a plain dict, checked: string keys and values, keys not empty."""
    if labels is None:
        return {}
    if not isinstance(labels, Mapping):
        raise InvalidInputError(f"{what}= must be a mapping of strings, got {labels!r}")
    out: dict[str, str] = {}
    for key, value in labels.items():
        if not isinstance(key, str) or not key or not isinstance(value, str):
            raise InvalidInputError(
                f"{what}= takes non-empty string keys and string values, got {key!r}: {value!r}")
        out[key] = value
    return out


def run_filters(status: RunStatus | str | None, workflow_name: str | None,
                since: datetime | None, until: datetime | None,
                limit: int | None) -> RunStatus | None:
    """Check the filters of ``list_runs``/``select_runs``; the status as a ``RunStatus``."""
    try:
        st = RunStatus(status) if status is not None else None
    except ValueError:
        known = ", ".join(s.value for s in RunStatus)
        raise InvalidInputError(f"unknown run status {status!r} (one of: {known})") from None
    if workflow_name is not None and not isinstance(workflow_name, str):
        raise InvalidInputError(f"workflow_name must be a string, got {workflow_name!r}")
    for name, value in (("since", since), ("until", until)):
        if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
            raise InvalidInputError(f"{name}= must be a timezone-aware datetime, got {value!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InvalidInputError(f"limit must be a positive int, got {limit!r}")
    return st


def _decision(kind: str, run_id: str, by: Principal | str | None,
              reason: str | None) -> DecisionDraft:
    who = principal_of(by)
    by_id = _RUNTIME if who is None else who.id
    if reason is not None and not isinstance(reason, str):
        raise InvalidInputError(f"reason= must be text, not {type(reason).__name__}")
    return DecisionDraft("", "", kind, {"reason": reason}, by_id, "api",  # type: ignore[arg-type]
                         utcnow(), reason, {"run_id": run_id, "kind": kind, "reason": reason})


class Fleet:
    """The fleet operations on a store's runs: pause, unpause, retry, select, prune."""

    def __init__(self, store: CheckpointStore, executor: Executor) -> None:
        self.store = store
        self.executor = executor

    async def pause(self, run_id: str, reason: str | None,
                    by: Principal | str | None) -> RunInfo:
        """``Runtime.pause``: the run paused (a decision), stopped here after its superstep."""
        record = await self.store.pause_run(run_id, reason=reason,
                                            decision=_decision("pause", run_id, by, reason))
        rc = self.executor.contexts.get(run_id)
        if rc is not None:  # executing here: stop after the superstep in flight
            rc.stopping = True
        return Inspector.info(record)

    async def unpause(self, run_id: str, by: Principal | str | None) -> RunInfo:
        """``Runtime.unpause``: the run made claimable again when it is paused."""
        return Inspector.info(await unpause_run(self.store, run_id, by))

    async def retry(self, run_id: str, by: Principal | str | None) -> RunInfo:
        """``Runtime.retry``: a failed run queued again, a dead-lettered one unpaused."""
        record = await _require(self.store, run_id)
        if record.status is RunStatus.PAUSED and record.error is not None:
            return await self.unpause(run_id, by)
        return Inspector.info(await self.store.retry_run(run_id))

    async def select(self, status: RunStatus | str | None, workflow_name: str | None,
                     labels: Mapping[str, str] | None, since: datetime | None,
                     until: datetime | None, error_type: str | None) -> list[str]:
        """``Runtime.select_runs``: the ids of the runs matching every filter, newest first."""
        st = run_filters(status, workflow_name, since, until, None)
        found = await self.store.list_runs(status=st, workflow_name=workflow_name,
                                           labels=check_labels(labels) or None,
                                           since=since, until=until)
        if error_type is not None:
            found = [r for r in found if r.error is not None and r.error.type == error_type]
        return [r.run_id for r in found]

    async def prune(self, run_id: str | None, keep_last: int | None,
                    older_than: timedelta | None) -> int:
        """``Runtime.prune``: remove old checkpoints (never a head, pending requests, needed data)."""
        from ._inputs import check_prune_args  # imports the engine, which listing runs never needs

        check_prune_args(run_id, keep_last, older_than)
        cutoff = utcnow() - older_than if older_than is not None else None
        return await self.store.prune(run_id=run_id, keep_last=keep_last, older_than=cutoff)


async def unpause_run(store: CheckpointStore, run_id: str,
                      by: Principal | str | None) -> RunRecord:
    """The run, made claimable again first when it is paused (an ``"unpause"`` decision ``by``)."""
    record = await _require(store, run_id)
    if record.status is not RunStatus.PAUSED:
        return record
    return await store.unpause_run(run_id, decision=_decision("unpause", run_id, by, None))


async def _require(store: CheckpointStore, run_id: str) -> RunRecord:
    record = await store.get_run(run_id)
    if record is None:
        raise RunNotFoundError(run_id)
    return record
