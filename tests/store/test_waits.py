"""Time and events every store must keep alike: wake times, due claims, the mailbox, moves."""

from __future__ import annotations

import dataclasses
import sqlite3
from datetime import datetime, timedelta
from pathlib import Path

import orjson
import pytest

from durable_flow.errors import LeaseLostError, RunNotResumableError, UnknownRequestError
from durable_flow.model._clock import utcnow
from durable_flow.model._records import RunStatus
from durable_flow.store._protocols import (
    Carry,
    CheckpointStore,
    Claim,
    Commit,
    RequestRow,
    RunUpdate,
)
from durable_flow.store.sql._tables import queries_for
from durable_flow.store.sql._waits import waits_of
from durable_flow.store.sqlite._sqlite import SQLITE, SqliteStore

from .builders import Chain, make_run, request, start_run, step, task_write


def timer(run_id: str, checkpoint_id: str, rid: str, due: datetime) -> RequestRow:
    return dataclasses.replace(request(run_id, checkpoint_id, rid), kind="timer", payload=b"null",
                               response_schema=b"{}", expires_at=due)


def event_wait(run_id: str, checkpoint_id: str, rid: str, name: str,
               due: datetime | None = None, created: datetime | None = None) -> RequestRow:
    return dataclasses.replace(request(run_id, checkpoint_id, rid), kind="event",
                               payload=orjson.dumps(name), expires_at=due,
                               created_at=created or utcnow())


async def wait_on(store: CheckpointStore, run_id: str, *rows: RequestRow) -> Chain:
    """Start a run and leave it waiting on ``rows`` (recorded against its head)."""
    chain, lease = await start_run(store, run_id)
    head = chain.head.id
    rows = tuple(dataclasses.replace(r, checkpoint_id=head) for r in rows)
    await store.commit(Commit(lease, extends=head, requests=rows,
                              run=RunUpdate(RunStatus.WAITING, release=True)))
    return chain


async def test_a_waiting_commit_sets_the_earliest_time_among_open_waits(
        store: CheckpointStore) -> None:
    soon, later = utcnow() + timedelta(hours=1), utcnow() + timedelta(hours=2)
    await wait_on(store, "r1", timer("r1", "", "t1", later), timer("r1", "", "t2", soon),
                  request("r1", "", "q1"))
    run = await store.get_run("r1")
    assert run is not None and run.status is RunStatus.WAITING and run.wake_at == soon
    await wait_on(store, "r2", request("r2", "", "q1"))
    run = await store.get_run("r2")
    assert run is not None and run.wake_at is None


async def test_workers_claim_waiting_runs_once_their_time_has_come(
        store: CheckpointStore) -> None:
    await wait_on(store, "due", timer("due", "", "t", utcnow() - timedelta(seconds=1)))
    await wait_on(store, "ahead", timer("ahead", "", "t", utcnow() + timedelta(hours=1)))
    await wait_on(store, "asks", request("asks", "", "q"))
    claimed = await store.claim_next("w", 30, [("wf", "1")], limit=10)
    assert [(run.run_id, run.status, run.wake_at) for run, _ in claimed] == [
        ("due", RunStatus.RUNNING, None)]
    [closed] = await store.get_requests("due")
    assert closed.timed_out and closed.answer == b"null"  # the timer fired with the claim
    assert await store.claim_next("w", 30, [("wf", "1")], limit=10) == []
    run = await store.get_run("due")
    assert run is not None and run.wake_at is None and run.lease_owner == "w"


async def test_a_claim_closes_due_waits_and_refuses_answers_past_their_deadline(
        store: CheckpointStore) -> None:
    past = utcnow() - timedelta(seconds=1)
    await wait_on(store, "r1", dataclasses.replace(request("r1", "", "q1"), expires_at=past),
                  request("r1", "", "q2"))
    with pytest.raises(UnknownRequestError):
        await store.respond("r1", {"q1": b"true"})
    with pytest.raises(UnknownRequestError):
        await store.claim(Claim("r1", "a", 30, answers={"q1": b"true"}))
    assert all(r.answer is None for r in await store.get_requests("r1"))  # nothing written
    assert [r.id for r in await store.pending_requests()] == ["q2"]  # past due: not in the inbox
    lease = await store.claim(Claim("r1", "a", 30))
    q1, q2 = await store.get_requests("r1")
    assert q1.timed_out and q1.answer == b"null" and q2.answer is None
    run = await store.get_run("r1")
    assert run is not None and run.status is RunStatus.RUNNING and lease.epoch == 2
    await store.release_lease(lease)
    with pytest.raises(UnknownRequestError):  # closed by its time, even for the same value
        await store.respond("r1", {"q1": b"null"})


