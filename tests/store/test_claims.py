"""Ownership primitives every store must share: claims, run creation, head-checked commits."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from durable_flow.errors import (
    LeaseLostError,
    RunExistsError,
    RunLockedError,
    RunNotFoundError,
    RunNotResumableError,
    UnknownRequestError,
)
from durable_flow.model._records import RunStatus
from durable_flow.store._protocols import (
    CheckpointStore,
    Claim,
    Commit,
    RunUpdate,
)

from .builders import Chain, make_run, request, start_run


async def dump(store: CheckpointStore, run_id: str) -> object:
    """Everything a claim or a commit could change for one run."""
    run = await store.get_run(run_id)
    cps = await store.list_checkpoints(run_id)
    return (run, cps, await store.get_requests(run_id),
            [await store.get_task_writes(run_id, m.id) for m in cps])


async def test_create_run_writes_run_checkpoints_and_status_at_once(
    store: CheckpointStore,
) -> None:
    chain = Chain("r1")
    cp = chain.next(values={"a": 1}, source="input")
    done = make_run("r1", status=RunStatus.COMPLETED, head_checkpoint_id=cp.meta.id)
    await store.create_run(done, [cp], None)
    run = await store.get_run("r1")
    assert run is not None and run.status is RunStatus.COMPLETED and run.lease_owner is None
    assert await store.thread_head("r1", "") == cp.meta
    before = await dump(store, "r1")
    with pytest.raises(RunExistsError):
        await store.create_run(make_run("r1"), [Chain("r1").next(values={"b": 2})], None)
    assert await dump(store, "r1") == before


@pytest.mark.parametrize("status", [RunStatus.COMPLETED, RunStatus.CANCELLED])
async def test_a_finished_run_cannot_be_claimed(store: CheckpointStore, status: RunStatus) -> None:
    await store.create_run(make_run("r1", status=status), [], None)
    before = await dump(store, "r1")
    with pytest.raises(RunNotResumableError):
        await store.claim(Claim("r1", "a", 30))
    assert await dump(store, "r1") == before
    with pytest.raises(RunNotFoundError):
        await store.claim(Claim("nope", "a", 30))


async def test_a_claim_records_answers_to_open_requests_only(store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    head = chain.head.id
    await store.commit(Commit(lease, extends=head,
                              requests=[request("r1", head, "q1"), request("r1", head, "q2")],
                              run=RunUpdate(RunStatus.WAITING, release=True)))
    first = await store.claim(Claim("r1", "a", 30, answers={"q1": b"true"}))
    run = await store.get_run("r1")
    assert run is not None and run.status is RunStatus.RUNNING and run.lease_epoch == first.epoch
    assert [r.id for r in await store.get_requests("r1", open_only=True)] == ["q2"]
    await store.release_lease(first)
    before = await dump(store, "r1")
    # a different answer to an answered request, or an unknown id: refused, nothing written
    for answers in ({"q1": b"false"}, {"q2": b"1", "ghost": b"1"}):
        with pytest.raises(UnknownRequestError):
            await store.claim(Claim("r1", "b", 30, answers=answers))
        assert await dump(store, "r1") == before
    # the identical answer again is skipped; the other one is recorded
    second = await store.claim(Claim("r1", "b", 30, answers={"q1": b"true", "q2": b"2"}))
    assert second.epoch == first.epoch + 1
    assert {r.id: r.answer for r in await store.get_requests("r1")} == {
        "q1": b"true", "q2": b"2"}


async def test_a_waiting_run_claimed_without_answers_stays_waiting(
    store: CheckpointStore,
) -> None:
    chain, lease = await start_run(store, "r1")
    await store.commit(Commit(lease, extends=chain.head.id,
                              run=RunUpdate(RunStatus.WAITING, release=True)))
    await store.claim(Claim("r1", "a", 30))
    run = await store.get_run("r1")
    assert run is not None and run.status is RunStatus.WAITING and run.lease_owner == "a"


async def test_a_claim_is_refused_when_the_head_moved(store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    old = chain.head.id
    cp = chain.next(values={"x": 1})
    await store.commit(Commit(lease, extends=old, checkpoint=cp, run=RunUpdate(
        RunStatus.WAITING, head_checkpoint_id=cp.meta.id, release=True)))
    before = await dump(store, "r1")
    with pytest.raises(RunLockedError):
        await store.claim(Claim("r1", "a", 30, expect_head=old))
    assert await dump(store, "r1") == before
    assert (await store.claim(Claim("r1", "a", 30, expect_head=cp.meta.id))).owner == "a"


async def test_concurrent_claims_have_exactly_one_winner(store: CheckpointStore) -> None:
    for trial in range(10):
        run_id = f"race{trial}"
        await start_run(store, run_id, ttl=-1)  # an expired lease: anyone may take it
        outcomes = await asyncio.gather(
            *(store.claim(Claim(run_id, f"w{i}", 30)) for i in range(8)),
            return_exceptions=True)
        winners = [o for o in outcomes if not isinstance(o, BaseException)]
        assert len(winners) == 1, outcomes
        assert all(isinstance(o, RunLockedError) for o in outcomes if o not in winners)
        run = await store.get_run(run_id)
        assert run is not None and run.lease_owner == winners[0].owner


async def test_a_commit_naming_a_moved_head_writes_nothing(store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    base = chain.head.id
    winner = chain.next(values={"x": 1})
    await store.commit(Commit(lease, extends=base, checkpoint=winner, run=RunUpdate(
        RunStatus.RUNNING, head_checkpoint_id=winner.meta.id)))
    # a second commit built on the same base (a stale view of the run)
    stale = dataclasses.replace(winner.meta, id="ck-stale", seq=winner.meta.seq)
    before = await dump(store, "r1")
    with pytest.raises(LeaseLostError, match="head"):
        await store.commit(Commit(lease, extends=base, checkpoint=dataclasses.replace(
            winner, meta=stale), run=RunUpdate(RunStatus.COMPLETED, head_checkpoint_id="ck-stale")))
    with pytest.raises(LeaseLostError, match="head"):
        await store.commit(Commit(lease, extends=base,
                                  run=RunUpdate(RunStatus.FAILED, release=True)))
    assert await dump(store, "r1") == before


async def test_a_sub_thread_checkpoint_must_extend_its_thread_head(
    store: CheckpointStore,
) -> None:
    chain, lease = await start_run(store, "r1")
    sub = chain.sub("review")
    first = sub.next(values={"n": 1})
    await store.commit(Commit(lease, checkpoint=first))
    before = await dump(store, "r1")
    again = dataclasses.replace(first, meta=dataclasses.replace(first.meta, id="ck-dup"))
    with pytest.raises(LeaseLostError):  # a second first checkpoint of the same thread
        await store.commit(Commit(lease, checkpoint=again))
    assert await dump(store, "r1") == before


async def test_cancel_refuses_a_finished_run_and_changes_nothing(store: CheckpointStore) -> None:
    await store.create_run(make_run("r1", status=RunStatus.COMPLETED), [], None)
    before = await dump(store, "r1")
    with pytest.raises(RunNotResumableError):
        await store.cancel_run("r1")
    assert await dump(store, "r1") == before
