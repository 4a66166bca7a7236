"""Transaction functions of fleet operations on SQL: pause, unpause, labels, finding runs.

Pause and unpause lock the run's row, let the state machine
(``store/_machine.py``) decide, and record their decision in the same
transaction. Labels are kept twice: as JSON on the run's row (read with the
run) and as ``run_labels`` rows, which the label filters of
:func:`select_runs_tx` find through ``ix_run_labels_key_value``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING

from ...errors import RunNotFoundError
from ...model._clock import utcnow
from ...model._records import ErrorInfo, RunStatus
from .._approval_rows import DecisionDraft
from .._machine import after_retry, check_pausable, unpaused
from .._rows import RunRecord
from . import _codec as t
from ._decisions import record_decisions_tx
from ._ops import Notify, Tx, execute, execute_many, fetch, lock_run

if TYPE_CHECKING:
    from ._statement import Statement
    from ._tables import Queries, SqlDialect

__all__ = ["RunFilter", "insert_labels_tx", "pause_tx", "retry_tx", "select_runs_tx",
           "unpause_tx"]

@dataclass(frozen=True, slots=True)
class RunFilter:
    """Which runs ``list_runs``/``select_runs`` return; every filter given must match."""

    status: RunStatus | None = None
    workflow_name: str | None = None
    labels: Mapping[str, str] | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int | None = None


def pause_tx(q: Queries, run_id: str, reason: str | None, decision: DecisionDraft | None,
             error: ErrorInfo | None = None) -> Tx[RunRecord]:
    """Pause a run (its holder keeps the lease and stops after its superstep); one decision.

    A run already paused stays as it is (no second decision); a completed,
    failed or cancelled one raises ``InvalidInputError``.
    """
    run = yield from _locked(q, run_id)
    if run.status is RunStatus.PAUSED:
        return run
    check_pausable(run)
    yield from execute(q.run_pause, run_id=run_id, from_status=run.status.value, reason=reason,
                       new_error=t.error_json(error if error is not None else run.error),
                       now=t.to_us(utcnow()))
    if decision is not None:
        yield from record_decisions_tx(q, run_id, [decision])
    return t.run_from_row((yield from fetch(q.run_get, run_id=run_id))[0])


def unpause_tx(q: Queries, run_id: str, decision: DecisionDraft | None) -> Tx[RunRecord]:
    """Make a paused run claimable again (the machine's ``unpaused``); one decision.

    A run that is not paused stays as it is (no decision).
    """
    run = yield from _locked(q, run_id)
    if run.status is not RunStatus.PAUSED:
        return run
    nxt = unpaused(run, utcnow())
    yield from execute(q.run_unpause, run_id=run_id, new_status=nxt.status.value,
                       now=t.to_us(utcnow()))
    if decision is not None:
        yield from record_decisions_tx(q, run_id, [decision])
    if nxt.notify:
        yield Notify(run_id)
    return t.run_from_row((yield from fetch(q.run_get, run_id=run_id))[0])


def retry_tx(q: Queries, run_id: str) -> Tx[RunRecord]:
    """Queue a failed run again (the machine's ``after_retry``); any other run stays as it is."""
    run = yield from _locked(q, run_id)
    nxt = after_retry(run)
    if nxt is None:
        return run
    yield from execute(q.run_set_status, run_id=run_id, new_status=nxt.status.value,
                       now=t.to_us(utcnow()))
    if nxt.notify:
        yield Notify(run_id)
    return t.run_from_row((yield from fetch(q.run_get, run_id=run_id))[0])


def insert_labels_tx(q: Queries, run: RunRecord) -> Tx[None]:
    """The ``run_labels`` rows of a new run's labels."""
    if not run.labels:
        return
    stmt = q.label_insert
    yield from execute_many(stmt, [{"run_id": run.run_id, "key": k, "value": v}
                                   for k, v in sorted(run.labels.items())])


def select_runs_tx(q: Queries, f: RunFilter) -> Tx[list[RunRecord]]:
    """Runs matching ``f``, newest first (at most ``f.limit``)."""
    labels = sorted((f.labels or {}).items())
    stmt = _selection(q.dialect, f.status is not None, f.workflow_name is not None,
                      len(labels), f.since is not None, f.until is not None, f.limit is not None)
    params: dict[str, object] = {
        "status": None if f.status is None else f.status.value,
        "workflow_name": f.workflow_name,
        "since": None if f.since is None else t.to_us(f.since),
        "until": None if f.until is None else t.to_us(f.until), "n": f.limit}
    for i, (key, value) in enumerate(labels):
        params[f"lk{i}"], params[f"lv{i}"] = key, value
    rows = yield from fetch(stmt, **params)
    return [t.run_from_row(row) for row in rows]


def _locked(q: Queries, run_id: str) -> Tx[RunRecord]:
    rows = yield from lock_run(q.run_get_locked, run_id)
    if not rows:
        raise RunNotFoundError(run_id)
    return t.run_from_row(rows[0])


@cache
def _selection(d: SqlDialect, status: bool, workflow: bool, n_labels: int, since: bool,
               until: bool, limit: bool) -> Statement:
    """One statement per shape of filter (the values are always bound, never formatted).

    Compiled on first use: a store that never filters by label or time never
    imports SQLAlchemy for it.
    """
    from sqlalchemy import and_, bindparam, exists, select

    from ._schema import METADATA
    from ._tables import compile_statement

    runs, labels = METADATA.tables["runs"], METADATA.tables["run_labels"]
    where = []
    if status:
        where.append(runs.c.status == bindparam("status"))
    if workflow:
        where.append(runs.c.workflow_name == bindparam("workflow_name"))
    if since:
        where.append(runs.c.created_at >= bindparam("since"))
    if until:
        where.append(runs.c.created_at < bindparam("until"))
    for i in range(n_labels):
        where.append(exists(select(labels.c.run_id).where(and_(
            labels.c.key == bindparam(f"lk{i}"), labels.c.value == bindparam(f"lv{i}"),
            labels.c.run_id == runs.c.run_id))))
    stmt = select(runs).where(*where).order_by(runs.c.created_at.desc(), runs.c.run_id.desc())
    if limit:
        stmt = stmt.limit(bindparam("n"))
    return compile_statement(stmt, d.dialect)
