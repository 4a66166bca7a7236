"""Time and events on SQL: due runs, the mailbox, closing waits, migrations' moves, graphs.

The statements (:class:`~durable_flow.store.sql._wait_queries.WaitQueries`)
are compiled once per dialect, like
:class:`~durable_flow.store.sql._tables.Queries`; the transaction functions
below are pieces the run and commit transactions call, plus the mailbox's
and the graphs' own transactions. Every rule about which event goes to
which wait is :func:`~durable_flow.store._rows.match_mail`, shared with the
memory store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...errors import RunNotFoundError, RunNotResumableError
from ...model._clock import utcnow
from ...model._records import RunStatus
from ...model._serde import as_bytes, decode
from .._machine import after_event, after_waiting_commit, paused_next
from .._protocols import Carry, Lease, MailRow, RequestRow, RunRecord, match_mail
from . import _codec as t
from ._ops import Notify, Tx, execute, fetch, lock_run
from ._shared import check_lease

if TYPE_CHECKING:
    from ._tables import Queries
    from ._wait_queries import WaitQueries

__all__ = [
    "carry_tx", "deliver_tx", "due_runs_tx", "get_graph_tx", "get_mail_tx",
    "put_graph_tx", "send_event_tx", "set_version_tx", "settle_held_tx", "settle_tx", "wait_event_tx",
    "waiting_tx", "waits_of",
]



def waits_of(q: Queries) -> WaitQueries:
    """The wait statements of the dialect ``q`` was compiled for.

    Statements read back from the statement cache (``_cache.py``) carry
    theirs, so SQLAlchemy is imported only when something must be compiled.
    """
    cached: WaitQueries | None = getattr(q, "waits", None)
    if cached is not None:
        return cached
    from ._wait_queries import compiled_waits

    return compiled_waits(q.dialect)


def mail_from_row(row: Mapping[str, Any]) -> MailRow:
    """Rebuild a :class:`MailRow`."""
    return MailRow(run_id=row["run_id"], seq=row["seq"], name=row["name"],
                   payload=as_bytes(row["payload"]), sent_at=t.from_us(row["sent_at"]),
                   request_id=row["request_id"],
                   delivered_at=None if row["delivered_at"] is None
                   else t.from_us(row["delivered_at"]))


# -- pieces of the run and commit transactions ---------------------------------------------


def deliver_tx(q: Queries, run_id: str, now: datetime, *, only: str | None = None) -> Tx[int]:
    """Deliver kept events to open event waits (only to wait ``only`` when given); how many."""
    w = waits_of(q)
    kept = [mail_from_row(r) for r in (yield from fetch(w.mail_kept, run_id=run_id))]
    if not kept:
        return 0
    waits = [t.request_from_row(r)
             for r in (yield from fetch(w.open_event_waits, run_id=run_id))]
    if only is not None:
        waits = [r for r in waits if r.id == only]
    pairs = match_mail(waits, kept, _names(waits))
    at = t.to_us(now)
    for event, wait in pairs:
        yield from execute(w.deliver, run_id=run_id, request_id=wait.id, payload=event.payload,
                           now=at)
        yield from execute(w.mail_take, run_id=run_id, seq=event.seq, request_id=wait.id,
                           now=at)
    return len(pairs)


def _names(waits: list[RequestRow]) -> dict[str, str]:
    """The event name each wait waits for (stored as its payload)."""
    names: dict[str, str] = {}
    for wait in waits:
        try:
            name = decode(wait.payload)
        except (ValueError, TypeError):
            continue  # a damaged wait takes nothing; reading it fails its run
        if isinstance(name, str):
            names[wait.id] = name
    return names


def settle_tx(q: Queries, run_id: str, now: datetime) -> Tx[bool]:
    """A claim's first step: deliver kept events, close (or escalate) due waits; True if any."""
    delivered = yield from deliver_tx(q, run_id, now)
    from ._outbox import deadlines_tx  # approvals: a deadline may escalate instead

    changed = yield from deadlines_tx(q, run_id, now)
    return bool(delivered or changed)


def settle_held_tx(q: Queries, lease: Lease) -> Tx[bool]:
    """At a barrier of a run with parked tasks: deliver kept events, close due waits.

    The same step a claim takes first, under the lease that already holds
    the run (raises ``LeaseLostError`` when it is gone); True if anything changed.
    """
    yield from check_lease(q, lease)
    return (yield from settle_tx(q, lease.run_id, utcnow()))


