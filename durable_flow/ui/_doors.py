"""The web app's doors: every page, API route, form and stream goes through one rule.

The rule is ``model/_access.py``'s (admin, operator, viewer, participant,
nobody). Here it is enforced: a run a principal may not see answers 404 (so
ids do not leak), an act their place does not allow answers 403, and
nothing is written either way. ``request.state.principal`` None is the
app's admin (the ``--token`` credential, or no token on localhost); a
principal holding the role ``admin`` is an admin too.

:func:`readable` is a dependency of the page and API routers: any route
whose path names a ``{run_id}`` checks "read" before it runs, so a route
added later is covered too. Writes (cancel, fork, reassign) check their own
act with :func:`require`.
"""

from __future__ import annotations

from fastapi import Request

from ..errors import NotAuthorizedError, RunNotFoundError
from ..model._access import ACTS, Access, access_of, allows, is_admin
from ..model._approvals import Principal, permits
from ..model._records import PendingRequest
from ..runtime._doors import run_access
from ..store._protocols import RunRecord
from ._service import Shown, UiService
from ._views import visible

__all__ = ["actor", "inbox_filter", "place", "readable", "require", "sees_all"]


def sees_all(who: Principal | None) -> bool:
    """Whether ``who`` is an admin (None: the app's own admin credential)."""
    return who is None or is_admin(who)


def actor(who: Principal | None) -> str:
    """The id an act is recorded ``by``: the principal's, or ``admin`` for the credential."""
    return "admin" if who is None else who.id


def inbox_filter(svc: UiService, who: Principal | None, tab: str) -> Shown | None:
    """What of the inbox ``who`` sees on ``tab`` (None: everything, the admin's "all").

    ``mine`` is what ``who`` may answer and is asked by name or role; ``all`` is
    every open request of every run ``who`` may read (the one rule: a viewer,
    an operator, who started it, who was asked in it), theirs to answer or not.
    """
    if sees_all(who) and tab != "mine":
        return None

    async def shown(batch: list[PendingRequest]) -> list[PendingRequest]:
        if tab == "mine" or who is None:
            return visible(batch, who, tab)
        readable: dict[str, bool] = {}
        kept = []
        for r in batch:
            if r.run_id not in readable:
                record = await svc.runtime.store.get_run(r.run_id)
                readable[r.run_id] = record is not None and allows(
                    await place(svc, record, who), "read")
            if readable[r.run_id] or permits(who, r.assignees, r.roles):
                kept.append(r)
        return kept
    return shown


async def place(svc: UiService, record: RunRecord, who: Principal | None) -> Access:
    """``who``'s place towards the run."""
    if sees_all(who):
        return Access.ADMIN
    return access_of(who, await run_access(svc.runtime.store, record))


async def require(svc: UiService, run_id: str, who: Principal | None, act: str) -> Access:
    """``who``'s place if it allows ``act``: else 404 (may not see it) or 403 (may see it)."""
    record = await svc.runtime.store.get_run(run_id) if isinstance(run_id, str) else None
    if record is None:
        raise RunNotFoundError(run_id)
    found = await place(svc, record, who)
    if found is Access.NOBODY:
        raise RunNotFoundError(run_id)  # the same answer as an unknown run
    if not allows(found, act):
        needed = ACTS.get(act, Access.ADMIN)
        raise NotAuthorizedError(actor(who), f"{act} run {run_id}",
                                 allowed=f"its {needed.name.lower()}s or an admin"
                                 if needed is not Access.ADMIN else "an admin")
    return found


async def readable(request: Request) -> None:
    """Router dependency: a route naming ``{run_id}`` needs "read" on that run."""
    run_id = request.path_params.get("run_id")
    if run_id is None:
        return
    await require(request.app.state.service, run_id, request.state.principal, "read")
