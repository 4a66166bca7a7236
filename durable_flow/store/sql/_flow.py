"""Schedules, limit grants and workers' wake-up time in the SQL store (:class:`SqlFlow`).

Every method is one transaction function run on the store's driver, like the
rest of :class:`~durable_flow.store.sql._base.SqlStore`. A grant is decided
under a lock on its limit's row (``SELECT ... FOR UPDATE`` on PostgreSQL;
SQLite's write transactions are serialized anyway), so the limit holds
across every worker that shares the store. ``PostgresStore`` decides a grant
in one statement instead, a server function that runs this transaction's
statements (``store/postgres/_grants.py``); :func:`wait_reason` words the
waits of both.
"""

from __future__ import annotations

import abc
import random
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

import orjson

from ...errors import InvalidInputError
from ...model._clock import utcnow
from ...model._schedules import ScheduleInfo
from .._flow_protocols import GrantDecision, LimitUse
from . import _codec as t
from ._ops import Driver, Notify, Tx, execute, fetch

if TYPE_CHECKING:
    from ._flow_queries import FlowQueries

__all__ = ["PACED", "PRUNE_CHANCE", "WAITED_LONGER", "GrantDecision", "LimitUse", "SqlFlow",
           "keep_released", "wait_reason"]

#: why a request waits although the limit has room: requests before it go first
WAITED_LONGER = "others waited longer"
#: why a request waits while a provider paused the limit (``pace_limit``)
PACED = "paced by the provider"

# released grants are kept this long: the longest rate window (a minute), and some
_KEEP_RELEASED = timedelta(minutes=2)
#: the share of releases that also drop a limit's old rows (a random draw: not data)
PRUNE_CHANCE = 0.05


def keep_released(now: datetime) -> datetime:
    """Released or expired grants older than this go when a release prunes."""
    return now - _KEEP_RELEASED


def wait_reason(why: str, use: LimitUse, concurrency: int | None, seen: int | None,
                window_s: int | None) -> str:
    """The words of a wait: ``why`` is ``paced``, ``full``, ``rate`` or ``behind``.

    ``rate`` comes with the grants ``seen`` in the last ``window_s`` seconds.
    PostgreSQL's one-statement grant (``store/postgres/_grants.py``) answers
    with ``why`` and these numbers; both stores word them here.
    """
    if why == "paced":
        return PACED
    if why == "full":
        return f"{use.in_use} of {concurrency} in use"
    if why == "rate":
        return f"{seen} in the last {window_s} s"
    if why == "behind":
        return WAITED_LONGER
    raise ValueError(f"unknown reason of a wait {why!r}")


