"""Decisions: the audit record of every answer, policy answer, escalation and timeout.

Each run's decisions form a hash chain. A decision's ``digest`` covers the
previous decision's digest (the chain's root for the first: ``""``, or for a
fork the digest its source chain had when it was forked) followed by the
canonical JSON of the record without its digest. Under a key (see
:mod:`durable_flow.model._audit`, derived from ``DURABLE_FLOW_SECRET``) it
is ``"hmac-sha256:"`` and the HMAC-SHA256 (hex), which nobody without the key
can recompute; without one it is the plain sha256 (hex), which anyone can;
``payload_digest`` is the sha256 of the canonical JSON of the payload the
person saw. Canonical JSON: keys sorted, no spaces, UTF-8, times as ISO 8601
UTC with microseconds. :func:`verify_chain` names the first record that an
edit or a deletion broke (``seq`` counts 1, 2, 3, ... per run, so a deleted
row leaves a gap even when it was the chain's first).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import orjson

__all__ = [
    "KEYED_PREFIX",
    "Decision",
    "DecisionKind",
    "DecisionVia",
    "canonical_json",
    "chain_digest",
    "is_keyed",
    "payload_digest",
    "seal",
    "verify_chain",
]

DecisionKind = Literal["answer", "policy", "escalation", "reassign", "timeout", "cancel",
                       "fork", "update", "pause", "unpause", "import", "withdrawn"]
DecisionVia = Literal["api", "cli", "ui", "link", "policy", "runtime"]


@dataclass(frozen=True, slots=True)
class Decision:
    """One recorded decision on a request of a run (``Runtime.decisions``).

    ``kind`` is ``"answer"``, ``"policy"``, ``"escalation"``, ``"reassign"``,
    ``"timeout"`` or ``"withdrawn"`` (the run ended at an exit while the
    request's task was parked) on a request, or an act on the whole run
    (``"import"``, ``"cancel"``, ``"fork"``, ``"update"``, ``"pause"``,
    ``"unpause"``; ``request_id`` and ``node`` are then empty); ``by`` the
    principal id (``policy:NAME`` for a policy,
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


#: How a keyed digest starts; a digest without it is a plain sha256.
KEYED_PREFIX = "hmac-sha256:"


def seal(previous: str, run_id: str, seq: int, request_id: str, node: str, kind: DecisionKind,
         *, answer: Any, by: str | None, via: DecisionVia, at: datetime, comment: str | None,
         payload: Any, key: bytes | None = None) -> Decision:
    """A new decision chained after the one whose digest is ``previous`` (``""`` first).

    With ``key`` its digest is an HMAC under it, else a plain sha256.
    """
    at = at.astimezone(UTC)
    draft = Decision(run_id, seq, request_id, node, kind, answer, by, via, at, comment,
                     payload_digest(payload), "")
    return Decision(run_id, seq, request_id, node, kind, answer, by, via, at, comment,
                    draft.payload_digest, chain_digest(previous, draft.body(), key))


def canonical_json(value: Any) -> bytes:
    """``value`` as canonical JSON bytes (sorted keys, compact, UTF-8)."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


def payload_digest(payload: Any) -> str:
    """The sha256 (hex) of the canonical JSON of ``payload``."""
    return hashlib.sha256(canonical_json(payload)).hexdigest()


def chain_digest(previous: str, body: dict[str, Any], key: bytes | None = None) -> str:
    """The digest of a record whose predecessor's digest is ``previous`` (``""`` first).

    Keyed (``"hmac-sha256:..."``) under ``key``, else the plain sha256 (hex).
    """
    data = previous.encode() + canonical_json(body)
    if key is None:
        return hashlib.sha256(data).hexdigest()
    return KEYED_PREFIX + hmac.new(key, data, hashlib.sha256).hexdigest()


def is_keyed(digest: str) -> bool:
    """Whether ``digest`` is an HMAC under a key (not a plain sha256)."""
    return digest.startswith(KEYED_PREFIX)


def verify_chain(decisions: Sequence[Decision], *, key: bytes | None = None,
                 root: str = "") -> tuple[int, str] | None:
    """Check one run's decisions (oldest first) from ``root``; None when intact.

    Otherwise ``(seq, reason)`` for the first broken record: the ``seq``
    that is missing before a gap, or of the record whose digest does not
    match (an edited record, or one after a deleted record). A keyed digest
    is checked under ``key``; without the key it cannot be checked, and
    that is a broken record too (reason says so).
    """
    previous = root
    expected = 1
    for decision in decisions:
        if decision.seq != expected:
            return expected, (f"decision {expected} is missing (the next one recorded is "
                              f"{decision.seq})")
        keyed = is_keyed(decision.digest)
        if keyed and key is None:
            return decision.seq, (f"decision {decision.seq} is keyed and no key is given "
                                  "(set DURABLE_FLOW_SECRET to check it)")
        if not hmac.compare_digest(chain_digest(previous, decision.body(), key if keyed else None),
                                   decision.digest):
            return decision.seq, f"decision {decision.seq} was changed (its digest does not match)"
        previous = decision.digest
        expected += 1
    return None


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="microseconds")
