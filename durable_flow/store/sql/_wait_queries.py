"""The statements of time and events (:class:`WaitQueries`), compiled once per dialect.

Like :class:`~durable_flow.store.sql._tables.Queries`, these are SQLAlchemy
Core compiled into statements (:class:`~durable_flow.store.sql._statement.Statement`);
the transaction functions that run them are in ``_waits.py``, which reaches
them through :func:`~durable_flow.store.sql._waits.waits_of` (from the
statement cache when it has them, so SQLAlchemy is imported only to compile).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from sqlalchemy import Insert, Table, Update, bindparam, func, literal_column, select, update
from sqlalchemy.sql.expression import ClauseElement

from ...model._records import RunStatus
from . import _tables as t
from ._schema import METADATA
from ._tables import SqlDialect, Statement, compile_statement

__all__ = ["GRAPHS", "MAILBOX", "WaitQueries", "compiled_waits"]

MAILBOX: Table = METADATA.tables["mailbox"]
GRAPHS: Table = METADATA.tables["graphs"]


def _where(table: Table, *names: str) -> list[Any]:
    return [table.c[name] == bindparam(name) for name in names]


class WaitQueries:
    """The statements of timers, event waits, the mailbox, migrations and graphs."""

    def __init__(self, d: SqlDialect) -> None:
        def c(stmt: ClauseElement) -> Statement:
            if d.returning and isinstance(stmt, Insert | Update):
                stmt = stmt.returning(literal_column("1"))  # a row per changed row (asyncpg)
            return compile_statement(stmt, d.dialect)

        self._runs(c)
        self._waits(c)
        self._mail(d, c)
        self._moves(c)

    def _runs(self, c: Callable[[ClauseElement], Statement]) -> None:
        runs = t.RUNS
        # due runs of one workflow version, through ix_runs_wake (status, wake_at)
        self.run_due = c(select(runs).where(
            runs.c.status == RunStatus.WAITING.value, runs.c.wake_at <= bindparam("now"),
            *_where(runs, "workflow_name", "workflow_version"), t.key_free(runs))
            .order_by(runs.c.wake_at).limit(bindparam("n")).with_for_update(skip_locked=True))
        self.run_set_wake = c(update(runs).where(*_where(runs, "run_id")).values(
            wake_at=bindparam("wake")))
        self.run_set_version = c(update(runs).where(*_where(runs, "run_id")).values(
            workflow_version=bindparam("version"), signature=bindparam("signature")))

    def _waits(self, c: Callable[[ClauseElement], Statement]) -> None:
        reqs = t.REQUESTS
        is_open = reqs.c.answer.is_(None)
        self.open_event_waits = c(select(reqs).where(
            *_where(reqs, "run_id"), is_open, reqs.c.kind == "event")
            .order_by(reqs.c.created_at, reqs.c.request_id))
        self.deliver = c(update(reqs).where(*_where(reqs, "run_id", "request_id"), is_open)
                         .values(answer=bindparam("payload"), answered_at=bindparam("now")))
        self.close_due = c(update(reqs).where(
            *_where(reqs, "run_id"), is_open, reqs.c.expires_at <= bindparam("now"))
            .values(answer=bindparam("closed"), answered_at=bindparam("now"), timed_out=True))
        self.next_due = c(select(func.min(reqs.c.expires_at).label("due")).where(
            *_where(reqs, "run_id"), is_open))

    def _mail(self, d: SqlDialect, c: Callable[[ClauseElement], Statement]) -> None:
        mail, graphs = MAILBOX, GRAPHS
        self.mail_insert = c(mail.insert().values({col.name: bindparam(col.name)
                                                   for col in mail.c}))
        self.mail_last = c(select(func.coalesce(func.max(mail.c.seq), 0).label("seq"))
                           .where(*_where(mail, "run_id")))
        self.mail_kept = c(select(mail).where(*_where(mail, "run_id"),
                                              mail.c.request_id.is_(None))
                           .order_by(mail.c.seq))
        self.mail_all = c(select(mail).where(*_where(mail, "run_id")).order_by(mail.c.seq))
        self.mail_take = c(update(mail).where(*_where(mail, "run_id", "seq")).values(
            request_id=bindparam("request_id"), delivered_at=bindparam("now")))
        self.graph_insert = c(d.insert(graphs).values(
            {col.name: bindparam(col.name) for col in graphs.c}).on_conflict_do_nothing(
            index_elements=list(graphs.primary_key)))
        self.graph_get = c(select(graphs.c.description).where(*_where(graphs, "signature")))

    def _moves(self, c: Callable[[ClauseElement], Statement]) -> None:
        # a migration moves what the superstep in progress recorded onto its checkpoint;
        # the targets are a new checkpoint, so a renamed node never meets a key in use
        moved: dict[str, Any] = {"checkpoint_id": bindparam("new_checkpoint"),
                                 "node": bindparam("new_node")}

        def nodes(table: Table) -> Statement:
            return c(select(table.c.node).distinct().where(
                *_where(table, "run_id", "checkpoint_id")))

        def move(table: Table) -> Statement:
            return c(update(table).where(*_where(table, "run_id", "checkpoint_id", "node"))
                     .values(moved))

        self.req_nodes, self.req_move = nodes(t.REQUESTS), move(t.REQUESTS)
        self.tw_nodes, self.tw_move = nodes(t.TASK_WRITES), move(t.TASK_WRITES)
        self.step_nodes, self.step_move = nodes(t.STEPS), move(t.STEPS)


@cache
def compiled_waits(dialect: SqlDialect) -> WaitQueries:
    """The wait statements of a dialect (compiled on first use, then shared)."""
    return WaitQueries(dialect)
