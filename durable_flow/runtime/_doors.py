"""The runtime's side of "who may do what": ``by=`` of the acts on a whole run, recorded.

``Runtime.run``/``submit``/``fork`` record who started a run
(``RunInfo.started_by``); ``cancel`` (:class:`Doors`), ``fork`` and
``update_state`` write a decision (kinds ``"cancel"``, ``"fork"``, ``"update"``) in the transaction
that does the act. The library records and does not refuse (its caller is
trusted code); the web app and the API refuse with the rule of
``model/_access.py`` before they call it. :func:`run_access` reads what that
rule needs of a stored run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic_core import to_jsonable_python

from ..errors import InvalidInputError, RunNotFoundError, RunNotResumableError
from ..model._access import RunAccess
from ..model._approvals import Principal, principal_of
from ..model._clock import utcnow
from ..model._decisions import DecisionKind, DecisionVia, payload_digest
from ..model._records import RunInfo
from ..store._approval_rows import Answerer, DecisionDraft, approval_of, check_permitted
from ..store._protocols import CheckpointStore, RunRecord
from ._execution import Executor
from ._inspect import Inspector

__all__ = ["Doors", "check_answerer", "fork_decision", "run_access", "run_decision",
           "started_by", "update_decision"]

_VIAS = ("api", "cli", "ui", "runtime")


def started_by(by: Principal | str | None) -> str | None:
    """The principal id ``by=`` names (checked), or None."""
    who = principal_of(by)
    return None if who is None else who.id


def run_decision(kind: DecisionKind, by: Principal | str | None, via: str, *,
                 answer: Any = None, payload: Any = None,
                 comment: str | None = None) -> DecisionDraft:
    """A decision on the whole run (no request: ``request_id`` and ``node`` empty).

    ``via`` is ``"api"`` (the default of the library), ``"cli"``, ``"ui"`` or
    ``"runtime"``; ``payload`` what its ``payload_digest`` covers.
    """
    if via not in _VIAS:
        raise InvalidInputError(f"via= must be one of {', '.join(_VIAS)}, not {via!r}")
    if comment is not None and not isinstance(comment, str):
        raise InvalidInputError(f"comment= must be text, not {type(comment).__name__}")
    via_: DecisionVia = via  # type: ignore[assignment]  # checked above
    return DecisionDraft("", "", kind, answer, started_by(by), via_, utcnow(), comment,
                         payload)


def plain(value: Any) -> Any:
    """``value`` as JSON data (models, dates, ...), for a digest of what was given."""
    try:
        return to_jsonable_python(value, fallback=repr)
    except (TypeError, ValueError):  # pragma: no cover - fallback=repr takes anything
        return repr(value)


async def fork_decision(store: CheckpointStore, source: RunRecord, checkpoint_id: str,
                        update: Mapping[str, Any] | None, by: Principal | str | None,
                        via: str) -> DecisionDraft:
    """The ``"fork"`` decision that starts a fork's chain.

    It names the source run, the checkpoint and the source chain's head
    digest (``""`` when the source has no decisions), and the digest of
    ``update`` (``payload_digest``, None without one) with its field names.
    """
    chain = await store.decisions(source.run_id)
    data = plain(dict(update)) if update else None
    answer = {"source_run_id": source.run_id, "checkpoint_id": checkpoint_id,
              "source_head": chain[-1].digest if chain else "",
              "update_digest": None if data is None else payload_digest(data),
              "fields": sorted(update) if update else []}
    return run_decision("fork", by, via, answer=answer, payload=data)


def update_decision(values: Mapping[str, Any], as_node: str | None,
                    by: Principal | str | None, via: str) -> DecisionDraft:
    """The ``"update"`` decision of ``update_state``: the fields, ``as_node`` and their digest."""
    data = plain(dict(values))
    return run_decision("update", by, via, payload=data, answer={
        "fields": sorted(values), "as_node": as_node, "update_digest": payload_digest(data)})


async def run_access(store: CheckpointStore, record: RunRecord) -> RunAccess:
    """What the authorization rule reads of a stored run (its requests: every one it had)."""
    rows = await store.get_requests(record.run_id)
    asked = tuple(dict.fromkeys(
        who for approval in (approval_of(r) for r in rows if r.kind == "request")
        for who in ((approval.assignees, approval.roles), *approval.before)))
    return RunAccess(operators=record.operators, viewers=record.viewers,
                     started_by=record.started_by, requests=asked)


async def check_answerer(store: CheckpointStore, run_id: str, responses: Mapping[str, Any] | None,
                         who: Answerer | None) -> None:
    """``NotAuthorizedError`` unless ``who`` may answer every request ``responses`` names.

    Checked before anything else, so re-sending an identical answer (a no-op
    for those who may) tells nothing to those who may not. Ids that name no
    request are left to the usual checks.
    """
    if not responses:
        return
    rows = {r.id: r for r in await store.get_requests(run_id) if r.kind == "request"}
    for request_id in responses:
        row = rows.get(request_id) if isinstance(request_id, str) else None
        if row is not None:
            check_permitted(run_id, row, who)


class Doors:
    """The acts on a whole run that are not starting or continuing it: ``cancel``."""

    def __init__(self, store: CheckpointStore, executor: Executor) -> None:
        self.store = store
        self.executor = executor

    async def cancel(self, run_id: str, by: Principal | str | None, via: str,
                     comment: str | None) -> RunInfo:
        """``Runtime.cancel``: a ``"cancel"`` decision ``by``, then the run cancelled."""
        decision = run_decision("cancel", by, via, comment=comment)
        record = await self.store.get_run(run_id)
        if record is None:
            raise RunNotFoundError(run_id)
        if record.status.is_final:
            raise RunNotResumableError(run_id, record.status.value, "cancelled")
        if not await self.executor.cancel(run_id, decision):
            await self.store.cancel_run(run_id, decision)
        cancelled = await self.store.get_run(run_id)
        if cancelled is None:  # pragma: no cover - runs are never deleted
            raise RunNotFoundError(run_id)
        return Inspector.info(cancelled)