async def test_answering_the_last_request_queues_a_run_that_also_sleeps(
        store: CheckpointStore) -> None:
    await wait_on(store, "r1", request("r1", "", "q1"),
                  timer("r1", "", "t1", utcnow() + timedelta(hours=1)))
    run = await store.respond("r1", {"q1": b"true"})
    assert run.status is RunStatus.QUEUED and run.wake_at is None


async def test_an_event_is_delivered_at_once_to_a_run_no_execution_holds(
        store: CheckpointStore) -> None:
    await wait_on(store, "r1", event_wait("r1", "", "w1", "paid"))
    run = await store.send_event("r1", "paid", b'{"amount":5}')
    assert run.status is RunStatus.QUEUED
    [wait] = await store.get_requests("r1")
    assert wait.answer == b'{"amount":5}' and not wait.timed_out
    [mail] = await store.get_mail("r1")
    assert (mail.seq, mail.name, mail.request_id) == (1, "paid", "w1")


async def test_events_nobody_waits_for_are_kept_in_the_order_sent(store: CheckpointStore) -> None:
    await wait_on(store, "r1", event_wait("r1", "", "w1", "other"))
    for n in range(3):
        run = await store.send_event("r1", "paid", str(n).encode())
        assert run.status is RunStatus.WAITING
    assert [(m.seq, m.payload, m.request_id) for m in await store.get_mail("r1")] == [
        (1, b"0", None), (2, b"1", None), (3, b"2", None)]
    lease = await store.claim(Claim("r1", "a", 30))
    got = []
    for i in range(2):
        wait = event_wait("r1", "", f"p{i}", "paid")
        got.append((await store.wait_event(lease, wait)).answer)
    assert got == [b"0", b"1"]
    assert [m.request_id for m in await store.get_mail("r1")] == ["p0", "p1", None]


