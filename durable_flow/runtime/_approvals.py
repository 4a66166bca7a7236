"""The runtime's side of approvals: who answers (``by=``, ``via=``, ``comment=``), decisions.

``Runtime.respond``/``resume`` turn their ``by`` into an
:class:`~durable_flow.store._approval_rows.Answerer` the store checks and
records in the answer's transaction; ``Runtime.decisions`` reads the chain.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import get_args

from ..errors import InvalidInputError, RunNotFoundError
from ..model._approvals import Principal, principal_of
from ..model._decisions import Decision, DecisionVia
from ..model._records import PendingRequest
from ..store._approval_rows import Answerer
from ..store._protocols import CheckpointStore
from ._inspect import to_pending

__all__ = ["answerer", "decisions", "reassign"]

_VIAS = get_args(DecisionVia)


def answerer(by: Principal | str | None, via: str = "api", comment: str | None = None) -> Answerer:
    """Who answers, checked: ``by`` a Principal or id, ``via`` one of the decision channels."""
    if via not in _VIAS or via in ("policy", "runtime"):
        raise InvalidInputError(f"via= must be one of api, cli, ui, link, not {via!r}")
    if comment is not None and not isinstance(comment, str):
        raise InvalidInputError(f"comment= must be text, not {type(comment).__name__}")
    return Answerer(principal_of(by), via, comment)  # type: ignore[arg-type]  # checked above


async def decisions(store: CheckpointStore, run_id: str) -> list[Decision]:
    """The run's decisions, oldest first; ``RunNotFoundError`` for an unknown run."""
    if await store.get_run(run_id) is None:
        raise RunNotFoundError(run_id)
    return await store.decisions(run_id)


async def reassign(store: CheckpointStore, run_id: str, request_id: str, assignees: Sequence[str],
                   roles: Sequence[str], by: Principal | str | None) -> PendingRequest:
    """Give an open request to other people; recorded as a ``reassign`` decision."""
    people = Principal("request", tuple(assignees)).roles  # checked like names
    named = Principal("request", tuple(roles)).roles
    if not people and not named:
        raise InvalidInputError("reassign needs assignees= or roles= (someone to give it to)")
    who = principal_of(by)
    row = await store.reassign(run_id, request_id, people, named, None if who is None else who.id)
    return to_pending(row)
