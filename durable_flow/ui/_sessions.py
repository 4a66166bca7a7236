"""Server-side login sessions of the web app: ``Sessions``.

A login makes a random id (``secrets.token_urlsafe``, 256 bits), sets it in
an HttpOnly cookie and keeps only its sha256 in the store's ``sessions``
table, with the user it belongs to (None: a login with the admin token) and
an expiry (12 h). Every request looks its row up again, and the user's
current roles (and their email address as another name for them, so a
request assigned to the address is theirs): logout deletes the row; ``users remove``, ``users
set-roles`` and ``users set-password`` delete the user's rows in the same
transaction, so an old cookie stops working at once.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from ..errors import DurableFlowError
from ..model._approvals import Principal
from ..model._clock import utcnow
from ..store._outbox_rows import SessionRow
from ..store._protocols import CheckpointStore

__all__ = ["SESSION_LIFETIME", "Session", "Sessions", "hash_session_id"]

SESSION_LIFETIME = timedelta(hours=12)
"""How long a login lasts at most (logging in again starts a new one)."""


def hash_session_id(session_id: str) -> str:
    """What the store keeps of a session id: its sha256, in hex."""
    return hashlib.sha256(session_id.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Session:
    """A live login: its id (from the cookie) and who it is (None: the admin token)."""

    id: str
    principal: Principal | None


class Sessions:
    """Starts, finds and ends the logins of one store."""

    def __init__(self, store: CheckpointStore, lifetime: timedelta = SESSION_LIFETIME) -> None:
        self.store = store
        self.lifetime = lifetime

    async def start(self, user: str | None) -> str:
        """A new session for ``user`` (None: the admin token); returns its id for the cookie."""
        session_id = secrets.token_urlsafe(32)
        now = utcnow()
        await self.store.start_session(SessionRow(hash_session_id(session_id), user, now,
                                                  now + self.lifetime))
        return session_id

    async def find(self, session_id: str, *, admin: bool) -> Session | None:
        """The live session with this id, or None (unknown, ended, expired, user gone).

        ``admin`` says which cookie it came from: the admin token's (a
        session without a user) or a person's (a session of a user who still
        exists, with the roles they hold now).
        """
        if not session_id or len(session_id) > 200:
            return None
        row = await self.store.get_session(hash_session_id(session_id))
        if row is None or row.expires_at <= utcnow():
            return None
        if admin:
            return Session(session_id, None) if row.user_name is None else None
        if row.user_name is None:
            return None
        user = await self.store.get_user(row.user_name)
        if user is None:
            return None
        try:
            # a request assigned to the user's address is theirs too
            aliases = (user.email,) if user.email and user.email != user.name else ()
            return Session(session_id, Principal(user.name, user.roles, aliases))
        except DurableFlowError:
            return None

    async def end(self, session_id: str) -> None:
        """End a session (an unknown id is no error)."""
        if session_id:
            await self.store.end_session(hash_session_id(session_id))
