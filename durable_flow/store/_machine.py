"""The run state machine: every status, lease, wake and queue transition a store makes.

Every store decides a run's next status here and nowhere else (the SQL base
for SQLite and PostgreSQL, and the memory store, which runs the same SQL
transactions), together with the wake-up the transition implies: a run that
becomes claimable (``claimable_now``) is announced to the workers (a
PostgreSQL ``NOTIFY``), whatever path made it so.

```
             submit                        answer / event / due timer
  (create) ----------> QUEUED <----------------------------------------- WAITING
     |                 |  ^  ^  requeue (a stopping worker)                 ^
     | run / fork      |  |  '--------------------------------.           | commit: a request,
     v       claim     v  | failed start (backoff,             |           | timer or event wait
  RUNNING <------------'  | at most max_start_attempts)        |           |
     |  ^                 |                                    |           |
     |  '-----------------+-- lease expired: claimed again ----+-- RUNNING-'
     |
     +--> COMPLETED   (final: never executes again)
     +--> CANCELLED   (final: from any status but a final one)
     '--> FAILED      (a node failed, or too many failed starts; a user may
                       resume it on purpose after fixing the cause)

  QUEUED | RUNNING | WAITING --pause--> PAUSED --unpause--> QUEUED, or WAITING if it still
                                          ^                  waits (RUNNING while its holder
  a node failed with on_failure="pause" --'                  still finishes its superstep)
```

A paused run is never claimed. Its holder, if one executes it, keeps its
lease, learns of the pause at its next renewal (or commit), finishes the
superstep in flight, commits it and frees the lease: the run stays
``paused``. Answers, events and timers are still recorded while it is paused;
the transition they would make is applied to ``paused_from``, the status the
run goes back to on unpause.

Who may execute a run: only the holder of its live lease. A lease is taken by
``create_run`` (a new run), ``claim`` (``resume``: never while another lease
is live) or ``claim_next`` (a worker: queued runs whose ``start_after`` has
come, running runs whose lease expired, waiting runs whose ``wake_at`` has
come); it is renewed by its holder, freed by the commit that leaves the run
waiting or finished, and fenced by cancellation (the epoch moves on).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from ..errors import InvalidInputError, RunLockedError, RunNotResumableError
from ..model._records import ErrorInfo, RunStatus
from ._rows import Claim, Lease, RunRecord

__all__ = [
    "DEFAULT_MAX_START_ATTEMPTS",
    "FIRST_BACKOFF",
    "MAX_BACKOFF",
    "Next",
    "after_answers",
    "after_claim",
    "after_event",
    "after_release",
    "after_retry",
    "after_start_failure",
    "after_waiting_commit",
    "check_claimable",
    "check_pausable",
    "check_respondable",
    "claimable_now",
    "claimed_record",
    "created",
    "failed_start_error",
    "keeps_paused",
    "paused_next",
    "start_backoff",
    "unpaused",
]

#: How many failed starts a run is given before it is ``failed``.
DEFAULT_MAX_START_ATTEMPTS = 5
#: The wait after a run's first failed start; it doubles with each further one.
FIRST_BACKOFF = timedelta(seconds=1)
#: The longest wait between two starts of a run that cannot start.
MAX_BACKOFF = timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class Next:
    """A run's status after a transition, and whether workers must be woken for it."""

    status: RunStatus
    notify: bool = False


def _to(status: RunStatus, *, lease_freed: bool = False) -> Next:
    """``status``, announced when it makes the run claimable right away."""
    return Next(status, notify=status is RunStatus.QUEUED or (
        lease_freed and status is RunStatus.RUNNING))


def created(status: RunStatus) -> Next:
    """A new run (``submit`` creates it ``queued``; ``run`` and ``fork`` ``running``)."""
    return _to(status)


def after_claim(status: RunStatus, *, changed: bool) -> RunStatus:
    """A claim's status: ``running``, unless it only takes the lease of a run still waiting.

    ``changed``: the claim recorded answers, delivered events or closed due waits.
    """
    return RunStatus.RUNNING if changed or status is not RunStatus.WAITING else status


def after_answers(status: RunStatus, *, requests_open: bool, parked_freed: bool = False) -> Next:
    """Answers recorded without executing: a waiting run left with no open request is queued.

    ``parked_freed``: a parked task (``waits="branch"``) has no open wait left;
    its branch can go on while other requests stay open, so the run is queued.
    """
    if status is RunStatus.WAITING and (not requests_open or parked_freed):
        return _to(RunStatus.QUEUED)
    return Next(status)


def after_event(status: RunStatus, *, held: bool, delivered: bool) -> Next:
    """An event sent: delivered to a waiting run that nobody holds, it queues the run."""
    if status is RunStatus.WAITING and delivered and not held:
        return _to(RunStatus.QUEUED)
    return Next(status)


def after_waiting_commit(*, delivered: bool, answered: bool = False) -> Next:
    """A commit left the run waiting: an event kept in its mailbox queues it at once.

    ``answered``: a parked task's request was answered while the run ran
    (after the engine last looked), so the run has work and is queued too.
    """
    return _to(RunStatus.QUEUED) if delivered or answered else Next(RunStatus.WAITING)


def after_release(status: RunStatus, *, requeue: bool) -> Next:
    """The holder freed its lease: a ``running`` run is claimable again (queued on requeue)."""
    if status is RunStatus.RUNNING and requeue:
        return _to(RunStatus.QUEUED)
    return _to(status, lease_freed=True)


def start_backoff(attempts: int) -> timedelta:
    """The wait after ``attempts`` failed starts: 1 s, doubling, at most 5 minutes."""
    if attempts >= 20:  # 2**19 s is far past the cap; no huge powers
        return MAX_BACKOFF
    wait: timedelta = FIRST_BACKOFF * 2 ** max(attempts - 1, 0)
    return min(wait, MAX_BACKOFF)


