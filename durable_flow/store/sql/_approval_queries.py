"""The statements of approvals (:class:`ApprovalQueries`): decisions, the outbox, users.

Compiled once per dialect like :class:`~durable_flow.store.sql._tables.Queries`;
the transaction functions that run them are in ``_decisions.py``.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import Delete, Insert, Table, Update, bindparam, delete, literal_column, select, update
from sqlalchemy.sql.expression import ClauseElement

from ._schema import METADATA
from ._tables import REQUESTS, SqlDialect, Statement, compile_statement

__all__ = ["ApprovalQueries", "compiled_approvals"]

DECISIONS: Table = METADATA.tables["decisions"]
NOTIFICATIONS: Table = METADATA.tables["notifications"]
USERS: Table = METADATA.tables["users"]
SESSIONS: Table = METADATA.tables["sessions"]


def _where(table: Table, *names: str) -> list[Any]:
    return [table.c[name] == bindparam(name) for name in names]


def _binds(table: Table) -> dict[str, Any]:
    return {c.name: bindparam(c.name) for c in table.c}


class ApprovalQueries:
    """Statements of decisions, request approvals, the notification outbox and users."""

    def __init__(self, d: SqlDialect) -> None:
        def c(stmt: ClauseElement) -> Statement:
            if d.returning and isinstance(stmt, Insert | Update | Delete):
                stmt = stmt.returning(literal_column("1"))
            return compile_statement(stmt, d.dialect)

        dec, out, users = DECISIONS, NOTIFICATIONS, USERS
        self.dec_last = c(select(dec.c.seq, dec.c.digest).where(*_where(dec, "run_id"))
                          .order_by(dec.c.seq.desc()).limit(1))
        self.dec_insert = c(d.insert(dec).values(_binds(dec)))
        runs = METADATA.tables["runs"]  # the chain's anchor (migration 0014)
        self.anchor_get = c(select(runs.c.audit_count, runs.c.audit_head, runs.c.audit_root)
                            .where(*_where(runs, "run_id")))
        self.anchor_set = c(update(runs).where(*_where(runs, "run_id")).values(
            audit_count=bindparam("count"), audit_head=bindparam("head")))
        self.anchor_root = c(update(runs).where(*_where(runs, "run_id")).values(
            audit_head=bindparam("root"), audit_root=bindparam("root")))
        self.dec_list = c(select(dec).where(*_where(dec, "run_id")).order_by(dec.c.seq))
        self.req_set_approval = c(update(REQUESTS).where(
            *_where(REQUESTS, "run_id", "request_id")).values(
            approval=bindparam("new_approval"), expires_at=bindparam("new_expires")))
        reqs = REQUESTS
        self.req_due = c(select(reqs).where(*_where(reqs, "run_id"), reqs.c.answer.is_(None),
                                            reqs.c.expires_at <= bindparam("now"))
                         .order_by(reqs.c.created_at, reqs.c.request_id))
        self.req_close = c(update(reqs).where(
            *_where(reqs, "run_id", "request_id"), reqs.c.answer.is_(None))
            .values(answer=bindparam("closed"), answered_at=bindparam("now"), timed_out=True))
        # an outbox id is fixed by what it tells: writing it again keeps the first
        self.out_insert = c(d.insert(out).values(_binds(out)).on_conflict_do_nothing(
            index_elements=[out.c.id]))
        self.out_due = c(select(out).where(out.c.delivered_at.is_(None), out.c.due_at <= bindparam("now"))
                         .order_by(out.c.due_at, out.c.id).limit(bindparam("n")))
        self.out_done = c(update(out).where(*_where(out, "id")).values(delivered_at=bindparam("now")))
        self.out_retry = c(update(out).where(*_where(out, "id")).values(
            attempts=out.c.attempts + 1, due_at=bindparam("due"), last_error=bindparam("error")))
        # delivered long enough ago, and about a request no longer open (a notice
        # about an open request stays: writing it again must keep the one delivered)
        still_open = select(literal_column("1")).select_from(reqs).where(
            reqs.c.run_id == out.c.run_id, reqs.c.request_id == out.c.request_id,
            reqs.c.answer.is_(None)).exists()
        self.out_prune = c(delete(out).where(out.c.delivered_at.is_not(None),
                                             out.c.delivered_at < bindparam("before"), ~still_open))
        self.out_list = c(select(out).where(*_where(out, "run_id")).order_by(out.c.created_at, out.c.id))
        self.user_insert = c(d.insert(users).values(_binds(users)))
        self.user_get = c(select(users).where(*_where(users, "name")))
        self.user_list = c(select(users).order_by(users.c.name))
        self.user_delete = c(delete(users).where(*_where(users, "name")))
        self.user_set_roles = c(update(users).where(*_where(users, "name")).values(
            roles=bindparam("new_roles")))
        self.user_with_email = c(select(users).where(users.c.email.is_not(None))
                                 .order_by(users.c.name))
        self.user_set_password = c(update(users).where(*_where(users, "name")).values(
            password_hash=bindparam("new_hash")))
        ses = SESSIONS
        self.ses_insert = c(d.insert(ses).values(_binds(ses)))
        self.ses_get = c(select(ses).where(*_where(ses, "id_hash")))
        self.ses_delete = c(delete(ses).where(*_where(ses, "id_hash")))
        self.ses_delete_user = c(delete(ses).where(*_where(ses, "user_name")))
        self.ses_expire = c(delete(ses).where(ses.c.expires_at <= bindparam("now")))


@cache
def compiled_approvals(dialect: SqlDialect) -> ApprovalQueries:
    """The approval statements of a dialect (compiled on first use, then shared)."""
    return ApprovalQueries(dialect)
