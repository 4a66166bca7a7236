"""Verifying a run's audit trail (``Runtime.verify_audit``) and refusing a resume it does not back.

:func:`audit_report` reads the run's anchor and decisions in one read, its
requests, and for a fork the decisions of its source up to the digest the
fork's chain starts from (the answers a fork copied were decided there), and
names every problem (``model/_audit.py`` says what is checked).
:func:`check_backed` runs the same checks before a resume or a worker's
start claims anything, and raises ``AuditError``: an answer that is not
its decision's, a chain edited, re-chained or cut short, stops the run
before any node runs. Without the key a keyed chain's digests cannot be
checked there; its anchor and answers still are.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..errors import AuditError, RunNotFoundError
from ..model._audit import AuditReport, all_keyed, answer_problems, audit_key, chain_problems
from ..model._decisions import Decision, is_keyed
from ..store._protocols import CheckpointStore

__all__ = ["audit_report", "check_backed"]

_MAX_FORK_DEPTH = 100  # forks of forks: far more than any real lineage


async def audit_report(store: CheckpointStore, run_id: str, *, key: bytes | None = None,
                       use_env: bool = True) -> AuditReport:
    """Check the run's chain, its anchor and its answers (``RunNotFoundError``)."""
    if key is None and use_env:
        key = audit_key()
    if await store.get_run(run_id) is None:
        raise RunNotFoundError(run_id)
    decisions, problems = await _problems(store, run_id, key, strict=True)
    return AuditReport(run_id, not problems, all_keyed(decisions, key), len(decisions),
                       tuple(problems))


async def check_backed(store: CheckpointStore, run_id: str) -> None:
    """Raise ``AuditError`` when the run's answers or chain do not hold; writes nothing."""
    _, problems = await _problems(store, run_id, audit_key(), strict=False)
    if problems:
        # the chain and the answers are two reads: an answer another runtime recorded
        # between them (with its decision, in one transaction) shows in the second read
        # only; read both again, and refuse only what is still wrong
        _, problems = await _problems(store, run_id, audit_key(), strict=False)
    if problems:
        raise AuditError(run_id, problems)


async def _problems(store: CheckpointStore, run_id: str, key: bytes | None, *,
                    strict: bool) -> tuple[list[Decision], list[str]]:
    anchor, decisions = await store.audit_trail(run_id)
    checkable = strict or key is not None or not any(is_keyed(d.digest) for d in decisions)
    if checkable:
        problems = chain_problems(decisions, anchor, key)
    else:  # no key here to check the digests: the anchor still must name the last one
        problems = [p for p in chain_problems(decisions, anchor, None) if "keyed" not in p]
    lineage = await _lineage(store, run_id, anchor.root, problems)
    answers = [(r.id, r.answer) for r in await store.get_requests(run_id)
               if r.kind == "request" and r.answer is not None and not r.timed_out]
    problems += answer_problems(_readable(answers, problems if strict else None),
                                [*lineage, *decisions])
    return decisions, problems


def _readable(answers: list[tuple[str, bytes]],
              problems: list[str] | None) -> list[tuple[str, Any]]:
    """The answers that are JSON, decoded; the others named in ``problems``.

    A resume (``problems`` None) leaves them to the engine, which reports a
    damaged row as ``CheckpointCorruptedError``.
    """
    out = []
    for request_id, data in answers:
        try:
            out.append((request_id, orjson.loads(data)))
        except orjson.JSONDecodeError:
            if problems is not None:
                problems.append(f"the answer to {request_id!r} is not JSON (a damaged row)")
    return out


async def _lineage(store: CheckpointStore, run_id: str, root: str,
                   problems: list[str]) -> list[Decision]:
    """A fork's source decisions up to its root, oldest first (the source's own lineage first)."""
    found: list[list[Decision]] = []
    current = run_id
    for _ in range(_MAX_FORK_DEPTH):
        record = await store.get_run(current)
        if record is None or record.forked_from is None or not root:
            break
        source = record.forked_from.run_id
        anchor, decisions = await store.audit_trail(source)
        upto = next((i for i, d in enumerate(decisions) if d.digest == root), None)
        if upto is None:
            problems.append(f"the chain of {current!r} starts from a digest the decisions of "
                            f"its source run {source!r} do not hold")
            break
        found.append(decisions[:upto + 1])
        current, root = source, anchor.root
    return [d for chunk in reversed(found) for d in chunk]
