"""The statements of schedules, limits and workers' wake-ups (:class:`FlowQueries`).

Compiled on first use per dialect and kept for the process. They are not in
the statement cache (``_cache.py``): only long-lived workers and the
``schedules`` commands run them, and those pay for SQLAlchemy once.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import (
    Delete,
    Insert,
    Table,
    Update,
    and_,
    bindparam,
    delete,
    false,
    func,
    literal_column,
    or_,
    select,
    update,
)
from sqlalchemy.sql.expression import ClauseElement

from ...model._records import RunStatus
from ._cache import sql_dialect
from ._schema import METADATA
from ._tables import Statement, compile_statement

__all__ = ["FlowQueries", "flow_queries"]

RUNS: Table = METADATA.tables["runs"]
SCHEDULES: Table = METADATA.tables["schedules"]
LIMITS: Table = METADATA.tables["limits"]
GRANTS: Table = METADATA.tables["limit_grants"]


def _where(table: Table, *names: str) -> list[Any]:
    return [table.c[name] == bindparam(name) for name in names]


def _binds(table: Table) -> dict[str, Any]:
    return {c.name: bindparam(c.name) for c in table.c}


class FlowQueries:
    """Statements of the wake-up time, schedules and limit grants of one dialect."""

    def __init__(self, name: str) -> None:
        d = sql_dialect(name)

        def c(stmt: ClauseElement) -> Statement:
            if d.returning and isinstance(stmt, Insert | Update | Delete):
                stmt = stmt.returning(literal_column("1"))
            return compile_statement(stmt, d.dialect)

        self._wake(c)
        sch = SCHEDULES
        self.sch_insert = c(d.insert(sch).values(_binds(sch)))
        self.sch_replace = c(update(sch).where(*_where(sch, "schedule_id")).values(
            {k: v for k, v in _binds(sch).items() if k not in ("schedule_id", "created_at")}))
        self.sch_get = c(select(sch).where(*_where(sch, "schedule_id")))
        self.sch_list = c(select(sch).order_by(sch.c.schedule_id))
        self.sch_delete = c(delete(sch).where(*_where(sch, "schedule_id")))
        self.sch_set_paused = c(update(sch).where(*_where(sch, "schedule_id")).values(
            paused=bindparam("new_paused"), next_tick=bindparam("new_next"),
            updated_at=bindparam("now")))
        self.sch_earliest = c(select(func.min(sch.c.next_tick).label("earliest"))
                              .where(sch.c.paused == false()))
        self.sch_due = c(select(sch).where(sch.c.paused == false(),
                                           sch.c.next_tick <= bindparam("now"))
                         .order_by(sch.c.next_tick, sch.c.schedule_id).limit(bindparam("n")))
        # moves on only from the tick read: a worker that read it too late changes nothing
        self.sch_advance = c(update(sch).where(
            *_where(sch, "schedule_id"), sch.c.next_tick == bindparam("old_next")).values(
            next_tick=bindparam("new_next"), last_tick=bindparam("new_last"),
            updated_at=bindparam("now")))
        self._limits(d, c)

    def _wake(self, c: Any) -> None:
        runs, sch = RUNS, SCHEDULES
        now: Any = bindparam("now")

        def earliest(label: str, column: Any, *where: Any) -> Any:
            return select(func.min(column)).where(column > now, *where).scalar_subquery() \
                .label(label)

        # the next moment something may become claimable: a timer or deadline, a
        # start put off by a backoff, another holder's lease running out, a tick
        self.next_wake = c(select(
            earliest("timer", runs.c.wake_at, runs.c.status == RunStatus.WAITING.value),
            earliest("backoff", runs.c.start_after, runs.c.status == RunStatus.QUEUED.value),
            earliest("lease", runs.c.lease_expires_at, runs.c.status == RunStatus.RUNNING.value,
                     runs.c.lease_owner != bindparam("owner")),
            earliest("tick", sch.c.next_tick, sch.c.paused == false())))

    def _limits(self, d: Any, c: Any) -> None:
        lim, g = LIMITS, GRANTS
        now: Any = bindparam("now")
        self.lim_ensure = c(d.insert(lim).values(_binds(lim)).on_conflict_do_nothing(
            index_elements=[lim.c.name]))
        # taken before a grant is decided: grants of one limit are decided one at a time
        self.lim_get = c(select(lim).where(*_where(lim, "name")))
        self.lim_lock = c(select(lim).where(*_where(lim, "name")).with_for_update())
        self.lim_pace = c(update(lim).where(*_where(lim, "name")).values(
            paced_until=bindparam("until"), updated_at=now))
        live = and_(g.c.released_at.is_(None), g.c.expires_at > now)
        # held and waiting grants in one look (one round trip per decision)
        self.grant_use = c(select(
            func.count(g.c.granted_at).label("in_use"),
            (func.count() - func.count(g.c.granted_at)).label("waiting"))
            .select_from(g).where(*_where(g, "name"), live))
        # the waiters of a limit, first come first served
        self.grant_queue = c(select(g.c.id).where(
            *_where(g, "name"), live, g.c.granted_at.is_(None))
            .order_by(g.c.requested_at, g.c.id).limit(bindparam("n")))
        self.grant_since = c(select(g.c.granted_at).where(
            *_where(g, "name"), g.c.granted_at >= bindparam("since"))
            .order_by(g.c.granted_at))
        self.grant_insert = c(d.insert(g).values(_binds(g)))
        self.grant_get = c(select(g).where(*_where(g, "id")))
        self.grant_take = c(update(g).where(*_where(g, "id"), g.c.granted_at.is_(None)).values(
            granted_at=now, expires_at=bindparam("expires")))
        self.grant_renew = c(update(g).where(*_where(g, "id"), g.c.released_at.is_(None)).values(
            expires_at=bindparam("expires")))
        self.grant_release = c(update(g).where(*_where(g, "id"), g.c.released_at.is_(None))
                               .values(released_at=now))
        self.grant_of_run = c(select(g).where(*_where(g, "run_id"), live)
                              .order_by(g.c.requested_at, g.c.id))
        # released or expired long ago: no rate window needs them any more
        self.grant_prune = c(delete(g).where(*_where(g, "name"), or_(
            g.c.released_at < bindparam("before"), g.c.expires_at < bindparam("before"))))


@cache
def flow_queries(name: str) -> FlowQueries:
    """The flow statements of dialect ``name`` (compiled on first use, then shared)."""
    return FlowQueries(name)
