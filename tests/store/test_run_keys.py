"""Per-key run concurrency every store must keep alike: a full key's runs stay queued, in order."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import asyncpg

from durable_flow.model._clock import utcnow
from durable_flow.model._records import RunStatus
from durable_flow.store._protocols import CheckpointStore, Commit, Lease, RunUpdate
from durable_flow.store.postgres._postgres import PostgresStore

from .builders import Chain, at, make_run, request
from .test_waits import timer

WF = [("wf", "1")]


async def queue(store: CheckpointStore, run_id: str, key: str | None, *, second: float,
                max_per_key: int | None = 1, priority: int = 0) -> Chain:
    """A queued run submitted ``second`` seconds after T0 with ``key``."""
    chain = Chain(run_id)
    cp = chain.next(values={"topic": "tides"}, source="input", created=at(second))
    await store.create_run(make_run(
        run_id, status=RunStatus.QUEUED, created=at(second), head_checkpoint_id=cp.meta.id,
        priority=priority, concurrency_key=key,
        max_per_key=max_per_key if key is not None else None), [cp], None)
    return chain


async def claim(store: CheckpointStore, owner: str = "w", limit: int = 10) -> dict[str, Lease]:
    return {run.run_id: lease for run, lease in
            await store.claim_next(owner, 30, WF, limit=limit)}


async def finish(store: CheckpointStore, chain: Chain, lease: Lease,
                 status: RunStatus = RunStatus.COMPLETED) -> None:
    await store.commit(Commit(lease, extends=chain.head.id,
                              run=RunUpdate(status, release=True)))


async def test_a_full_key_keeps_its_runs_queued_while_other_keys_go_on(
        store: CheckpointStore) -> None:
    chains = {"a1": await queue(store, "a1", "acme", second=1),
              "a2": await queue(store, "a2", "acme", second=2),
              "a3": await queue(store, "a3", "acme", second=3),
              "b1": await queue(store, "b1", "bolt", second=4)}
    await queue(store, "n1", None, second=5)
    first = await claim(store)
    assert sorted(first) == ["a1", "b1", "n1"]
    for run_id, status in (("a2", RunStatus.QUEUED), ("a3", RunStatus.QUEUED),
                           ("a1", RunStatus.RUNNING)):
        run = await store.get_run(run_id)
        assert run is not None and run.status is status
        assert run.concurrency_key == "acme" and run.max_per_key == 1
    assert await claim(store) == {}  # acme is full; nothing else is queued
    await finish(store, chains["a1"], first["a1"])
    second = await claim(store)
    assert list(second) == ["a2"]  # the oldest of the key, not a3
    await finish(store, chains["a2"], second["a2"], RunStatus.FAILED)
    assert list(await claim(store)) == ["a3"]


async def test_a_key_takes_up_to_its_limit_in_order_and_priority_first(
        store: CheckpointStore) -> None:
    for i in range(4):
        await queue(store, f"k{i}", "acme", second=i, max_per_key=2)
    await queue(store, "urgent", "acme", second=9, max_per_key=2, priority=5)
    claimed = await claim(store)
    assert sorted(claimed) == ["k0", "urgent"]
    assert await claim(store) == {}
    running = [r.run_id for r in await store.list_runs(status=RunStatus.RUNNING)]
    assert sorted(running) == ["k0", "urgent"]


async def test_a_claim_of_one_run_at_a_time_still_skips_a_full_key(
        store: CheckpointStore) -> None:
    """Held-back runs never fill a claim's LIMIT: the older runs of a full key come first."""
    await queue(store, "a1", "acme", second=1)
    await queue(store, "a2", "acme", second=2)
    await queue(store, "a3", "acme", second=3)
    await queue(store, "b1", "bolt", second=4)
    assert list(await claim(store, limit=1)) == ["a1"]
    assert list(await claim(store, limit=1)) == ["b1"]
    assert await claim(store, limit=1) == {}


