"""Approvals at the runtime: answers and who gives them, the inbox, decisions, links.

:class:`Approvals` is what ``Runtime.respond``, ``pending_requests``,
``decisions``, ``verify_audit``, ``reassign`` and ``approval_link`` do.
:func:`answerer` turns ``by=``/``via=``/``comment=`` into the
:class:`~durable_flow.store._approval_rows.Answerer` the store checks and
records in the answer's transaction; the audit chain is checked by
``_audit.py``, whose ``check_backed`` runs before every resume.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, cast, get_args

from ..errors import InvalidInputError, RunLockedError, RunNotFoundError, UnknownRequestError
from ..model._approvals import Principal, principal_of
from ..model._audit import AuditReport, audit_key
from ..model._decisions import Decision, DecisionVia
from ..model._records import PendingRequest, RunStatus
from ..store._approval_rows import Answerer, check_permitted
from ..store._protocols import CheckpointStore, RunRecord
from ._audit import audit_report
from ._doors import check_answerer
from ._inputs import check_mapping
from ._inspect import to_pending
from ._responses import check_responses, only_repeats, parked_repeats
from ._signals import signals_for

__all__ = ["RESPOND_LOCK_WAIT", "Approvals", "answerer"]

#: How long ``respond`` waits for an execution that holds the run (seconds).
RESPOND_LOCK_WAIT = 10.0

_VIAS = get_args(DecisionVia)


def answerer(by: Principal | str | None, via: str = "api", comment: str | None = None) -> Answerer:
    """Who answers, checked: ``by`` a Principal or id, ``via`` one of the decision channels."""
    if via not in _VIAS or via in ("policy", "runtime"):
        raise InvalidInputError(f"via= must be one of api, cli, ui, link, not {via!r}")
    if comment is not None and not isinstance(comment, str):
        raise InvalidInputError(f"comment= must be text, not {type(comment).__name__}")
    return Answerer(principal_of(by), via, comment)  # type: ignore[arg-type]  # checked above


class Approvals:
    """A store's approvals: answering, the inbox, decisions and their audit, reassignment, links."""

    def __init__(self, store: CheckpointStore) -> None:
        self.store = store

    async def respond(self, run_id: str, responses: Mapping[str, Any],
                      who: Answerer) -> RunRecord:
        """``Runtime.respond``: record answers (no execution); the run's row after them."""
        check_mapping("responses", responses)
        if not responses:
            raise InvalidInputError("responses must answer at least one request")
        record = await self._require(run_id)
        await check_answerer(self.store, run_id, responses, who)
        if record.status.is_final and await only_repeats(self.store, record, responses):
            return record
        answers, repeated = await check_responses(self.store, record, responses)
        if not answers and await parked_repeats(self.store, record, repeated):
            return record  # taken already by the running executor
        updated = await self._when_free(run_id, answers, who)
        if updated.status is RunStatus.QUEUED:
            signals_for(self.store).wake()
        return updated

    async def _when_free(self, run_id: str, answers: Mapping[str, bytes],
                         who: Answerer) -> RunRecord:
        """``store.respond``, sent again while another execution holds the run for a moment."""
        give_up, pause = time.monotonic() + RESPOND_LOCK_WAIT, 0.02
        while True:
            try:
                return await self.store.respond(run_id, answers, who)
            except RunLockedError:
                if time.monotonic() + pause > give_up:
                    raise
                await asyncio.sleep(pause)
                pause = min(pause * 2, 0.5)

    async def pending(self, workflow_name: str | None) -> list[PendingRequest]:
        """``Runtime.pending_requests``: the open requests a person may answer now."""
        views = getattr(self.store, "pending_views", None)  # SQL stores: straight from the rows
        if views is not None and (found := await views(workflow_name=workflow_name)) is not None:
            return cast("list[PendingRequest]", found)
        schemas: dict[bytes, Any] = {}  # otherwise (or a damaged row, to name it) the usual way
        return [to_pending(r, schemas) for r in await self.store.pending_requests(
            workflow_name=workflow_name)]

    async def decisions(self, run_id: str) -> list[Decision]:
        """The run's decisions, oldest first; ``RunNotFoundError`` for an unknown run."""
        await self._require(run_id)
        return await self.store.decisions(run_id)

    async def verify_audit(self, run_id: str, secret: str | None) -> AuditReport:
        """The report on the run's audit trail, digests checked under ``secret``."""
        return await audit_report(self.store, run_id, key=audit_key(secret))

    async def reassign(self, run_id: str, request_id: str, assignees: Sequence[str],
                       roles: Sequence[str], by: Principal | str | None,
                       via: str = "api") -> PendingRequest:
        """Give an open request to other people; recorded as a ``reassign`` decision."""
        people = Principal("request", tuple(assignees)).roles  # checked like names
        named = Principal("request", tuple(roles)).roles
        if not people and not named:
            raise InvalidInputError("reassign needs assignees= or roles= (someone to give it to)")
        who = answerer(by, via)  # via: api, cli, ui or link
        row = await self.store.reassign(run_id, request_id, people, named,
                                        None if who.principal is None else who.principal.id,
                                        who.via)
        return to_pending(row)

    async def link(self, run_id: str, request_id: str, for_: Principal | str,
                   expires_in: timedelta, base_url: str, secret: str | None) -> str:
        """``Runtime.approval_link``: a signed link with which ``for_`` answers one request."""
        who = principal_of(for_)
        assert who is not None  # for_ is required
        rows = {r.id: r for r in await self.store.get_requests(run_id)}
        row = rows.get(request_id)
        if row is None or row.kind != "request" or row.answer is not None:
            raise UnknownRequestError(run_id, request_id)
        if not who.roles:
            user = await self.store.get_user(who.id)
            who = Principal(who.id, user.roles) if user is not None else who
        check_permitted(run_id, row, Answerer(who))
        from .people._links import LinkSigner  # itsdangerous, only for links

        signer = LinkSigner(secret) if secret is not None else LinkSigner.from_env()
        return signer.url(base_url, run_id, request_id, who.id, expires_in)

    async def _require(self, run_id: str) -> RunRecord:
        record = await self.store.get_run(run_id)
        if record is None:
            raise RunNotFoundError(run_id)
        return record