class SqlFlow(abc.ABC):
    """Schedules, limits and the next wake-up over SQL (a base of ``SqlStore``)."""

    _dialect_name: str

    @property
    @abc.abstractmethod
    def driver(self) -> Driver:
        """The backend's driver."""

    @property
    def _f(self) -> FlowQueries:
        # imported here: opening a store must not import SQLAlchemy (see _cache.py)
        from ._flow_queries import flow_queries

        return flow_queries(self._dialect_name)

    # -- waking ------------------------------------------------------------------

    async def next_wake(self, owner: str) -> datetime | None:
        """The next moment after now a run may become claimable or a tick comes due.

        The earliest future ``wake_at`` of a waiting run, ``start_after`` of a
        queued one, lease expiry of a run another ``owner`` holds, or
        ``next_tick`` of a schedule not paused; None when there is none.
        """
        return await self.driver.run(partial(_next_wake_tx, self._f, owner), write=False)

    # -- schedules ---------------------------------------------------------------

    async def put_schedule(self, info: ScheduleInfo) -> ScheduleInfo:
        """Create or replace a schedule (keeping its ``created_at``); wakes the workers."""
        return await self.driver.run(partial(_put_schedule_tx, self._f, info), write=True)

    async def get_schedule(self, schedule_id: str) -> ScheduleInfo | None:
        """One schedule, or None."""
        rows = await self.driver.run(partial(_rows, self._f.sch_get, schedule_id=schedule_id),
                                     write=False)
        return _schedule(rows[0]) if rows else None

    async def list_schedules(self) -> list[ScheduleInfo]:
        """Every schedule, by id."""
        rows = await self.driver.run(partial(_rows, self._f.sch_list), write=False)
        return [_schedule(r) for r in rows]

    async def remove_schedule(self, schedule_id: str) -> bool:
        """Delete a schedule; False if there was none. Runs it started stay."""
        return await self.driver.run(partial(_count, self._f.sch_delete, schedule_id=schedule_id),
                                     write=True) > 0

    async def set_schedule_paused(self, schedule_id: str, paused: bool,
                                  next_tick: datetime) -> bool:
        """Pause or resume a schedule (with its next tick); False if there is none."""
        return await self.driver.run(partial(
            _count, self._f.sch_set_paused, schedule_id=schedule_id, new_paused=paused,
            new_next=t.to_us(next_tick), now=t.to_us(utcnow())), write=True) > 0

    async def next_tick(self) -> datetime | None:
        """The earliest next tick of the schedules not paused (None: there is none)."""
        rows = await self.driver.run(partial(_rows, self._f.sch_earliest), write=False)
        first = rows[0]["earliest"] if rows else None
        return None if first is None else t.from_us(first)

    async def due_schedules(self, now: datetime, *, limit: int = 50) -> list[ScheduleInfo]:
        """Schedules not paused whose next tick is at or before ``now``, the most late first."""
        rows = await self.driver.run(partial(_rows, self._f.sch_due, now=t.to_us(now), n=limit),
                                     write=False)
        return [_schedule(r) for r in rows]

    async def advance_schedule(self, schedule_id: str, seen_next: datetime, next_tick: datetime,
                               last_tick: datetime | None) -> bool:
        """Move a schedule's next tick on from ``seen_next``; False if another worker did."""
        return await self.driver.run(partial(
            _count, self._f.sch_advance, schedule_id=schedule_id, old_next=t.to_us(seen_next),
            new_next=t.to_us(next_tick),
            new_last=None if last_tick is None else t.to_us(last_tick),
            now=t.to_us(utcnow())), write=True, idempotent=True) > 0

    # -- limits ------------------------------------------------------------------

    async def request_grant(self, grant_id: str, name: str, *, run_id: str, task: str,
                            owner: str, ttl: float, concurrency: int | None,
                            per_second: float | None, per_minute: float | None) -> GrantDecision:
        """Grant a use of limit ``name`` now if it allows one, else record the wait.

        The first request of ``grant_id`` queues it (first come, first
        served); asking again renews its place for ``ttl`` and grants it once
        the limit allows. A grant is leased for ``ttl`` seconds: not renewed,
        it stops counting.
        """
        return await self.driver.run(partial(
            _request_grant_tx, self._f, grant_id, name, run_id, task, owner, ttl,
            concurrency, per_second, per_minute), write=True)

    async def renew_grant(self, grant_id: str, ttl: float) -> bool:
        """Extend a grant (held or waiting) by ``ttl``; False once released."""
        expires = t.to_us(utcnow() + timedelta(seconds=ttl))
        return await self.driver.run(partial(
            _count, self._f.grant_renew, id=grant_id, expires=expires), write=True,
            idempotent=True) > 0

    async def release_grant(self, grant_id: str, name: str) -> None:
        """Give a grant (or a wait for one) up; old released grants of the limit are dropped."""
        await self.driver.run(partial(_release_tx, self._f, grant_id, name), write=True,
                              idempotent=True)

    async def pace_limit(self, name: str, until: datetime) -> None:
        """No grant of ``name`` until ``until`` (a provider's ``Retry-After``), for everyone."""
        await self.driver.run(partial(_pace_tx, self._f, name, until), write=True,
                              idempotent=True)

    async def paced_until(self, name: str) -> datetime | None:
        """Until when a provider paused limit ``name`` (None: it is not paused now)."""
        rows = await self.driver.run(partial(_rows, self._f.lim_get, name=name), write=False)
        until = rows[0]["paced_until"] if rows else None
        return None if until is None or until <= t.to_us(utcnow()) else t.from_us(until)

    async def limit_use(self, name: str) -> LimitUse:
        """Grants of ``name`` held and waited for now."""
        return await self.driver.run(partial(_use_tx, self._f, name, utcnow()), write=False)

    async def run_grants(self, run_id: str) -> list[dict[str, Any]]:
        """The live grants and waits of one run (``name``, ``task``, ``granted_at``, ...)."""
        rows = await self.driver.run(partial(_rows, self._f.grant_of_run, run_id=run_id,
                                             now=t.to_us(utcnow())), write=False)
        return [{**r, "granted_at": None if r["granted_at"] is None else t.from_us(r["granted_at"]),
                 "requested_at": t.from_us(r["requested_at"])} for r in rows]