async def test_two_claims_at_once_never_exceed_the_limit(store: CheckpointStore) -> None:
    for i in range(6):
        await queue(store, f"k{i}", "acme", second=i, max_per_key=2)
    for i in range(3):
        await queue(store, f"o{i}", f"other{i}", second=10 + i)
    results = await asyncio.gather(*(claim(store, f"w{n}", limit=3) for n in range(4)))
    taken = [run_id for found in results for run_id in found]
    assert len(taken) == len(set(taken))
    assert sorted(r for r in taken if r.startswith("k")) == ["k0", "k1"]
    assert sorted(r for r in taken if r.startswith("o")) == ["o0", "o1", "o2"]


async def test_waiting_runs_do_not_count_and_a_due_one_waits_for_room(
        store: CheckpointStore) -> None:
    chain = await queue(store, "a1", "acme", second=1)
    other = await queue(store, "a2", "acme", second=2)
    lease = (await claim(store))["a1"]
    # a1 waits on a timer: it holds nothing while it waits, so a2 starts
    soon = timer("a1", chain.head.id, "t", utcnow() + timedelta(seconds=0.2))
    await store.commit(Commit(lease, extends=chain.head.id, requests=[soon],
                              run=RunUpdate(RunStatus.WAITING, release=True)))
    second = await claim(store)
    assert list(second) == ["a2"]
    await asyncio.sleep(0.25)
    # a1's timer has come, but a2 runs: a1 stays waiting until a2 lets go
    assert await claim(store) == {}
    run = await store.get_run("a1")
    assert run is not None and run.status is RunStatus.WAITING
    await finish(store, other, second["a2"])
    assert list(await claim(store)) == ["a1"]


async def test_a_run_waiting_on_a_person_does_not_hold_its_key(store: CheckpointStore) -> None:
    chain = await queue(store, "a1", "acme", second=1)
    await queue(store, "a2", "acme", second=2)
    lease = (await claim(store))["a1"]
    ask = request("a1", chain.head.id, "q")
    await store.commit(Commit(lease, extends=chain.head.id, requests=[ask],
                              run=RunUpdate(RunStatus.WAITING, release=True)))
    second = await claim(store)
    assert list(second) == ["a2"]
    # the answer queues a1 again; it starts when a2 is done
    await store.respond("a1", {"q": b"true"})
    assert await claim(store) == {}
    assert (run := await store.get_run("a1")) is not None and run.status is RunStatus.QUEUED


async def test_a_running_run_whose_holder_died_is_claimed_again_within_its_key(
        store: CheckpointStore) -> None:
    await queue(store, "a1", "acme", second=1)
    await queue(store, "a2", "acme", second=2)
    first = await store.claim_next("dead", 0.05, WF, limit=10)
    assert [r.run_id for r, _ in first] == ["a1"]
    await asyncio.sleep(0.1)  # its lease runs out: a1 is still the key's one running run
    again = await claim(store)
    assert list(again) == ["a1"] and again["a1"].epoch == first[0][1].epoch + 1


async def test_on_postgresql_a_claim_of_a_key_waits_for_another_claim_of_it(
        pg: PostgresStore, pg_dsn: str) -> None:
    """Another transaction holding the key's lock (a claim in flight) is waited for, then counted."""
    await queue(pg, "a1", "acme", second=1, max_per_key=1)
    await queue(pg, "a2", "acme", second=2, max_per_key=1)
    await queue(pg, "b1", "bolt", second=3, max_per_key=1)
    other = await asyncpg.connect(pg_dsn)
    try:
        tx = other.transaction()
        await tx.start()
        await other.execute("SELECT pg_advisory_xact_lock(hashtext('acme'))")
        # the other claim took a1 in its transaction, not yet committed
        await other.execute("UPDATE runs SET status = 'running', lease_owner = 'other', "
                            "lease_epoch = lease_epoch + 1 WHERE run_id = 'a1'")
        claiming = asyncio.create_task(claim(pg))
        await asyncio.sleep(0.3)
        assert not claiming.done()  # it waits for the key, not past it
        await tx.commit()
        assert list(await asyncio.wait_for(claiming, 10)) == ["b1"]  # acme is full now
    finally:
        await other.close()
    run = await pg.get_run("a2")
    assert run is not None and run.status is RunStatus.QUEUED
