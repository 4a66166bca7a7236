"""What stores do for parked tasks (``waits="branch"``), on memory, SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses

import pytest

from durable_flow.errors import RunLockedError
from durable_flow.model._clock import utcnow
from durable_flow.model._records import RunStatus
from durable_flow.store._protocols import CheckpointStore, Commit, ParkedRow, RunUpdate

from .builders import request, start_run


async def test_the_parked_tasks_of_a_checkpoint_load_back(store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    parked = (ParkedRow("ask", chain.head.id, 2),
              ParkedRow("check[1]", chain.head.id, 2, arg=b'{"amount":500}'))
    cp = chain.next(parked=parked)
    await store.commit(Commit(lease, checkpoint=cp, extends=chain.metas[-2].id,
                              run=RunUpdate(RunStatus.RUNNING, head_checkpoint_id=cp.meta.id)))
    loaded = await store.load_checkpoint("r1", cp.meta.id)
    assert loaded.meta.parked == parked
    assert (await store.get_checkpoint("r1", chain.metas[0].id)).parked == ()  # type: ignore[union-attr]


async def test_a_parked_request_is_answered_while_the_run_is_held(store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    head = chain.head.id
    await store.commit(Commit(lease, requests=[
        dataclasses.replace(request("r1", head, "parked"), parked=True),
        request("r1", head, "plain", node="other")]))
    with pytest.raises(RunLockedError):  # a request of a task that does not park: as before
        await store.respond("r1", {"plain": b"true"})
    run = await store.respond("r1", {"parked": b"true"})
    assert run.status is RunStatus.RUNNING and run.lease_owner == lease.owner
    rows = {r.id: r for r in await store.get_requests("r1")}
    assert rows["parked"].answer == b"true" and rows["plain"].answer is None
    with pytest.raises(RunLockedError):  # a mix is refused whole, nothing recorded
        await store.respond("r1", {"plain": b"true", "parked": b"true"})


async def test_a_waiting_commit_queues_the_run_when_a_parked_request_was_answered_since(
        store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    head = chain.head.id
    await store.commit(Commit(lease, requests=[
        dataclasses.replace(request("r1", head, "q1"), parked=True)]))
    await store.respond("r1", {"q1": b"true"})  # after the engine looked at it
    await store.commit(Commit(lease, extends=head, parked_on=["q1"],
                              run=RunUpdate(RunStatus.WAITING, release=True)))
    run = await store.get_run("r1")
    assert run is not None and run.status is RunStatus.QUEUED


async def test_a_waiting_commit_whose_parked_requests_are_open_waits(
        store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    head = chain.head.id
    await store.commit(Commit(lease, requests=[
        dataclasses.replace(request("r1", head, "q1"), parked=True)], extends=head,
        parked_on=["q1"], run=RunUpdate(RunStatus.WAITING, release=True)))
    run = await store.get_run("r1")
    assert run is not None and run.status is RunStatus.WAITING


async def test_settle_closes_the_due_waits_of_a_held_run(store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    head = chain.head.id
    due = dataclasses.replace(request("r1", head, "nap"), kind="timer", parked=True,
                              expires_at=utcnow())
    await store.commit(Commit(lease, requests=[due]))
    assert await store.settle(lease) is True
    [row] = await store.get_requests("r1")
    assert row.timed_out and row.answer is not None
    assert await store.settle(lease) is False  # nothing left to do