# -- transaction functions -------------------------------------------------------------


def _rows(stmt: Any, **params: object) -> Tx[list[dict[str, Any]]]:
    return (yield from fetch(stmt, **params))


def _count(stmt: Any, **params: object) -> Tx[int]:
    return (yield from execute(stmt, **params))


def _next_wake_tx(f: FlowQueries, owner: str) -> Tx[datetime | None]:
    rows = yield from fetch(f.next_wake, now=t.to_us(utcnow()), owner=owner)
    found = [v for v in rows[0].values() if v is not None] if rows else []
    return t.from_us(min(found)) if found else None


def _schedule_row(info: ScheduleInfo, now: int) -> dict[str, object]:
    if info.next_tick is None:
        raise InvalidInputError("a schedule needs its next tick")
    return {"schedule_id": info.schedule_id, "workflow_name": info.workflow_name,
            "workflow_version": info.workflow_version, "cron": info.cron,
            "timezone": info.timezone, "catch_up": info.catch_up,
            "input": orjson.dumps(info.input).decode(), "labels": orjson.dumps(info.labels).decode(),
            "paused": info.paused, "next_tick": t.to_us(info.next_tick),
            "last_tick": None if info.last_tick is None else t.to_us(info.last_tick),
            "created_at": now, "updated_at": now}


def _schedule(row: dict[str, Any]) -> ScheduleInfo:
    return ScheduleInfo(
        schedule_id=row["schedule_id"], workflow_name=row["workflow_name"],
        workflow_version=row["workflow_version"], cron=row["cron"], timezone=row["timezone"],
        catch_up=row["catch_up"], input=orjson.loads(row["input"]),
        labels=orjson.loads(row["labels"]), paused=bool(row["paused"]),
        next_tick=t.from_us(row["next_tick"]),
        last_tick=None if row["last_tick"] is None else t.from_us(row["last_tick"]),
        created_at=t.from_us(row["created_at"]), updated_at=t.from_us(row["updated_at"]))


def _put_schedule_tx(f: FlowQueries, info: ScheduleInfo) -> Tx[ScheduleInfo]:
    row = _schedule_row(info, t.to_us(utcnow()))
    old = yield from fetch(f.sch_get, schedule_id=info.schedule_id)
    if old:
        yield from execute(f.sch_replace, **{k: v for k, v in row.items() if k != "created_at"})
    else:
        yield from execute(f.sch_insert, **row)
    yield Notify(info.schedule_id)  # workers look at the new next tick
    rows = yield from fetch(f.sch_get, schedule_id=info.schedule_id)
    return _schedule(rows[0])


def _use_tx(f: FlowQueries, name: str, now: datetime) -> Tx[LimitUse]:
    rows = yield from fetch(f.grant_use, name=name, now=t.to_us(now))
    row = rows[0] if rows else {"in_use": 0, "waiting": 0}
    return LimitUse(name, int(row["in_use"] or 0), int(row["waiting"] or 0))


def _lock_limit(f: FlowQueries, name: str) -> Tx[dict[str, Any]]:
    """The limit's row, locked (made first if this is the limit's first use)."""
    rows = yield from fetch(f.lim_lock, name=name)
    if not rows:
        yield from execute(f.lim_ensure, name=name, paced_until=None, updated_at=t.to_us(utcnow()))
        rows = yield from fetch(f.lim_lock, name=name)
    return rows[0]


