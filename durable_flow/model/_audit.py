"""Checking a run's audit trail: the keyed chain, its anchor, and answers bound to decisions.

What is checked (each problem named, none of them raised from here):

- the chain: every decision's digest over its predecessor's (from the
  chain's root: ``""``, or for a fork its source's head digest when it was
  forked), ``seq`` 1, 2, 3, ... without a gap (:func:`verify_chain`);
- the anchor: the run row's decision count and head digest, written in the
  transaction of every decision, must name the last decision, so deleting
  the newest decisions, or all of them, is caught;
- the answers: every answer stored on a request (``requests.answer``, what
  the run acts on) must be the answer of that request's latest answering
  decision (``answer`` or ``policy``).

The key is derived from ``DURABLE_FLOW_SECRET`` (:func:`audit_key`): with
it, a digest is an HMAC-SHA256 that someone who edits the database but does
not hold the secret cannot recompute; without it the chain is plain sha256,
which detects accidents, not an editor, and is reported as unkeyed.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._decisions import Decision, canonical_json, is_keyed, verify_chain

__all__ = [
    "SECRET_ENV",
    "AuditAnchor",
    "AuditReport",
    "all_keyed",
    "answer_problems",
    "audit_key",
    "chain_problems",
    "derive_key",
]

#: The environment variable holding the secret the audit chain is keyed under.
SECRET_ENV = "DURABLE_FLOW_SECRET"  # noqa: S105  (a variable name, not a secret)
_PURPOSE = b"durable-flow audit chain v1"
_ANSWERING = ("answer", "policy")


def derive_key(secret: str | bytes, purpose: bytes = _PURPOSE) -> bytes:
    """A key for one ``purpose`` derived from ``secret`` (HMAC-SHA256 of the purpose)."""
    raw = secret.encode() if isinstance(secret, str) else secret
    return hmac.new(raw, purpose, hashlib.sha256).digest()


def audit_key(secret: str | None = None) -> bytes | None:
    """The audit chain's key from ``secret`` (default ``DURABLE_FLOW_SECRET``); None unset."""
    value = os.environ.get(SECRET_ENV) if secret is None else secret
    return derive_key(value) if value else None


@dataclass(frozen=True, slots=True)
class AuditAnchor:
    """What a run row holds of its chain: ``count`` decisions, the last one's ``head`` digest.

    ``root`` is the digest the chain starts from (``""``; a fork's source head).
    """

    count: int = 0
    head: str = ""
    root: str = ""


@dataclass(frozen=True, slots=True)
class AuditReport:
    """What ``Runtime.verify_audit`` found for one run.

    ``ok`` is True when nothing is wrong; ``problems`` names each thing that
    is (the first broken record first). ``keyed`` is True when every
    decision's digest is an HMAC under the secret (a run without decisions
    is keyed when a secret is set); an unkeyed chain proves only that
    nobody changed it by accident. ``decisions`` counts the records read.
    """

    run_id: str
    ok: bool
    keyed: bool
    decisions: int
    problems: tuple[str, ...] = ()


def chain_problems(decisions: Sequence[Decision], anchor: AuditAnchor,
                   key: bytes | None) -> list[str]:
    """What is wrong with the chain of ``decisions`` (oldest first) against its ``anchor``."""
    problems: list[str] = []
    broken = verify_chain(decisions, key=key, root=anchor.root)
    if broken is not None:
        problems.append(broken[1])
    last = decisions[-1] if decisions else None
    count, head = (last.seq, last.digest) if last is not None else (0, anchor.root)
    if anchor.count > count:
        missing = "every decision" if last is None else f"decisions after {count}"
        problems.append(f"the run records {anchor.count} decision(s) but {count} are there: "
                        f"{missing} deleted")
    elif anchor.count < count or not hmac.compare_digest(anchor.head, head):
        problems.append(f"the run's anchor (decision {anchor.count}) does not match its last "
                        f"decision ({count}): the chain was changed after it was written")
    return problems


def answer_problems(requests: Iterable[tuple[str, Any]],
                    decisions: Iterable[Decision]) -> list[str]:
    """Answers ``(request id, answer)`` that are not their request's latest decision.

    ``decisions`` may hold a fork's source decisions before its own.
    """
    latest: Mapping[str, Decision] = {d.request_id: d for d in decisions if d.kind in _ANSWERING}
    problems = []
    for request_id, answer in requests:
        decision = latest.get(request_id)
        if decision is None:
            problems.append(f"the answer to {request_id!r} has no decision")
        elif canonical_json(decision.answer) != canonical_json(answer):
            problems.append(f"the answer to {request_id!r} is not the one its decision "
                            f"{decision.seq} records")
    return problems


def all_keyed(decisions: Sequence[Decision], key: bytes | None) -> bool:
    """Whether the chain is keyed: every digest an HMAC (none yet: a key is set)."""
    if not decisions:
        return key is not None
    return all(is_keyed(d.digest) for d in decisions)
