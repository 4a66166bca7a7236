"""What ``import`` checks before it writes a row: the signature, every row, its references, the chain.

An exported document is data from outside: it is read back as the store
would read its own rows, so a row the store could not read (a status that
is not a ``RunStatus``, a checkpoint source, wait kind, decision kind or
channel that does not exist, JSON that does not parse), a reference to a
checkpoint the document does not hold, two rows with one key, a decision
chain that does not verify from its anchor, or an answer that is not its
decision's, refuses the whole document before anything is written.

Signatures: ``export`` adds ``"signature"``, an HMAC-SHA256 under a key
derived from ``DURABLE_FLOW_SECRET`` over the canonical JSON of the rest of
the document. With a secret set, ``import`` refuses a signature that does
not match and an unsigned document (unless ``unsigned=True``); a signed
document cannot be checked without the secret, and is refused too unless
``unsigned=True``.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, get_args

import orjson

from ..errors import DurableFlowError, InvalidInputError
from ..model._audit import AuditAnchor, answer_problems, chain_problems, derive_key
from ..model._decisions import Decision, DecisionKind, DecisionVia, canonical_json
from ..model._records import RunStatus

__all__ = ["SIGNATURE", "check_rows", "check_signature", "sign"]

#: The document key that holds the signature.
SIGNATURE = "signature"
_PREFIX = "hmac-sha256:"
_PURPOSE = b"durable-flow export v1"
_STATUSES = frozenset(s.value for s in RunStatus)
_KINDS = frozenset(get_args(DecisionKind))
_VIAS = frozenset(get_args(DecisionVia))
_KEYS: dict[str, tuple[str, ...]] = {
    "runs": ("run_id",), "checkpoints": ("checkpoint_id",),
    "channel_values": ("thread", "channel", "seq"), "log_chunks": ("thread", "seq", "channel"),
    "task_writes": ("checkpoint_id", "node"), "steps": ("checkpoint_id", "node", "name"),
    "requests": ("request_id",), "mailbox": ("seq",), "decisions": ("seq",),
    "notifications": ("id",), "graphs": ("signature",),
}


def sign(document: Mapping[str, Any], secret: str) -> str:
    """The signature of ``document`` (without its own ``signature`` key) under ``secret``."""
    body = {k: v for k, v in document.items() if k != SIGNATURE}
    mac = hmac.new(derive_key(secret, _PURPOSE), canonical_json(body), hashlib.sha256)
    return _PREFIX + mac.hexdigest()


def check_signature(document: Mapping[str, Any], secret: str | None, *, unsigned: bool) -> bool:
    """Check the document's signature (see the module); True when it was signed and matches."""
    given = document.get(SIGNATURE)
    if given is None:
        if secret and not unsigned:
            raise InvalidInputError("this document is not signed and DURABLE_FLOW_SECRET is set: "
                                    "import it with --unsigned only if you trust where it came "
                                    "from")
        return False
    if not secret:
        if unsigned:
            return False
        raise InvalidInputError("this document is signed but DURABLE_FLOW_SECRET is not set, so "
                                "the signature cannot be checked (set it, or pass --unsigned)")
    if not isinstance(given, str) or not hmac.compare_digest(given, sign(document, secret)):
        raise InvalidInputError("the document's signature does not match: it was changed after "
                                "export, or signed under another DURABLE_FLOW_SECRET")
    return True


def check_rows(run_id: str, tables: Mapping[str, list[dict[str, Any]]], key: bytes | None,
               audited: bool, *, unsigned: bool = False) -> None:
    """Refuse (``InvalidInputError``, every problem named) rows the store would not hold.

    ``audited``: the document carries the run row's anchor (``audit_count``,
    ...); older documents do not, and their chain is anchored at its last
    decision. Without ``key``, keyed digests cannot be checked: refused
    unless ``unsigned`` (the caller trusts the source; anchor, sequence and
    answers are still checked, and ``verify_audit`` reports it later).
    """
    problems: list[str] = []
    for table, rows in tables.items():
        _unique(table, rows, problems)
    _readable(tables, problems)
    if not problems:
        _references(tables, problems)
        _chain(run_id, tables, key, audited, problems, unsigned=unsigned)
    if problems:
        shown = "; ".join(problems[:10]) + ("; ..." if len(problems) > 10 else "")
        raise InvalidInputError(f"the document cannot be imported, nothing was written: {shown}")


def _unique(table: str, rows: Sequence[Mapping[str, Any]], problems: list[str]) -> None:
    seen: set[tuple[Any, ...]] = set()
    for row in rows:
        key = tuple(row[c] for c in _KEYS.get(table, ()))
        if key in seen:
            problems.append(f"two rows of {table!r} have the key {key!r}")
        seen.add(key)


