"""Decisions: the audit record of every answer, policy answer, escalation and timeout.

Each run's decisions form a hash chain. A decision's ``digest`` is the
sha256 (hex) of the previous decision's digest (``""`` for the first)
followed by the canonical JSON of the record without its digest;
``payload_digest`` is the sha256 of the canonical JSON of the payload the
person saw. Canonical JSON: keys sorted, no spaces, UTF-8, times as ISO 8601
UTC with microseconds. :func:`verify_chain` names the first record that an
edit or a deletion broke (``seq`` counts 1, 2, 3, ... per run, so a deleted
row leaves a gap even when it was the chain's first).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import orjson

__all__ = [
    "Decision",
    "DecisionKind",
    "DecisionVia",
    "canonical_json",
    "chain_digest",
    "payload_digest",
    "seal",
    "verify_chain",
]

DecisionKind = Literal["answer", "policy", "escalation", "reassign", "timeout"]
DecisionVia = Literal["api", "cli", "ui", "link", "policy", "runtime"]


@dataclass(frozen=True, slots=True)
class Decision:
    """One recorded decision on a request of a run (``Runtime.decisions``).

    ``kind`` is ``"answer"``, ``"policy"``, ``"escalation"``, ``"reassign"``
    or ``"timeout"``; ``by`` the principal id (``policy:NAME`` for a policy,
    None for the runtime or an anonymous answer); ``via`` how it came
    (``"api"``, ``"cli"``, ``"ui"``, ``"link"``, ``"policy"``,
    ``"runtime"``). For an escalation or reassignment ``answer`` holds the
    new ``{"assignees": [...], "roles": [...]}``.
    """

    run_id: str
    seq: int
    request_id: str
    node: str
    kind: DecisionKind
    answer: Any
    by: str | None
    via: DecisionVia
    at: datetime
    comment: str | None
    payload_digest: str
    digest: str

    def body(self) -> dict[str, Any]:
        """The record the digest covers (everything but ``digest``)."""
        return {
            "run_id": self.run_id, "seq": self.seq, "request_id": self.request_id,
            "node": self.node, "kind": self.kind, "answer": self.answer, "by": self.by,
            "via": self.via, "at": _iso(self.at), "comment": self.comment,
            "payload_digest": self.payload_digest,
        }


def seal(previous: str, run_id: str, seq: int, request_id: str, node: str, kind: DecisionKind,
         *, answer: Any, by: str | None, via: DecisionVia, at: datetime, comment: str | None,
         payload: Any) -> Decision:
    """A new decision chained after the one whose digest is ``previous`` (``""`` first)."""
    at = at.astimezone(UTC)
    draft = Decision(run_id, seq, request_id, node, kind, answer, by, via, at, comment,
                     payload_digest(payload), "")
    return Decision(run_id, seq, request_id, node, kind, answer, by, via, at, comment,
                    draft.payload_digest, chain_digest(previous, draft.body()))


def canonical_json(value: Any) -> bytes:
    """``value`` as canonical JSON bytes (sorted keys, compact, UTF-8)."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


def payload_digest(payload: Any) -> str:
    """The sha256 (hex) of the canonical JSON of ``payload``."""
    return hashlib.sha256(canonical_json(payload)).hexdigest()


def chain_digest(previous: str, body: dict[str, Any]) -> str:
    """The digest of a record whose predecessor's digest is ``previous`` (``""`` first)."""
    return hashlib.sha256(previous.encode() + canonical_json(body)).hexdigest()


def verify_chain(decisions: Sequence[Decision]) -> tuple[int, str] | None:
    """Check one run's decisions (oldest first); None when intact.

    Otherwise ``(seq, reason)`` for the first broken record: the ``seq``
    that is missing before a gap, or of the record whose digest does not
    match (an edited record, or one after a deleted record).
    """
    previous = ""
    expected = 1
    for decision in decisions:
        if decision.seq != expected:
            return expected, (f"decision {expected} is missing (the next one recorded is "
                              f"{decision.seq})")
        if chain_digest(previous, decision.body()) != decision.digest:
            return decision.seq, f"decision {decision.seq} was changed (its digest does not match)"
        previous = decision.digest
        expected += 1
    return None


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="microseconds")
