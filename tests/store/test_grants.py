"""Limit grants every store must decide alike: slots, rate windows, leases, pacing, first come first served.

PostgreSQL decides a grant in one statement (``store/postgres/_grants.py``),
the other stores in ``SqlFlow``'s transaction: each case asks both the same
questions and expects the same answers, words included. The clock is the
stores' (``utcnow``), moved by the test; PostgreSQL adds to it the time its
statement waited for the limit's lock (microseconds here), so times are
compared within a few milliseconds.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from durable_flow.store._flow_protocols import GrantDecision, LimitUse
from durable_flow.store.postgres import _grants, _postgres
from durable_flow.store.sql import _flow
from durable_flow.store.sql._flow import PACED, WAITED_LONGER

T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
CLOSE = timedelta(milliseconds=20)


class Clock:
    """The stores' clock, standing still until moved."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def at(self, seconds: float) -> None:
        self.now = T0 + timedelta(seconds=seconds)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    moved = Clock()
    for module in (_flow, _grants):
        monkeypatch.setattr(module, "utcnow", moved)
    return moved


async def ask(store: Any, grant_id: str, *, ttl: float = 30, concurrency: int | None = None,
              per_second: float | None = None, per_minute: float | None = None,
              name: str = "api") -> GrantDecision:
    return await store.request_grant(  # type: ignore[no-any-return]
        grant_id, name, run_id=f"run-{grant_id}", task="call", owner="w", ttl=ttl,
        concurrency=concurrency, per_second=per_second, per_minute=per_minute)


def near(moment: datetime | None, seconds: float) -> bool:
    return moment is not None and abs(moment - (T0 + timedelta(seconds=seconds))) < CLOSE


async def test_slots_are_granted_then_a_request_waits_for_one_to_come_back(
        store: Any, clock: Clock) -> None:
    assert await ask(store, "g1", concurrency=2) == GrantDecision(True, LimitUse("api", 1, 0))
    assert await ask(store, "g2", concurrency=2) == GrantDecision(True, LimitUse("api", 2, 0))
    assert await ask(store, "g3", concurrency=2) == GrantDecision(
        False, LimitUse("api", 2, 1), None, "2 of 2 in use")
    assert await store.limit_use("api") == LimitUse("api", 2, 1)
    # asking again for a grant held keeps it (and counts the waiter)
    assert await ask(store, "g1", concurrency=2) == GrantDecision(True, LimitUse("api", 2, 1))
    waits = await store.run_grants("run-g3")
    assert [(w["name"], w["task"], w["granted_at"]) for w in waits] == [("api", "call", None)]
    await store.release_grant("g1", "api")
    assert await ask(store, "g3", concurrency=2) == GrantDecision(True, LimitUse("api", 2, 0))
    assert (await store.run_grants("run-g3"))[0]["granted_at"] is not None
    # released: it counts no more, and renewing it changes nothing
    assert not await store.renew_grant("g1", 30)
    assert await store.renew_grant("g2", 30)
    assert await store.limit_use("api") == LimitUse("api", 2, 0)
    # another limit is another count
    assert await ask(store, "o1", concurrency=1, name="other") == GrantDecision(
        True, LimitUse("other", 1, 0))


async def test_waiters_are_granted_first_come_first_served(store: Any, clock: Clock) -> None:
    assert (await ask(store, "held", concurrency=1)).granted
    clock.at(1)
    assert await ask(store, "first", concurrency=1) == GrantDecision(
        False, LimitUse("api", 1, 1), None, "1 of 1 in use")
    clock.at(2)
    assert await ask(store, "second", concurrency=1) == GrantDecision(
        False, LimitUse("api", 1, 2), None, "1 of 1 in use")
    await store.release_grant("held", "api")
    clock.at(3)
    # the slot is free, but the request before it goes first
    assert await ask(store, "second", concurrency=1) == GrantDecision(
        False, LimitUse("api", 0, 2), None, WAITED_LONGER)
    assert await ask(store, "first", concurrency=1) == GrantDecision(
        True, LimitUse("api", 1, 1))
    assert await ask(store, "second", concurrency=1) == GrantDecision(
        False, LimitUse("api", 1, 1), None, "1 of 1 in use")


async def test_a_waiter_whose_lease_ran_out_loses_its_place(store: Any, clock: Clock) -> None:
    assert (await ask(store, "held", concurrency=1)).granted
    assert not (await ask(store, "gone", concurrency=1, ttl=1)).granted
    clock.at(0.5)
    assert not (await ask(store, "next", concurrency=1)).granted
    await store.release_grant("held", "api")
    clock.at(2)  # "gone" stopped asking: its wait expired, "next" is first now
    assert await ask(store, "next", concurrency=1) == GrantDecision(
        True, LimitUse("api", 1, 0))
    # asking again renews the place it lost, behind the grant taken meanwhile
    assert await ask(store, "gone", concurrency=1) == GrantDecision(
        False, LimitUse("api", 1, 1), None, "1 of 1 in use")


async def test_a_dead_workers_grant_counts_until_its_lease_runs_out(
        store: Any, clock: Clock) -> None:
    assert (await ask(store, "dead", concurrency=1, ttl=1)).granted
    clock.at(0.5)
    assert await ask(store, "live", concurrency=1) == GrantDecision(
        False, LimitUse("api", 1, 1), None, "1 of 1 in use")
    clock.at(1.5)
    assert await ask(store, "live", concurrency=1) == GrantDecision(
        True, LimitUse("api", 1, 0))
    assert await store.limit_use("api") == LimitUse("api", 1, 0)


