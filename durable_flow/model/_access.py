"""Who may do what to a run: the one authorization rule of every door.

A principal stands towards a run in one of five places, highest first
(:class:`Access`):

* **admin**: the ``--token`` credential, or a principal holding the role
  ``admin`` (:data:`ADMIN_ROLE`); may do everything;
* **operator**: holds one of the workflow's ``operators=`` roles; may read,
  cancel, fork, update, pause, unpause, resume and retry its runs;
* **viewer**: holds one of the workflow's ``viewers=`` roles; may read them;
* **participant**: started the run (``RunInfo.started_by``), or may answer
  one of its requests now or before (assigned by name or by role, or anyone
  signed in when a request names nobody); may read the run and answer what
  they may answer;
* **nobody**: sees nothing of the run (the web app answers 404).

:func:`access_of` places a principal; :func:`allows` says whether a place
permits an act; :func:`require` raises ``NotAuthorizedError`` when it does
not. Pure functions over plain values: no I/O, used by the library, the web
app and the API alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Literal

from ..errors import NotAuthorizedError
from ._approvals import Principal, permits

__all__ = ["ACTS", "ADMIN_ROLE", "Access", "Act", "RunAccess", "access_of", "allows", "require"]

ADMIN_ROLE = "admin"
"""The role that makes a principal an admin of every run."""

Act = Literal["read", "answer", "cancel", "fork", "update", "pause", "unpause", "resume",
              "retry", "reassign"]
"""What a principal may ask to do to a run."""


class Access(IntEnum):
    """A principal's place towards one run, lowest first (compare with ``>=``)."""

    NOBODY = 0
    PARTICIPANT = 1
    VIEWER = 2
    OPERATOR = 3
    ADMIN = 4


ACTS: dict[str, Access] = {
    "read": Access.PARTICIPANT,
    "answer": Access.PARTICIPANT,  # and, per request, only what they may answer
    "cancel": Access.OPERATOR,
    "fork": Access.OPERATOR,
    "update": Access.OPERATOR,
    "pause": Access.OPERATOR,
    "unpause": Access.OPERATOR,
    "resume": Access.OPERATOR,
    "retry": Access.OPERATOR,
    "reassign": Access.ADMIN,
}
"""The lowest place that may do each act."""


@dataclass(frozen=True, slots=True)
class RunAccess:
    """What the rule reads of a run: its workflow's roles, who started it, its requests.

    ``requests`` holds ``(assignees, roles)`` of every request the run has
    had, open or answered.
    """

    operators: tuple[str, ...] = ()
    viewers: tuple[str, ...] = ()
    started_by: str | None = None
    requests: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = ()


def is_admin(who: Principal) -> bool:
    """Whether ``who`` holds the admin role."""
    return ADMIN_ROLE in who.roles


def access_of(who: Principal | None, run: RunAccess, *, admin: bool = False) -> Access:
    """``who``'s place towards the run; ``admin`` is the app's own admin credential.

    ``who`` None is nobody signed in (unless ``admin``).
    """
    if admin or (who is not None and is_admin(who)):
        return Access.ADMIN
    if who is None:
        return Access.NOBODY
    if _holds(who, run.operators):
        return Access.OPERATOR
    if _holds(who, run.viewers):
        return Access.VIEWER
    if who.id == run.started_by or any(
            permits(who, assignees, roles) for assignees, roles in run.requests):
        return Access.PARTICIPANT
    return Access.NOBODY


def allows(access: Access, act: str) -> bool:
    """Whether a principal in place ``access`` may do ``act`` (an unknown act: never)."""
    needed = ACTS.get(act)
    return needed is not None and access >= needed


def require(who: Principal | None, run_id: str, run: RunAccess, act: str, *,
            admin: bool = False) -> Access:
    """``who``'s place if it allows ``act``, else ``NotAuthorizedError`` (nothing written)."""
    access = access_of(who, run, admin=admin)
    if not allows(access, act):
        needed = ACTS.get(act, Access.ADMIN)
        raise NotAuthorizedError(None if who is None else who.id, f"{act} run {run_id}",
                                 allowed=_who_may(needed))
    return access


def _holds(who: Principal, roles: Iterable[str]) -> bool:
    return any(role in who.roles for role in roles)


def _who_may(needed: Access) -> str:
    return {Access.PARTICIPANT: "its participants, viewers, operators or an admin",
            Access.VIEWER: "its viewers, operators or an admin",
            Access.OPERATOR: "its operators or an admin",
            Access.ADMIN: "an admin"}.get(needed, "an admin")
