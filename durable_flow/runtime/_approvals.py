"""The runtime's side of approvals: who answers (``by=``, ``via=``, ``comment=``), decisions.

``Runtime.respond``/``resume`` turn their ``by`` into an
:class:`~durable_flow.store._approval_rows.Answerer` the store checks and
records in the answer's transaction; ``Runtime.decisions`` reads the chain
and ``Runtime.verify_audit`` checks it (``_audit.py``, whose ``check_backed``
runs before every resume).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import get_args

from ..errors import InvalidInputError, RunNotFoundError, UnknownRequestError
from ..model._approvals import Principal, principal_of
from ..model._audit import AuditReport, audit_key
from ..model._decisions import Decision, DecisionVia
from ..model._records import PendingRequest
from ..store._approval_rows import Answerer, check_permitted
from ..store._protocols import CheckpointStore
from ._audit import audit_report, check_backed
from ._inspect import to_pending

__all__ = ["RuntimeApprovals", "answerer", "check_backed", "decisions", "reassign"]

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


class RuntimeApprovals:
    """``Runtime``'s approvals methods: decisions and their audit, reassignment, signed links."""

    store: CheckpointStore

    async def decisions(self, run_id: str) -> list[Decision]:
        """Every decision on the run's requests, oldest first (``RunNotFoundError``)."""
        return await decisions(self.store, run_id)

    async def verify_audit(self, run_id: str, *, secret: str | None = None) -> AuditReport:
        """Check the run's audit trail: the chain, its anchor in the run row, its answers.

        Digests are checked under ``secret`` (default ``DURABLE_FLOW_SECRET``).
        The report says whether the chain is keyed (an HMAC under the secret;
        unkeyed, plain sha256, proves only that nothing changed by accident)
        and names every problem: a record edited or re-chained, a decision
        missing (the newest ones, or all, deleted), an answer stored on a
        request that is not its decision's. ``RunNotFoundError`` for an
        unknown run.
        """
        return await audit_report(self.store, run_id, key=audit_key(secret))

    async def reassign(self, run_id: str, request_id: str, *, assignees: Sequence[str] = (),
                       roles: Sequence[str] = (), by: Principal | str | None) -> PendingRequest:
        """Give an open request to other people (an admin's act), recorded as a ``reassign``.

        Only they may answer it now; a notification is written with it.
        ``UnknownRequestError`` unless the request is open.
        """
        return await reassign(self.store, run_id, request_id, assignees, roles, by)

    async def approval_link(self, run_id: str, request_id: str, *, for_: Principal | str,
                            expires_in: timedelta = timedelta(days=2), base_url: str,
                            secret: str | None = None) -> str:
        """A signed, expiring link with which ``for_`` answers one open request, once.

        Signed with ``secret`` (default ``DURABLE_FLOW_SECRET``).
        ``UnknownRequestError`` unless the request is open; ``NotAuthorizedError``
        when ``for_`` may not answer it (its roles are the ``Principal``'s, or
        those of the user of that name).
        """
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