def _request_grant_tx(f: FlowQueries, grant_id: str, name: str, run_id: str, task: str,
                      owner: str, ttl: float, concurrency: int | None, per_second: float | None,
                      per_minute: float | None) -> Tx[GrantDecision]:
    limit = yield from _lock_limit(f, name)
    # read once the lock is held: a transaction that waited for it decides at its own time
    now = utcnow()
    us, expires = t.to_us(now), t.to_us(now + timedelta(seconds=ttl))
    mine = yield from fetch(f.grant_get, id=grant_id)
    if mine and mine[0]["granted_at"] is not None and mine[0]["released_at"] is None:
        yield from execute(f.grant_renew, id=grant_id, expires=expires)
        return GrantDecision(True, (yield from _use_tx(f, name, now)))
    if mine:
        yield from execute(f.grant_renew, id=grant_id, expires=expires)
    else:
        yield from execute(f.grant_insert, id=grant_id, name=name, run_id=run_id, task=task,
                           owner=owner, requested_at=us, granted_at=None, expires_at=expires,
                           released_at=None, capacity=concurrency)
    use = yield from _use_tx(f, name, now)
    wait = yield from _why_wait(f, name, grant_id, now, use, limit["paced_until"],
                                concurrency, per_second, per_minute)
    if wait is not None:
        retry_at, reason = wait
        return GrantDecision(False, use, retry_at, reason)
    yield from execute(f.grant_take, id=grant_id, now=us, expires=expires)
    return GrantDecision(True, LimitUse(name, use.in_use + 1, use.waiting - 1))


def _why_wait(f: FlowQueries, name: str, grant_id: str, now: datetime, use: LimitUse,
              paced_until: int | None, concurrency: int | None, per_second: float | None,
              per_minute: float | None) -> Tx[tuple[datetime | None, str] | None]:
    """None if the grant may be taken now, else (when to ask again, or None: on a release; why)."""
    if paced_until is not None and paced_until > t.to_us(now):
        return t.from_us(paced_until), wait_reason("paced", use, concurrency, None, None)
    # how many may be granted now: the free slots, and the room left in each window
    free = concurrency - use.in_use if concurrency is not None else max(use.waiting, 1)
    if free <= 0:
        return None, wait_reason("full", use, concurrency, None, None)
    for rate, window in ((per_second, timedelta(seconds=1)), (per_minute, timedelta(minutes=1))):
        if rate is None:
            continue
        since = yield from fetch(f.grant_since, name=name, since=t.to_us(now - window))
        room = int(rate) - len(since)
        if room <= 0:
            # the window frees a place when its oldest grants leave it
            oldest = since[len(since) - int(rate)]["granted_at"]
            return t.from_us(oldest) + window, wait_reason("rate", use, concurrency, len(since),
                                                           window.seconds or 1)
        free = min(free, room)
    if use.waiting <= 1:  # nobody waits but this request
        return None
    ahead = yield from fetch(f.grant_queue, name=name, now=t.to_us(now), n=free)
    if grant_id not in {r["id"] for r in ahead}:
        return None, wait_reason("behind", use, concurrency, None, None)
    return None


def _release_tx(f: FlowQueries, grant_id: str, name: str) -> Tx[None]:
    now = utcnow()
    yield from execute(f.grant_release, id=grant_id, now=t.to_us(now))
    if random.random() < PRUNE_CHANCE:  # now and then: old rows go, a few at a time
        yield from execute(f.grant_prune, name=name, before=t.to_us(keep_released(now)))


def _pace_tx(f: FlowQueries, name: str, until: datetime) -> Tx[None]:
    us = t.to_us(utcnow())
    current = (yield from _lock_limit(f, name))["paced_until"]
    if current is None or current < t.to_us(until):
        yield from execute(f.lim_pace, name=name, until=t.to_us(until), now=us)