def waiting_tx(q: Queries, run_id: str, now: datetime,
               parked_on: Sequence[str] = ()) -> Tx[None]:
    """After a commit left the run waiting: queue it if an event or answer came, else set its wake.

    ``parked_on``: requests the run's parked tasks wait for, open when the
    engine looked; one answered since queues the run.
    """
    w = waits_of(q)
    answered = False
    for rid in parked_on:
        rows = yield from fetch(q.req_get, run_id=run_id, request_id=rid)
        answered = answered or bool(rows and rows[0]["answer"] is not None)
    delivered = bool((yield from deliver_tx(q, run_id, now)))
    nxt = after_waiting_commit(delivered=delivered, answered=answered)
    if nxt.status is not RunStatus.WAITING:
        run = t.run_from_row((yield from fetch(q.run_get, run_id=run_id))[0])
        if (back := paused_next(run, nxt)) is not None:  # paused: its way back is queued
            yield from execute(q.run_set_paused_from, run_id=run_id, from_status=back.value)
            return
        yield from execute(q.run_set_status, run_id=run_id, new_status=nxt.status.value,
                           now=t.to_us(now))
        if nxt.notify:
            yield Notify(run_id)
        return
    rows = yield from fetch(w.next_due, run_id=run_id)
    yield from execute(w.run_set_wake, run_id=run_id, wake=rows[0]["due"] if rows else None)


def due_runs_tx(q: Queries, name: str, version: str, now: datetime, n: int) -> Tx[list[RunRecord]]:
    """Up to ``n`` waiting runs of one workflow version whose wake time has come."""
    rows = yield from fetch(waits_of(q).run_due, workflow_name=name, workflow_version=version,
                            now=t.to_us(now), n=n)
    return [t.run_from_row(row) for row in rows]


def carry_tx(q: Queries, run_id: str, carry: Carry, checkpoint_id: str) -> Tx[None]:
    """Move the rows recorded at ``carry.source`` onto ``checkpoint_id``, renaming nodes."""
    w = waits_of(q)
    key = {"run_id": run_id, "checkpoint_id": carry.source}
    for nodes, move in ((w.req_nodes, w.req_move), (w.tw_nodes, w.tw_move),
                        (w.step_nodes, w.step_move)):
        for row in (yield from fetch(nodes, **key)):
            old = row["node"]
            yield from execute(move, **key, node=old, new_checkpoint=checkpoint_id,
                               new_node=carry.nodes.get(old, old))


def set_version_tx(q: Queries, run_id: str, version: str, signature: str) -> Tx[None]:
    """Record that the run now runs on another version of its workflow."""
    yield from execute(waits_of(q).run_set_version, run_id=run_id, version=version,
                       signature=signature)


# -- the mailbox and the graphs -------------------------------------------------------------


def send_event_tx(q: Queries, run_id: str, name: str, payload: bytes) -> Tx[RunRecord]:
    """Keep an event; deliver it at once when no execution holds the run (see ``Mailbox``)."""
    rows = yield from lock_run(q.run_get_locked, run_id)
    if not rows:
        raise RunNotFoundError(run_id)
    run, now = t.run_from_row(rows[0]), utcnow()
    if run.status.is_final:
        raise RunNotResumableError(run_id, run.status.value)
    w = waits_of(q)
    seq = (yield from fetch(w.mail_last, run_id=run_id))[0]["seq"] + 1
    yield from execute(w.mail_insert, run_id=run_id, seq=seq, name=name, payload=payload,
                       sent_at=t.to_us(now), request_id=None, delivered_at=None)
    held = run.lease_expires_at is not None and run.lease_expires_at > now
    delivered = not held and bool((yield from deliver_tx(q, run_id, now)))
    nxt = after_event(run.paused_from or run.status, held=held, delivered=delivered)
    if (back := paused_next(run, nxt)) is not None:  # recorded; it goes on after unpause
        yield from execute(q.run_set_paused_from, run_id=run_id, from_status=back.value)
    elif run.status is not RunStatus.PAUSED and nxt.status is not run.status:
        yield from execute(q.run_set_status, run_id=run_id, new_status=nxt.status.value,
                           now=t.to_us(now))
    if nxt.notify and run.status is not RunStatus.PAUSED:
        yield Notify(run_id)
    return t.run_from_row((yield from fetch(q.run_get, run_id=run_id))[0])


def wait_event_tx(q: Queries, lease: Lease, wait: RequestRow) -> Tx[RequestRow]:
    """Record an event wait under the lease and deliver it a kept event if there is one."""
    yield from check_lease(q, lease)
    yield from execute(q.req_insert, **t.request_params(wait, lease.run_id))
    yield from deliver_tx(q, lease.run_id, utcnow(), only=wait.id)
    rows = yield from fetch(q.req_get, run_id=lease.run_id, request_id=wait.id)
    return t.request_from_row(rows[0])


def get_mail_tx(q: Queries, run_id: str) -> Tx[list[MailRow]]:
    """A run's events in the order sent."""
    return [mail_from_row(r) for r in (yield from fetch(waits_of(q).mail_all, run_id=run_id))]


def put_graph_tx(q: Queries, signature: str, workflow_name: str, version: str,
                 description: bytes) -> Tx[None]:
    """Keep a graph's description unless its signature is kept already."""
    yield from execute(waits_of(q).graph_insert, signature=signature,
                       workflow_name=workflow_name, workflow_version=version,
                       description=description.decode(), created_at=t.to_us(utcnow()))


def get_graph_tx(q: Queries, signature: str) -> Tx[bytes | None]:
    """The description kept for a signature, or None."""
    rows = yield from fetch(waits_of(q).graph_get, signature=signature)
    return str(rows[0]["description"]).encode() if rows else None
