"""Web sessions on SQL: a login is a row keyed by the sha256 of its id.

The web app (``durable_flow.ui._sessions``) makes the random id, keeps only
its hash here and looks the row up on each request. A user's rows are
deleted in the same transaction that removes the user or changes their
roles or password (:mod:`._outbox`), so no session outlives what it was
granted on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._outbox_rows import SessionRow
from . import _codec as t
from ._decisions import approvals_of
from ._ops import Tx, execute, fetch

if TYPE_CHECKING:
    from ._tables import Queries

__all__ = ["end_session_tx", "end_user_sessions_tx", "get_session_tx", "set_password_tx",
           "start_session_tx"]


def start_session_tx(q: Queries, session: SessionRow) -> Tx[None]:
    """Insert a session (and drop the rows of sessions that expired)."""
    a = approvals_of(q)
    yield from execute(a.ses_expire, now=t.to_us(session.created_at))
    yield from execute(a.ses_insert, id_hash=session.id_hash, user_name=session.user_name,
                       created_at=t.to_us(session.created_at),
                       expires_at=t.to_us(session.expires_at))


def get_session_tx(q: Queries, id_hash: str) -> Tx[SessionRow | None]:
    """The session with this id hash, or None."""
    rows = yield from fetch(approvals_of(q).ses_get, id_hash=id_hash)
    return _session(rows[0]) if rows else None


def end_session_tx(q: Queries, id_hash: str) -> Tx[bool]:
    """Delete one session; False when there was none."""
    return bool((yield from execute(approvals_of(q).ses_delete, id_hash=id_hash)))


def end_user_sessions_tx(q: Queries, name: str) -> Tx[int]:
    """Delete every session of a user; how many there were."""
    return int((yield from execute(approvals_of(q).ses_delete_user, user_name=name)))


def set_password_tx(q: Queries, name: str, password_hash: str) -> Tx[bool]:
    """Replace a user's password hash and end their sessions; False when there is no such user."""
    changed = yield from execute(approvals_of(q).user_set_password, name=name,
                                 new_hash=password_hash)
    if not changed:
        return False
    yield from end_user_sessions_tx(q, name)
    return True


def _session(row: Mapping[str, Any]) -> SessionRow:
    return SessionRow(id_hash=row["id_hash"], user_name=row["user_name"],
                      created_at=t.from_us(row["created_at"]),
                      expires_at=t.from_us(row["expires_at"]))