@pytest.mark.parametrize(("rate", "window"), [("per_second", 1), ("per_minute", 60)])
async def test_a_rate_window_grants_its_share_then_names_when_a_place_frees(
        store: Any, clock: Clock, rate: str, window: int) -> None:
    limit = {rate: 2.5, "ttl": 300}  # two a window: a rate counts whole grants
    assert (await ask(store, "a", **limit)).granted
    clock.at(window / 4)
    assert await ask(store, "b", **limit) == GrantDecision(True, LimitUse("api", 2, 0))
    clock.at(window / 2)
    decision = await ask(store, "c", **limit)
    assert (decision.granted, decision.use, decision.reason) == (
        False, LimitUse("api", 2, 1), f"2 in the last {window} s")
    assert near(decision.retry_at, window)  # when "a" leaves the window
    # released grants still count in their window
    await store.release_grant("a", "api")
    await store.release_grant("b", "api")
    decision = await ask(store, "c", **limit)
    assert (decision.granted, near(decision.retry_at, window)) == (False, True)
    clock.at(window + 0.01)
    assert await ask(store, "c", **limit) == GrantDecision(True, LimitUse("api", 1, 0))
    decision = await ask(store, "d", **limit)
    assert (decision.granted, decision.reason) == (False, f"2 in the last {window} s")
    assert near(decision.retry_at, window + window / 4)  # when "b" leaves it


async def test_every_limit_of_a_request_is_kept(store: Any, clock: Clock) -> None:
    both = {"concurrency": 3, "per_second": 2.0, "per_minute": 3.0}
    assert (await ask(store, "a", **both)).granted
    assert (await ask(store, "b", **both)).granted
    decision = await ask(store, "c", **both)
    assert (decision.reason, near(decision.retry_at, 1)) == ("2 in the last 1 s", True)
    clock.at(1.5)
    assert (await ask(store, "c", **both)).granted
    clock.at(3)
    decision = await ask(store, "d", **both)
    assert (decision.granted, decision.use) == (False, LimitUse("api", 3, 1))
    assert decision.reason == "3 of 3 in use"  # slots first, then the windows
    await store.release_grant("a", "api")
    decision = await ask(store, "d", **both)
    assert (decision.reason, near(decision.retry_at, 60)) == ("3 in the last 60 s", True)


async def test_a_paced_limit_grants_nothing_until_the_pause_ends(
        store: Any, clock: Clock) -> None:
    assert (await ask(store, "a", concurrency=5)).granted
    await store.pace_limit("api", T0 + timedelta(seconds=5))
    clock.at(1)
    assert await store.paced_until("api") == T0 + timedelta(seconds=5)
    assert await ask(store, "b", concurrency=5) == GrantDecision(
        False, LimitUse("api", 1, 1), T0 + timedelta(seconds=5), PACED)
    assert await ask(store, "a", concurrency=5) == GrantDecision(True, LimitUse("api", 1, 1))
    clock.at(5.5)
    assert await ask(store, "b", concurrency=5) == GrantDecision(True, LimitUse("api", 2, 0))


async def test_without_a_concurrency_waiters_of_a_rate_go_in_turn(
        store: Any, clock: Clock) -> None:
    limit = {"per_second": 1.0}
    assert (await ask(store, "a", **limit)).granted
    clock.at(0.1)
    assert not (await ask(store, "b", **limit)).granted
    clock.at(0.2)
    assert not (await ask(store, "c", **limit)).granted
    clock.at(1.1)  # one place: "b" asked first
    assert await ask(store, "c", **limit) == GrantDecision(
        False, LimitUse("api", 1, 2), None, WAITED_LONGER)
    assert await ask(store, "b", **limit) == GrantDecision(True, LimitUse("api", 2, 1))


async def test_requests_at_once_take_no_more_than_the_slots(store: Any) -> None:
    # (PostgreSQL: four connections, each request waiting for the limit's lock in turn)
    decisions = await asyncio.gather(*(ask(store, f"g{i}", concurrency=3) for i in range(24)))
    assert sum(d.granted for d in decisions) == 3
    assert await store.limit_use("api") == LimitUse("api", 3, 21)
    assert {d.reason for d in decisions if not d.granted} <= {"3 of 3 in use", WAITED_LONGER}


async def test_a_grant_whose_reply_was_lost_runs_again_and_finds_itself_held(
        pg: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # the statement committed, then the connection went: the driver cannot tell, and sends
    # it again (the statement is its own transaction); asking again for a grant held is safe
    real = _postgres.write_alone
    replies: list[Any] = []

    async def reply_lost(tx: Any, perform: Any) -> Any:
        value = await real(tx, perform)
        replies.append(value)
        if len(replies) % 2:
            raise asyncpg.ConnectionDoesNotExistError("connection was closed")
        return value

    monkeypatch.setattr(_postgres, "write_alone", reply_lost)
    assert await ask(pg, "g1", concurrency=1) == GrantDecision(True, LimitUse("api", 1, 0))
    assert replies == [GrantDecision(True, LimitUse("api", 1, 0))] * 2
    assert await ask(pg, "g2", concurrency=1) == GrantDecision(
        False, LimitUse("api", 1, 1), None, "1 of 1 in use")
    await pg.release_grant("g1", "api")
    assert len(replies) == 6  # the release ran twice too, changing nothing the second time
    assert await pg.limit_use("api") == LimitUse("api", 0, 1)
    assert await ask(pg, "g2", concurrency=1) == GrantDecision(True, LimitUse("api", 1, 0))