async def test_an_event_sent_while_a_run_executes_is_delivered_when_it_waits(
        store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    wait = await store.wait_event(lease, event_wait("r1", chain.head.id, "w1", "paid"))
    assert wait.answer is None
    run = await store.send_event("r1", "paid", b"1")  # the execution holds the run: kept
    assert run.status is RunStatus.RUNNING
    assert [m.request_id for m in await store.get_mail("r1")] == [None]
    await store.commit(Commit(lease, extends=chain.head.id,
                              run=RunUpdate(RunStatus.WAITING, release=True)))
    run = await store.get_run("r1")
    assert run is not None and run.status is RunStatus.QUEUED  # it had come: go on at once
    [wait] = await store.get_requests("r1")
    assert wait.answer == b"1"


async def test_an_event_goes_to_no_wait_whose_deadline_had_passed(store: CheckpointStore) -> None:
    past = utcnow() - timedelta(seconds=1)
    await wait_on(store, "r1", event_wait("r1", "", "w1", "paid", due=past))
    await store.send_event("r1", "paid", b"1")
    lease = await store.claim(Claim("r1", "a", 30))
    [wait] = await store.get_requests("r1")
    assert wait.timed_out and wait.answer == b"null"
    assert [m.request_id for m in await store.get_mail("r1")] == [None]  # kept for a later wait
    later = await store.wait_event(lease, event_wait("r1", "", "w2", "paid"))
    assert later.answer == b"1"


async def test_send_event_refuses_finished_runs(store: CheckpointStore) -> None:
    await store.create_run(make_run("done", status=RunStatus.COMPLETED), [], None)
    with pytest.raises(RunNotResumableError):
        await store.send_event("done", "paid", b"1")
    assert await store.get_mail("done") == []


async def test_a_carry_moves_what_a_superstep_recorded_onto_the_new_checkpoint(
        store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    head = chain.head.id
    await store.put_task_writes(lease, [task_write("r1", head, "a"), task_write("r1", head, "b")])
    await store.put_step(lease, step("r1", head, "approve", "fetch", b"1"))
    nxt = chain.next(values={"topic": "moved"}, source="migrate")
    await store.commit(Commit(lease, extends=head, requests=[request("r1", head, "q1")],
                              checkpoint=nxt, carry=Carry(head, {"approve": "sign", "a": "b",
                                                                 "b": "a"}),
                              run=RunUpdate(RunStatus.RUNNING, head_checkpoint_id=nxt.meta.id,
                                            workflow_version="2", signature="sig-2")))
    new = nxt.meta.id
    assert await store.get_task_writes("r1", head) == []
    moved = await store.get_task_writes("r1", new)
    assert [(w.node, w.checkpoint_id) for w in moved] == [("a", new), ("b", new)]
    assert await store.get_steps("r1", new, "sign") == {"fetch": b"1"}
    [req] = await store.get_requests("r1")
    assert (req.id, req.checkpoint_id, req.node) == ("q1", new, "sign")
    run = await store.get_run("r1")
    assert run is not None and (run.workflow_version, run.signature) == ("2", "sig-2")


async def test_nested_checkpoints_of_a_commit_each_take_over_what_their_source_recorded(
        store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    inner = chain.sub("sub", 0)
    first = inner.next(values={"x": 1}, status=RunStatus.WAITING)
    await store.commit(Commit(lease, checkpoint=first, requests=[request("r1", first.meta.id,
                                                                         "sub@1/ask@1#0")]))
    await store.put_step(lease, step("r1", first.meta.id, "sub.ask", "fetch", b"1"))
    top = chain.next()
    copy = chain.sub("sub").next(values={"x": 1}, status=RunStatus.WAITING)
    # a nested checkpoint must start its thread (its parent may be another thread's:
    # the head it continues); one in a thread that has checkpoints is refused
    taken = inner.next(values={"x": 2}, status=RunStatus.WAITING)
    with pytest.raises(LeaseLostError):
        await store.commit(Commit(lease, extends=chain.metas[0].id, checkpoint=top,
                                  nested=[(taken, Carry(first.meta.id))]))
    assert await store.get_checkpoint("r1", top.meta.id) is None
    await store.commit(Commit(lease, extends=chain.metas[0].id, checkpoint=top,
                              nested=[(copy, Carry(first.meta.id))],
                              run=RunUpdate(RunStatus.RUNNING, head_checkpoint_id=top.meta.id)))
    [req] = await store.get_requests("r1")
    assert (req.id, req.checkpoint_id) == ("sub@1/ask@1#0", copy.meta.id)
    assert await store.get_steps("r1", copy.meta.id, "sub.ask") == {"fetch": b"1"}
    assert await store.get_steps("r1", first.meta.id, "sub.ask") == {}
    head = await store.thread_head("r1", copy.meta.thread)
    assert head is not None and head.id == copy.meta.id
    old = await store.thread_head("r1", first.meta.thread)
    assert old is not None and old.id == first.meta.id  # the old thread is as it was


async def test_graphs_are_kept_once_per_signature(store: CheckpointStore) -> None:
    assert await store.get_graph("sig") is None
    await store.put_graph("sig", "wf", "1", b'{"nodes":{}}')
    await store.put_graph("sig", "wf", "1", b'{"other":1}')
    assert await store.get_graph("sig") == b'{"nodes":{}}'


async def test_due_runs_are_found_through_the_wake_index(tmp_path: Path) -> None:
    path = tmp_path / "plan.db"
    async with SqliteStore(path) as created:
        await created.get_run("none")  # the schema is there
    stmt = waits_of(queries_for(SQLITE)).run_due
    conn = sqlite3.connect(path)
    try:
        plan = conn.execute(f"EXPLAIN QUERY PLAN {stmt.sql}",
                            stmt.bind({"workflow_name": "wf", "workflow_version": "1",
                                       "now": 0, "n": 5})).fetchall()
    finally:
        conn.close()
    assert any("ix_runs_wake" in row[-1] for row in plan), plan
