"""Transaction functions of runs: creation, claims, leases, answers, cancellation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ...errors import (
    RunExistsError,
    RunLockedError,
    RunNotFoundError,
    RunNotResumableError,
)
from ...model._clock import utcnow
from ...model._records import ErrorInfo, RunStatus
from .._approval_rows import Answerer, DecisionDraft
from .._machine import (
    after_answers,
    after_claim,
    after_release,
    after_start_failure,
    created,
    failed_start_error,
    paused_next,
)
from .._protocols import (
    CheckpointWrite,
    Claim,
    Lease,
    RequestRow,
    RunRecord,
    StepRow,
    TaskWrite,
    check_answerable,
    check_claimable,
    check_respondable,
    claimed_record,
)
from . import _codec as t
from ._decisions import fork_root_tx, permitted_drafts, record_decisions_tx
from ._fleet import insert_labels_tx
from ._keys import key_allows_tx, lock_keys_tx
from ._ops import Notify, Tx, execute, execute_many, fetch, fetch_each, lock_run
from ._shared import (
    insert_checkpoint,
    lease_lost,
    now_us,
    record_answers,
    save_task_writes,
)
from ._waits import due_runs_tx, settle_tx

if TYPE_CHECKING:
    from ._tables import Queries

# -- transaction functions: runs and leases ------------------------------------------
# Every status a transaction sets is decided by the state machine (store/_machine.py),
# and so is the wake-up (Notify) a run that becomes claimable needs.


def create_run_tx(
    q: Queries, run: RunRecord, checkpoints: Sequence[CheckpointWrite], lease: Lease | None,
    task_writes: Sequence[TaskWrite] = (), steps: Sequence[StepRow] = (),
    requests: Sequence[RequestRow] = (), decisions: Sequence[DecisionDraft] = (),
) -> Tx[None]:
    """Insert a run, its first checkpoints, their recorded rows, its lease and first decisions.

    ``RunExistsError`` if the run exists.
    """
    if (yield from fetch(q.run_lease, run_id=run.run_id)):
        raise RunExistsError(run.run_id)
    params = t.run_params(run)
    if lease is not None:
        params.update(lease_owner=lease.owner, lease_epoch=lease.epoch,
                      lease_expires_at=t.to_us(lease.expires_at))
    yield from execute(q.run_insert, **params)
    if run.forked_from is not None:  # the fork's audit chain goes on from its source's head
        yield from fork_root_tx(q, run.run_id, run.forked_from.run_id)
    for cp in checkpoints:
        yield from insert_checkpoint(q, cp)
    yield from save_task_writes(q, task_writes)
    yield from execute_many(q.step_upsert, [
        {"run_id": s.run_id, "checkpoint_id": s.checkpoint_id, "node": s.node, "name": s.name,
         "data": s.data, "created_at": t.to_us(s.created_at)} for s in steps])
    yield from execute_many(q.req_insert, [t.request_params(r, run.run_id) for r in requests])
    yield from record_decisions_tx(q, run.run_id, decisions)
    yield from insert_labels_tx(q, run)
    if created(run.status).notify:
        yield Notify(run.run_id)


def get_run_tx(q: Queries, run_id: str) -> Tx[RunRecord | None]:
    """The run row, or None."""
    rows = yield from fetch(q.run_get, run_id=run_id)
    return t.run_from_row(rows[0]) if rows else None


def list_runs_tx(q: Queries, status: RunStatus | None, workflow: str | None) -> Tx[list[RunRecord]]:
    """Runs matching the filters, newest first."""
    stmt = q.run_list[(status is not None, workflow is not None)]
    rows = yield from fetch(stmt, status=None if status is None else status.value,
                            workflow_name=workflow)
    return [t.run_from_row(row) for row in rows]


def claim_tx(q: Queries, claim: Claim) -> Tx[Lease]:
    """Check status, lease and head, record answers and take the lease: one transaction."""
    rows = yield from lock_run(q.run_get_locked, claim.run_id)
    if not rows:
        raise RunNotFoundError(claim.run_id)
    run, now = t.run_from_row(rows[0]), utcnow()
    check_claimable(run, claim, now)
    answers = yield from _open_answers(q, claim.run_id, claim.answers, now, claim.answerer)
    settled = yield from settle_tx(q, run.run_id, now)
    status = after_claim(run.status, changed=bool(answers or settled))
    error, wake = (None, None) if status is RunStatus.RUNNING else (run.error, run.wake_at)
    lease = Lease(run.run_id, claim.owner, run.lease_epoch + 1,
                  now + timedelta(seconds=claim.ttl))
    # conditional on the epoch read above, in case a backend did not lock the row
    if not (yield from execute(q.run_claim, run_id=run.run_id, old_epoch=run.lease_epoch,
                               owner=lease.owner, epoch=lease.epoch,
                               expires=t.to_us(lease.expires_at), new_status=status.value,
                               new_error=t.error_json(error), now=t.to_us(now),
                               new_wake=None if wake is None else t.to_us(wake), token=None,
                               attempts=0)):  # a user's resume gives failed starts another go
        raise RunLockedError(run.run_id, "another runtime", claim.ttl)
    return lease


def _open_answers(q: Queries, run_id: str, answers: Mapping[str, bytes], now: datetime,
                  answerer: Answerer | None = None) -> Tx[dict[str, bytes]]:
    """Record the answers to open requests within their deadline; identical repeats skipped.

    Approvals: each must be permitted to ``answerer`` (``NotAuthorizedError``
    before anything is written), and each is recorded as a decision.
    """
    ids = list(answers)
    if not ids:
        return {}
    found = yield from fetch_each(q.req_get, [{"run_id": run_id, "request_id": rid} for rid in ids])
    out: dict[str, bytes] = {}
    opened: list[RequestRow] = []
    for rid, rows in zip(ids, found, strict=True):
        row = t.request_from_row(dict(zip(q.req_get.columns, rows[0], strict=True))) \
            if rows else None
        if check_answerable(run_id, rid, row, answers[rid], now):
            out[rid] = answers[rid]
            opened.append(row)  # type: ignore[arg-type]  # check_answerable raised for None
    drafts = permitted_drafts(run_id, opened, out, answerer, now)  # approvals
    if out:
        yield from record_answers(q, run_id, out, t.to_us(now))
        yield from record_decisions_tx(q, run_id, drafts)  # approvals
    return out


def claim_next_tx(q: Queries, owner: str, ttl: float, workflows: Sequence[tuple[str, str]],
                  limit: int, token: str | None = None) -> Tx[list[tuple[RunRecord, Lease]]]:
    """Claim up to ``limit`` runs a worker may take, highest priority, then oldest, first.

    With a ``token``, the runs a claim with the same token already took (its
    COMMIT reply was lost, and this is the same claim tried again) are
    returned instead, under the leases it took, so none is stranded.
    """
    now = utcnow()
    if token is not None:
        mine = yield from _claimed_by(q, owner, token, now)
        if mine:
            return mine
    candidates: list[RunRecord] = []
    for name, version in workflows:
        rows = yield from fetch(q.run_claimable, workflow_name=name, workflow_version=version,
                                now=t.to_us(now), n=limit)
        candidates.extend(t.run_from_row(row) for row in rows)
        candidates.extend((yield from due_runs_tx(q, name, version, now, limit)))
    candidates.sort(key=lambda r: (-r.priority, r.created_at, r.run_id))
    yield from lock_keys_tx(q, candidates)
    claimed: list[tuple[RunRecord, Lease]] = []
    for run in candidates:
        if len(claimed) >= limit:
            break
        if not (yield from key_allows_tx(q, run, now)):
            continue  # its key is full, or an older run of the key goes first
        lease = Lease(run.run_id, owner, run.lease_epoch + 1, now + timedelta(seconds=ttl))
        if (yield from execute(q.run_claim, run_id=run.run_id, old_epoch=run.lease_epoch,
                               owner=owner, epoch=lease.epoch, expires=t.to_us(lease.expires_at),
                               new_status=RunStatus.RUNNING.value, new_error=None,
                               now=t.to_us(now), new_wake=None, token=token,
                               attempts=run.start_attempts)):
            yield from settle_tx(q, run.run_id, now)
            claimed.append((claimed_record(run, lease, now, token), lease))
    return claimed


def _claimed_by(q: Queries, owner: str, token: str,
                now: datetime) -> Tx[list[tuple[RunRecord, Lease]]]:
    """The runs a claim with this token took whose leases are still live."""
    rows = yield from fetch(q.run_claimed_by, token=token, owner=owner)
    mine = [t.run_from_row(row) for row in rows]
    return [(run, Lease(run.run_id, owner, run.lease_epoch, run.lease_expires_at))
            for run in mine if run.lease_expires_at is not None and run.lease_expires_at > now]


def start_failed_tx(q: Queries, lease: Lease, error: ErrorInfo,
                    max_attempts: int) -> Tx[RunRecord]:
    """Count a failed start of a claimed run and free its lease (see ``RunStore.start_failed``)."""
    rows = yield from fetch(q.run_get_locked, run_id=lease.run_id)
    if not rows:
        raise RunNotFoundError(lease.run_id)
    run, now = t.run_from_row(rows[0]), utcnow()
    status, attempts, after = after_start_failure(run, now, max_attempts=max_attempts)
    if status is RunStatus.FAILED:
        error = failed_start_error(error, attempts)
    if not (yield from execute(q.run_start_failed, run_id=lease.run_id, epoch=lease.epoch,
                               owner=lease.owner, new_status=status.value,
                               new_error=t.error_json(error), attempts=attempts,
                               start_after=None if after is None else t.to_us(after),
                               now=t.to_us(now))):
        yield from lease_lost(q, lease)
    return t.run_from_row((yield from fetch(q.run_get, run_id=lease.run_id))[0])


def respond_tx(q: Queries, run_id: str, answers: Mapping[str, bytes],
               answerer: Answerer | None = None) -> Tx[RunRecord]:
    """Record answers; a waiting run with no open request left becomes ``queued``."""
    rows = yield from lock_run(q.run_get_locked, run_id)
    if not rows:
        raise RunNotFoundError(run_id)
    run, now = t.run_from_row(rows[0]), utcnow()
    found = yield from fetch_each(q.req_get, [{"run_id": run_id, "request_id": rid}
                                              for rid in answers])
    cols = q.req_get.columns
    asked = [dict(zip(cols, rows[0], strict=True)) for rows in found if rows]
    # answers for parked tasks only are taken by the executor at its next barrier
    parked = bool(answers) and len(asked) == len(answers) and all(r["parked"] for r in asked)
    check_respondable(run, now, parked=parked)
    yield from _open_answers(q, run_id, answers, now, answerer)
    waits = yield from fetch(q.req_list[(True, False)], run_id=run_id, checkpoint_id=None)
    still_open = [w for w in waits if w["kind"] == "request"]  # timers and events do not count
    # a parked task with nothing left to wait for can go on, whatever else still waits
    busy = {(w["checkpoint_id"], w["node"]) for w in waits}
    freed = any(r["parked"] and (r["checkpoint_id"], r["node"]) not in busy for r in asked)
    nxt = after_answers(run.paused_from or run.status, requests_open=bool(still_open),
                        parked_freed=freed)
    if (back := paused_next(run, nxt)) is not None:  # recorded; it goes on after unpause
        yield from execute(q.run_set_paused_from, run_id=run_id, from_status=back.value)
    elif run.status is not RunStatus.PAUSED and nxt.status is not run.status:
        yield from execute(q.run_set_status, run_id=run_id, new_status=nxt.status.value,
                           now=t.to_us(now))
    if nxt.notify and run.status is not RunStatus.PAUSED:
        yield Notify(run_id)
    return t.run_from_row((yield from fetch(q.run_get, run_id=run_id))[0])


def renew_lease_tx(q: Queries, lease: Lease, ttl: float) -> Tx[Lease]:
    """Push the expiry of a lease we still hold."""
    renewed = Lease(lease.run_id, lease.owner, lease.epoch, utcnow() + timedelta(seconds=ttl))
    rows = yield from fetch(q.lease_renew_status, run_id=lease.run_id, epoch=lease.epoch,
                            owner=lease.owner, expires=t.to_us(renewed.expires_at))
    if not rows:
        yield from lease_lost(q, lease)
    # the holder of a run paused meanwhile stops after its superstep in flight
    paused = rows[0]["status"] == RunStatus.PAUSED.value
    return replace(renewed, paused=True) if paused else renewed


def release_lease_tx(q: Queries, lease: Lease, requeue: bool = False) -> Tx[None]:
    """Free the lease if it is still ours (``requeue``: a ``running`` run becomes ``queued``)."""
    rows = yield from fetch(q.run_get_locked, run_id=lease.run_id)
    if not rows or rows[0]["lease_epoch"] != lease.epoch or rows[0]["lease_owner"] != lease.owner:
        return  # no longer ours: whoever holds it now keeps it
    nxt = after_release(t.run_from_row(rows[0]).status, requeue=requeue)
    yield from execute(q.lease_release, run_id=lease.run_id, epoch=lease.epoch,
                       owner=lease.owner, new_status=nxt.status.value, now=now_us())
    if nxt.notify:
        yield Notify(lease.run_id)


def cancel_run_tx(q: Queries, run_id: str, decision: DecisionDraft | None = None) -> Tx[RunRecord]:
    """Cancel, fence out the holder (epoch + 1), close the open requests, record ``decision``."""
    rows = yield from lock_run(q.run_get_locked, run_id)
    if not rows:
        raise RunNotFoundError(run_id)
    status = RunStatus(rows[0]["status"])
    if status.is_final:
        raise RunNotResumableError(run_id, status.value)
    yield from execute(q.run_cancel, run_id=run_id, now=now_us())
    yield from execute(q.req_drop_open, run_id=run_id)
    if decision is not None:
        yield from record_decisions_tx(q, run_id, [decision])
    rows = yield from fetch(q.run_get, run_id=run_id)
    return t.run_from_row(rows[0])


