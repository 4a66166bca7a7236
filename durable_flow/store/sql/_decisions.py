"""Decisions on SQL: chained in the transaction that records the answer, listed oldest first.

The run row is locked (or the database serialises writers) in every
transaction that calls :func:`record_decisions_tx`, so reading the last
digest and appending after it cannot interleave with another writer. A new
decision is chained after the run row's anchor (``audit_count``,
``audit_head``), not after the last row found, and the anchor moves with it:
a deleted decision leaves a gap the next one cannot close. Digests are keyed
under ``DURABLE_FLOW_SECRET`` when it is set (``model/_audit.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import orjson

from ...model._audit import AuditAnchor, audit_key
from ...model._decisions import Decision, seal
from .._approval_rows import Answerer, DecisionDraft, check_permitted, decision_for
from .._rows import RequestRow
from . import _codec as t
from ._ops import Tx, execute, execute_many, fetch

if TYPE_CHECKING:
    from ._approval_queries import ApprovalQueries
    from ._tables import Queries

__all__ = ["anchor_tx", "approvals_of", "audit_trail_tx", "decisions_tx", "fork_root_tx", "permitted_drafts",
           "record_decisions_tx"]


def approvals_of(q: Queries) -> ApprovalQueries:
    """The approval statements of the dialect ``q`` was compiled for."""
    cached: ApprovalQueries | None = getattr(q, "approvals", None)
    if cached is not None:
        return cached
    from ._approval_queries import compiled_approvals

    return compiled_approvals(q.dialect)


def permitted_drafts(run_id: str, rows: Sequence[RequestRow], answers: Mapping[str, bytes],
                     answerer: Answerer | None, now: datetime) -> list[DecisionDraft]:
    """Check ``answerer`` may answer each row (``NotAuthorizedError``); draft their decisions."""
    for row in rows:
        check_permitted(run_id, row, answerer)
    return [decision_for(row, answers[row.id], answerer, now) for row in rows]


def record_decisions_tx(q: Queries, run_id: str, drafts: Sequence[DecisionDraft]) -> Tx[list[Decision]]:
    """Append ``drafts`` to the run's chain, each sealed after the one before."""
    if not drafts:
        return []
    a = approvals_of(q)
    anchor = yield from anchor_tx(q, run_id)
    seq, previous, key = anchor.count, anchor.head, audit_key()
    sealed: list[Decision] = []
    for draft in drafts:
        seq += 1
        decision = seal(previous, run_id, seq, draft.request_id, draft.node, draft.kind,
                        answer=draft.answer, by=draft.by, via=draft.via, at=draft.at,
                        comment=draft.comment, payload=draft.payload, key=key)
        sealed.append(decision)
        previous = decision.digest
    yield from execute_many(a.dec_insert, [_params(d) for d in sealed])
    yield from execute(a.anchor_set, run_id=run_id, count=seq, head=previous)
    return sealed


def anchor_tx(q: Queries, run_id: str) -> Tx[AuditAnchor]:
    """The run row's anchor of its chain (an unknown run: an empty one)."""
    rows = yield from fetch(approvals_of(q).anchor_get, run_id=run_id)
    if not rows:
        return AuditAnchor()
    row = rows[0]
    return AuditAnchor(int(row["audit_count"]), str(row["audit_head"]), str(row["audit_root"]))


def fork_root_tx(q: Queries, run_id: str, source_id: str) -> Tx[None]:
    """Start the chain of the fork ``run_id`` from its source's head digest."""
    source = yield from anchor_tx(q, source_id)
    if source.head:
        yield from execute(approvals_of(q).anchor_root, run_id=run_id, root=source.head)


def decisions_tx(q: Queries, run_id: str) -> Tx[list[Decision]]:
    """A run's decisions, oldest first."""
    rows = yield from fetch(approvals_of(q).dec_list, run_id=run_id)
    return [_decision(row) for row in rows]


def audit_trail_tx(q: Queries, run_id: str) -> Tx[tuple[AuditAnchor, list[Decision]]]:
    """A run's anchor and decisions, read together."""
    anchor = yield from anchor_tx(q, run_id)
    return anchor, (yield from decisions_tx(q, run_id))


def _params(d: Decision) -> dict[str, object]:
    return {"run_id": d.run_id, "seq": d.seq, "request_id": d.request_id, "node": d.node,
            "kind": d.kind, "answer": orjson.dumps(d.answer).decode(), "by": d.by, "via": d.via,
            "at": t.to_us(d.at), "comment": d.comment, "payload_digest": d.payload_digest,
            "digest": d.digest}


def _decision(row: Mapping[str, Any]) -> Decision:
    return Decision(run_id=row["run_id"], seq=row["seq"], request_id=row["request_id"],
                    node=row["node"], kind=row["kind"], answer=orjson.loads(row["answer"]),
                    by=row["by"], via=row["via"], at=t.from_us(row["at"]), comment=row["comment"],
                    payload_digest=row["payload_digest"], digest=row["digest"])