def after_start_failure(run: RunRecord, now: datetime, *,
                        max_attempts: int) -> tuple[RunStatus, int, datetime | None]:
    """A claimed run could not be started: status, failed starts so far, next start time.

    The run goes back to the queue, not to be claimed before the backoff
    has passed, until ``max_attempts`` starts failed: then it is ``failed``.
    """
    attempts = run.start_attempts + 1
    if attempts >= max_attempts:
        return RunStatus.FAILED, attempts, None
    return RunStatus.QUEUED, attempts, now + start_backoff(attempts)


def claimable_now(run: RunRecord, now: datetime) -> bool:
    """Whether a worker may claim ``run`` at ``now`` (the rule ``claim_next`` queries)."""
    if run.status is RunStatus.QUEUED:
        return run.start_after is None or run.start_after <= now
    if run.status is RunStatus.WAITING:
        return run.wake_at is not None and run.wake_at <= now
    return run.status is RunStatus.RUNNING and (
        run.lease_expires_at is None or run.lease_expires_at < now)


def check_claimable(run: RunRecord, claim: Claim, now: datetime) -> None:
    """Raise why ``run`` cannot be claimed now by ``claim`` (``resume``, ``update_state``)."""
    if run.status.is_final:
        raise RunNotResumableError(run.run_id, run.status.value)
    if run.status is RunStatus.PAUSED:
        raise InvalidInputError(f"run {run.run_id} is paused: unpause it first")
    if claim.dead_holder is None or run.lease_owner != claim.dead_holder:
        _check_no_live_lease(run, now)
    if claim.expect_head is not None and run.head_checkpoint_id != claim.expect_head:
        raise RunLockedError(run.run_id, run.lease_owner or "another runtime", 0.0)


def check_respondable(run: RunRecord, now: datetime, *, parked: bool = False) -> None:
    """Raise why answers cannot be recorded for ``run`` without executing it now.

    ``parked``: every answer is for a parked task's request; a run that runs
    other branches takes them at its next barrier, so its lease is no bar.
    """
    if run.status.is_final:
        raise RunNotResumableError(run.run_id, run.status.value)
    if parked and run.status is RunStatus.RUNNING:
        return
    _check_no_live_lease(run, now)


def _check_no_live_lease(run: RunRecord, now: datetime) -> None:
    if run.lease_owner is not None and run.lease_expires_at is not None \
            and run.lease_expires_at > now:
        raise RunLockedError(run.run_id, run.lease_owner,
                             (run.lease_expires_at - now).total_seconds())


def claimed_record(run: RunRecord, lease: Lease, now: datetime,
                   token: str | None = None) -> RunRecord:
    """``run`` as a worker's claim leaves it: ``running`` under ``lease``."""
    return replace(run, status=RunStatus.RUNNING, error=None, updated_at=now, wake_at=None,
                   lease_owner=lease.owner, lease_epoch=lease.epoch,
                   lease_expires_at=lease.expires_at, claim_token=token,
                   claimed_from=run.status)


def failed_start_error(error: ErrorInfo, attempts: int) -> ErrorInfo:
    """The ``ErrorInfo`` of a run failed for good after ``attempts`` failed starts."""
    return replace(error, message=f"the run could not be started ({attempts} attempts): "
                                  f"{error.message}")


# -- pausing ---------------------------------------------------------------------------


def check_pausable(run: RunRecord) -> None:
    """Raise ``InvalidInputError`` unless ``run`` may be paused (queued, running, waiting, paused).

    A completed, failed or cancelled run cannot be paused.
    """
    if run.status.is_final or run.status is RunStatus.FAILED:
        raise InvalidInputError(
            f"run {run.run_id} is {run.status.value}: only a queued, running or waiting run "
            f"can be paused")


def keeps_paused(new_status: RunStatus) -> bool:
    """Whether a commit that would set ``new_status`` leaves a paused run paused.

    A commit of a paused run's holder that leaves it running or waiting keeps
    it paused (and ``new_status`` becomes its ``paused_from``); one that ends
    it (completed, failed) ends the pause too.
    """
    return new_status in (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING)


def paused_next(run: RunRecord, nxt: Next) -> RunStatus | None:
    """A paused run's new ``paused_from`` after a transition ``nxt`` of its way back.

    ``nxt`` is the transition computed on ``run.paused_from`` (an answer or an
    event that would queue a waiting run); None when nothing changes. No
    wake-up: a paused run is not claimable.
    """
    if run.status is not RunStatus.PAUSED or nxt.status is run.paused_from:
        return None
    return nxt.status


def unpaused(run: RunRecord, now: datetime) -> Next:
    """The status ``unpause`` gives a paused run.

    ``running`` while its holder's lease is live (it finishes its superstep
    and goes on, or gives the run back queued); ``waiting`` when it was
    waiting and nothing it waits for came; else ``queued``.
    """
    if run.lease_owner is not None and run.lease_expires_at is not None \
            and run.lease_expires_at > now:
        return Next(RunStatus.RUNNING)
    if run.paused_from is RunStatus.WAITING:
        return Next(RunStatus.WAITING, notify=run.wake_at is not None and run.wake_at <= now)
    return _to(RunStatus.QUEUED)


def after_retry(run: RunRecord) -> Next | None:
    """A failed run queued again for a worker (``retry``); None when ``run`` is not failed.

    The worker that claims it resumes it from its head: the failed task runs again.
    """
    return _to(RunStatus.QUEUED) if run.status is RunStatus.FAILED else None