def _readable(tables: Mapping[str, list[dict[str, Any]]], problems: list[str]) -> None:
    """Every row read back the way the store reads it."""
    from ..store.sql import _codec as t

    readers: dict[str, Callable[[Mapping[str, Any]], object]] = {
        "runs": t.run_from_row, "checkpoints": t.checkpoint_from_row,
        "requests": t.request_from_row, "task_writes": t.task_write_from_row,
        "decisions": _decision,
    }
    for table, rows in tables.items():
        read = readers.get(table)
        for row in rows:
            try:
                if read is not None:
                    read(row)
                _payloads(table, row)
                _statuses(table, row)
            except (DurableFlowError, ValueError, TypeError, KeyError) as exc:
                problems.append(f"a row of {table!r} cannot be read back: {exc}")


def _payloads(table: str, row: Mapping[str, Any]) -> None:
    """Payload columns (JSON bytes) parse; so do the JSON text columns of notifications."""
    for name in ("data", "payload", "response_schema", "answer", "approval"):
        value = row.get(name)
        if isinstance(value, bytes):
            orjson.loads(value)
    if table == "notifications":
        orjson.loads(str(row["body"]))


def _statuses(table: str, row: Mapping[str, Any]) -> None:
    if table in ("runs", "checkpoints") and row["status"] not in _STATUSES:
        raise ValueError(f"status {row['status']!r} is not a run status")
    if table == "runs" and int(row["audit_count"]) < 0:
        raise ValueError("audit_count is negative")


def _decision(row: Mapping[str, Any]) -> Decision:
    from ..store.sql import _codec as t

    if row["kind"] not in _KINDS:
        raise ValueError(f"decision kind {row['kind']!r} is unknown")
    if row["via"] not in _VIAS:
        raise ValueError(f"decision via {row['via']!r} is unknown")
    return Decision(run_id=row["run_id"], seq=row["seq"], request_id=row["request_id"],
                    node=row["node"], kind=row["kind"], answer=orjson.loads(row["answer"]),
                    by=row["by"], via=row["via"], at=t.from_us(row["at"]),
                    comment=row["comment"], payload_digest=row["payload_digest"],
                    digest=row["digest"])


def _references(tables: Mapping[str, list[dict[str, Any]]], problems: list[str]) -> None:
    """Every checkpoint a row names is in the document; every thread position too."""
    checkpoints = {str(r["checkpoint_id"]): r for r in tables["checkpoints"]}
    (run,) = tables["runs"]
    head = run["head_checkpoint_id"]
    if head is not None and head not in checkpoints:
        problems.append(f"the run's head {head!r} is not among its checkpoints")
    for cp in checkpoints.values():
        parent = cp["parent_id"]
        if parent is not None and parent not in checkpoints:
            problems.append(f"checkpoint {cp['checkpoint_id']!r} continues {parent!r}, which "
                            "is not in the document")
    for table in ("task_writes", "steps", "requests"):
        for row in tables[table]:
            if row["checkpoint_id"] not in checkpoints:
                problems.append(f"a row of {table!r} names checkpoint {row['checkpoint_id']!r}, "
                                "which is not in the document")
    positions = {(str(r["thread"]), int(r["seq"])) for r in checkpoints.values()}
    for table in ("channel_values", "log_chunks"):
        for row in tables[table]:
            if (row["thread"], row["seq"]) not in positions:
                problems.append(f"a row of {table!r} is at {row['thread']!r}#{row['seq']}, where "
                                "the document has no checkpoint")


def _chain(run_id: str, tables: Mapping[str, list[dict[str, Any]]], key: bytes | None,
           audited: bool, problems: list[str], *, unsigned: bool) -> None:
    """The decisions verify from the run row's anchor; every answer is its decision's."""
    decisions = sorted((_decision(r) for r in tables["decisions"]), key=lambda d: d.seq)
    (run,) = tables["runs"]
    if audited:
        anchor = AuditAnchor(int(run["audit_count"]), str(run["audit_head"]),
                             str(run["audit_root"]))
    else:  # written before the anchor existed: anchored at the chain as it is
        last = decisions[-1] if decisions else None
        anchor = AuditAnchor(0 if last is None else last.seq, "" if last is None else last.digest)
    found = chain_problems(decisions, anchor, key)
    if unsigned and key is None:
        found = [p for p in found if "no key is given" not in p]
    problems += found
    answers = _answers(tables["requests"])
    if run["forked_from"] is not None:  # copied answers were decided in the source run
        decided = {d.request_id for d in decisions}
        answers = [(rid, a) for rid, a in answers if rid in decided]
    problems += answer_problems(answers, decisions)
    problems += [f"decision {d.seq} belongs to run {d.run_id!r}" for d in decisions
                 if d.run_id != run_id]


def _answers(rows: Iterable[Mapping[str, Any]]) -> list[tuple[str, Any]]:
    return [(str(r["request_id"]), orjson.loads(r["answer"])) for r in rows
            if r["kind"] == "request" and r["answer"] is not None and not r["timed_out"]]
