"""The behaviour every CheckpointStore must share (see durable_flow/store/_protocols.py)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from durable_flow.errors import (
    CheckpointCorruptedError,
    CheckpointNotFoundError,
    LeaseLostError,
    RunExistsError,
    RunLockedError,
    RunNotFoundError,
    UnknownRequestError,
)
from durable_flow.model._clock import utcnow
from durable_flow.model._records import CheckpointRef, RunStatus
from durable_flow.store._protocols import (
    Carry,
    CheckpointStore,
    Claim,
    Commit,
    Lease,
    RunUpdate,
    StatusMark,
)

from .builders import (
    BOOM,
    Chain,
    at,
    make_run,
    new_id,
    request,
    start_run,
    state_of,
    step,
    task_write,
)

# -- runs -------------------------------------------------------------------------------


async def test_created_run_reads_back_equal(store: CheckpointStore) -> None:
    chain = Chain("r1")
    run = make_run("r1", error=BOOM, forked_from=CheckpointRef("r0", "c9"), workflow_ref="m:w",
                   max_supersteps=7)
    await store.create_run(run, [chain.next(values={"a": 1})], None)
    assert await store.get_run("r1") == run
    assert await store.get_run("nope") is None


async def test_create_run_with_lease_records_it(store: CheckpointStore) -> None:
    lease = Lease("r1", "me", 3, at(60))
    await store.create_run(make_run("r1"), [], lease)
    got = await store.get_run("r1")
    assert got is not None
    assert (got.lease_owner, got.lease_epoch, got.lease_expires_at) == ("me", 3, at(60))


async def test_create_run_twice_fails(store: CheckpointStore) -> None:
    await store.create_run(make_run("r1"), [], None)
    with pytest.raises(RunExistsError, match="already exists"):
        await store.create_run(make_run("r1"), [], None)


async def test_create_run_saves_the_rows_recorded_against_its_checkpoints(
    store: CheckpointStore,
) -> None:
    """A fork starts with the task writes, steps and requests of the superstep it continues."""
    top = Chain("r1")
    base = top.next(values={"a": 1}, next_tasks=("side", "sub"))
    inner = top.sub("sub")
    inner_cp = inner.next(values={"b": 2})
    asked = dataclasses.replace(request("r1", inner.head.id, "sub@1/ask@1#0", created=at(3)),
                                thread=inner.thread, node="sub.ask")
    answered = dataclasses.replace(request("r1", base.meta.id, "side@1#0", node="side"),
                                   answer=b"true", answered_at=at(5))
    writes = [task_write("r1", base.meta.id, "side")]
    steps = [step("r1", base.meta.id, "side", "fetch", b'"data"')]
    await store.create_run(make_run("r1"), [base, inner_cp], None, task_writes=writes,
                           steps=steps, requests=[asked, answered])
    assert await store.get_task_writes("r1", base.meta.id) == writes
    assert await store.get_steps("r1", base.meta.id, "side") == {"fetch": b'"data"'}
    assert await store.get_requests("r1") == [answered, asked]
    assert await store.pending_requests() == [asked]
    with pytest.raises(RunExistsError, match="already exists"):  # and writes none of its rows
        await store.create_run(make_run("r1"), [], None, steps=[
            step("r1", base.meta.id, "side", "other", b"1")])
    assert await store.get_steps("r1", base.meta.id, "side") == {"fetch": b'"data"'}


async def test_list_runs_newest_first_with_filters(store: CheckpointStore) -> None:
    specs = [("a", "wf1", RunStatus.RUNNING, 1), ("b", "wf2", RunStatus.WAITING, 2),
             ("c", "wf1", RunStatus.WAITING, 3), ("d", "wf1", RunStatus.WAITING, 3)]
    for rid, wf, status, t in specs:
        await store.create_run(make_run(rid, workflow=wf, status=status, created=at(t)), [], None)
    assert [r.run_id for r in await store.list_runs()] == ["d", "c", "b", "a"]
    assert [r.run_id for r in await store.list_runs(workflow_name="wf1")] == ["d", "c", "a"]
    waiting = await store.list_runs(status=RunStatus.WAITING)
    assert [r.run_id for r in waiting] == ["d", "c", "b"]
    both = await store.list_runs(status=RunStatus.WAITING, workflow_name="wf2")
    assert [r.run_id for r in both] == ["b"]
    assert await store.list_runs(workflow_name="none") == []


# -- checkpoints and channels -----------------------------------------------------------


async def test_every_checkpoint_of_a_long_chain_loads_exactly(store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    for i in range(1, 40):
        values = {"count": i} if i % 3 else {"count": i, "flag": i % 2 == 0}
        appends = {"messages": [{"n": i, "text": "x" * (i % 5)}]}
        if i % 4 == 0:
            appends["history:a"] = [f"a{i}", f"a{i}'"]
        cp = chain.next(values=values if i % 7 else {}, appends=appends, nodes=("a", "b"),
                        next_tasks=("b",), joins={"j": ("a",)}, routing_reason="why",
                        size=i)
        await store.commit(Commit(lease, checkpoint=cp))
    for meta in [chain.head, *chain.metas[::5], chain.metas[0]]:
        loaded = await store.load_checkpoint("r1", meta.id)
        assert loaded.meta == meta
        assert state_of(loaded) == chain.expected[meta.id]


async def test_the_args_of_send_instances_load_back_with_their_checkpoint(
    store: CheckpointStore,
) -> None:
    chain, lease = await start_run(store, "r1")
    args = {"work[0]": b'"a"', "work[1]": b'{"n":1.5,"tags":["x",{"__df__":"set","v":[1]}]}',
            "work[10]": b"null"}
    cp = chain.next(nodes=("split",), next_tasks=("work[0]", "work[1]", "work[10]"),
                    task_args=args)
    await store.commit(Commit(lease, checkpoint=cp))
    assert (await store.load_checkpoint("r1", cp.meta.id)).meta == cp.meta
    assert (await store.get_checkpoint("r1", cp.meta.id)) == cp.meta
    assert [m.task_args for m in await store.list_checkpoints("r1")] == [args, {}]
    assert (await store.thread_head("r1", "")) == cp.meta


async def test_loaded_logs_hold_one_chunk_per_appending_checkpoint(
    store: CheckpointStore,
) -> None:
    chain, lease = await start_run(store, "r1")
    for items in (["a"], [], ["b", "c"]):
        cp = chain.next(appends={"log": items} if items else {})
        await store.commit(Commit(lease, checkpoint=cp))
    loaded = await store.load_checkpoint("r1", chain.head.id)
    assert loaded.logs == {"log": [b'["a"]', b'["b","c"]']}
    assert loaded.values == {"topic": b'"tides"'}


async def test_log_of_a_channel_the_checkpoint_does_not_list_is_not_loaded(
    store: CheckpointStore,
) -> None:
    chain, lease = await start_run(store, "r1")
    cp = chain.next(appends={"kept": [1], "dropped": [2]})
    meta = dataclasses.replace(cp.meta, log_lengths={"kept": 1})
    await store.commit(Commit(lease, checkpoint=dataclasses.replace(cp, meta=meta)))
    loaded = await store.load_checkpoint("r1", meta.id)
    assert loaded.logs == {"kept": [b"[1]"]}


async def test_threads_have_their_own_heads_and_channels(store: CheckpointStore) -> None:
    top, lease = await start_run(store, "r1")
    await store.commit(Commit(lease, checkpoint=top.next(values={"x": 1})))
    review = top.sub("review")
    legal = None
    for i in range(3):
        await store.commit(Commit(lease, checkpoint=review.next(
            values={"x": 100 + i}, appends={"log": [i]})))
        if i == 1:
            legal = review.sub("legal")
            await store.commit(Commit(lease, checkpoint=legal.next(values={"ok": True})))
    assert legal is not None
    other = top.sub("review", at_index=0)
    await store.commit(Commit(lease, checkpoint=other.next(values={"x": -1})))
    for chain in (top, review, legal, other):
        head = await store.thread_head("r1", chain.thread)
        assert head == chain.head
        assert state_of(await store.load_checkpoint("r1", head.id)) == chain.expected[head.id]
    assert await store.thread_head("r1", "missing/thread") is None
    assert await store.thread_head("r2", "") is None


async def test_child_checkpoints_are_those_written_on_a_checkpoint_in_any_thread(
    store: CheckpointStore,
) -> None:
    top, lease = await start_run(store, "r1")
    await store.commit(Commit(lease, checkpoint=top.next(values={"x": 0})))
    first, middle = top.metas
    # the head, and in the same commit a copy in a thread of its own written on the middle one
    # (as a run going on from a copy of a parked sub-workflow's checkpoint)
    copy = top.sub("sub").next(values={"x": -1})
    copy = dataclasses.replace(copy, meta=dataclasses.replace(copy.meta, parent_id=middle.id,
                                                              source="resume"))
    head = top.next(values={"x": 1})
    await store.commit(Commit(lease, checkpoint=head, nested=[(copy, Carry(middle.id))]))
    assert await store.child_checkpoints("r1", first.id) == [middle]
    children = await store.child_checkpoints("r1", middle.id)
    assert children == sorted([head.meta, copy.meta], key=lambda m: m.id)  # oldest first
    assert await store.child_checkpoints("r1", head.meta.id) == []
    assert await store.child_checkpoints("r1", copy.meta.id) == []
    assert await store.child_checkpoints("r2", first.id) == []  # another run's: none


async def test_history_is_newest_first_and_filters_by_namespace(store: CheckpointStore) -> None:
    top, lease = await start_run(store, "r1")
    sub = top.sub("review")
    for _ in range(2):
        await store.commit(Commit(lease, checkpoint=top.next()))
        await store.commit(Commit(lease, checkpoint=sub.next()))
    everything = await store.list_checkpoints("r1")
    ids = [m.id for m in everything]
    assert ids == sorted(ids, reverse=True) and len(ids) == 5
    assert await store.list_checkpoints("r1", namespace="") == top.metas[::-1]
    assert await store.list_checkpoints("r1", namespace="review") == sub.metas[::-1]
    assert await store.list_checkpoints("r1", thread=sub.thread) == sub.metas[::-1]
    assert await store.list_checkpoints("r1", namespace="review", thread="") == []
    assert await store.list_checkpoints("other") == []


async def test_parent_links_follow_the_chain(store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    for _ in range(3):
        await store.commit(Commit(lease, checkpoint=chain.next()))
    metas = (await store.list_checkpoints("r1"))[::-1]
    assert metas[0].parent_id is None
    assert [m.parent_id for m in metas[1:]] == [m.id for m in metas[:-1]]
    assert [m.seq for m in metas] == [0, 1, 2, 3]


async def test_missing_checkpoints(store: CheckpointStore) -> None:
    chain, _ = await start_run(store, "r1")
    await store.create_run(make_run("r2"), [], None)
    assert await store.get_checkpoint("r1", "nope") is None
    assert await store.get_checkpoint("r2", chain.head.id) is None
    with pytest.raises(CheckpointNotFoundError):
        await store.load_checkpoint("r2", chain.head.id)


async def test_commit_updates_run_marks_checkpoint_and_releases(store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    before = await store.get_run("r1")
    first = chain.head
    cp = chain.next(status=RunStatus.FAILED, error=BOOM)
    await store.commit(Commit(
        lease, checkpoint=cp, mark=StatusMark(first.id, RunStatus.WAITING, BOOM),
        run=RunUpdate(RunStatus.FAILED, head_checkpoint_id=cp.meta.id, error=BOOM,
                      release=True)))
    run = await store.get_run("r1")
    assert before is not None and run is not None
    assert (run.status, run.head_checkpoint_id, run.error) == (RunStatus.FAILED, cp.meta.id, BOOM)
    assert run.lease_owner is None and run.lease_expires_at is None
    assert run.lease_epoch == lease.epoch and run.updated_at >= before.updated_at
    marked = await store.get_checkpoint("r1", first.id)
    assert marked == dataclasses.replace(first, status=RunStatus.WAITING, error=BOOM)
    assert await store.get_checkpoint("r1", cp.meta.id) == cp.meta


async def test_run_update_without_head_keeps_the_head(store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    head = chain.head.id
    await store.commit(Commit(lease, run=RunUpdate(RunStatus.RUNNING, head_checkpoint_id=head)))
    await store.commit(Commit(lease, run=RunUpdate(RunStatus.WAITING)))
    run = await store.get_run("r1")
    assert run is not None and (run.head_checkpoint_id, run.status) == (head, RunStatus.WAITING)
    assert run.lease_owner == "owner-1"


async def test_mark_of_an_unknown_checkpoint_writes_nothing(store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    cp = chain.next()
    with pytest.raises(CheckpointNotFoundError):
        await store.commit(Commit(lease, checkpoint=cp, mark=StatusMark("nope", RunStatus.FAILED)))
    assert await store.get_checkpoint("r1", cp.meta.id) is None


# -- task writes and steps ---------------------------------------------------------------


async def test_task_writes_in_node_order_last_write_wins(store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    base = chain.head.id
    await store.put_task_writes(lease, [task_write("r1", base, "b"), task_write("r1", base, "a")])
    await store.put_task_writes(lease, [task_write("r1", base, "b", b'{"x":2}')])
    await store.commit(Commit(lease, task_writes=[task_write("r1", base, "c")]))
    writes = await store.get_task_writes("r1", base)
    assert [(w.node, w.data) for w in writes] == [
        ("a", b'{"x":1}'), ("b", b'{"x":2}'), ("c", b'{"x":1}')]
    assert writes[0] == task_write("r1", base, "a")
    assert await store.get_task_writes("r1", "other") == []


async def test_steps_are_kept_per_node_run(store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    base = chain.head.id
    await store.put_step(lease, step("r1", base, "a", "fetch", b"1"))
    await store.put_step(lease, step("r1", base, "a", "send", b"2"))
    await store.put_step(lease, step("r1", base, "b", "fetch", b"3"))
    assert await store.get_steps("r1", base, "a") == {"fetch": b"1", "send": b"2"}
    assert await store.get_steps("r1", base, "b") == {"fetch": b"3"}
    assert await store.get_steps("r1", "other", "a") == {}


# -- requests -----------------------------------------------------------------------------


async def test_requests_open_answered_and_inbox_order(store: CheckpointStore) -> None:
    c1, l1 = await start_run(store, "r1", workflow="wf1")
    c2, l2 = await start_run(store, "r2", workflow="wf2")
    head1, head2 = c1.head.id, c2.head.id
    await store.commit(Commit(l1, requests=[request("r1", head1, "q2", created=at(5)),
                                            request("r1", head1, "q1", created=at(3))]))
    await store.commit(Commit(l2, requests=[request("r2", head2, "q0", created=at(4),
                                                    workflow="wf2")]))
    assert [r.id for r in await store.pending_requests()] == ["q1", "q0", "q2"]
    assert [r.id for r in await store.pending_requests(workflow_name="wf2")] == ["q0"]
    assert await store.get_requests("r1") == [request("r1", head1, "q1", created=at(3)),
                                              request("r1", head1, "q2", created=at(5))]
    before = utcnow()
    await store.commit(Commit(l1, answers={"q1": b"true"}))
    answered = (await store.get_requests("r1"))[0]
    assert answered.answer == b"true"
    assert answered.answered_at is not None and answered.answered_at >= before
    assert [r.id for r in await store.get_requests("r1", open_only=True)] == ["q2"]
    assert [r.id for r in await store.pending_requests()] == ["q0", "q2"]
    assert await store.get_requests("r1", checkpoint_id="other") == []
    assert len(await store.get_requests("r1", checkpoint_id=head1)) == 2


async def test_inbox_pages_by_limit_and_cursor_in_inbox_order(store: CheckpointStore) -> None:
    c1, l1 = await start_run(store, "r1", workflow="wf1")
    c2, l2 = await start_run(store, "r2", workflow="wf2")
    # q1 and q0 share a created_at: the run id breaks the tie, then the request id
    await store.commit(Commit(l1, requests=[request("r1", c1.head.id, q, created=at(t))
                                            for q, t in (("q1", 2), ("q3", 2), ("q5", 9))]))
    await store.commit(Commit(l2, requests=[request("r2", c2.head.id, q, created=at(t),
                                                    workflow="wf2")
                                            for q, t in (("q0", 2), ("q4", 1))]))
    await store.commit(Commit(l1, answers={"q3": b"true"}))
    pages, after = [], None
    while page := await store.pending_requests(limit=2, after=after):
        pages.append([r.id for r in page])
        after = (page[-1].created_at, page[-1].run_id, page[-1].id)
    assert pages == [["q4", "q1"], ["q0", "q5"]]
    assert await store.pending_requests(limit=5) == await store.pending_requests()
    first = (await store.pending_requests())[1]
    rest = await store.pending_requests(after=(first.created_at, first.run_id, first.id))
    assert [r.id for r in rest] == ["q0", "q5"]
    wf2 = await store.pending_requests(workflow_name="wf2", limit=1)
    assert [r.id for r in wf2] == ["q4"]
    assert [r.id for r in await store.pending_requests(
        workflow_name="wf2", after=(wf2[0].created_at, "r2", "q4"))] == ["q0"]


async def test_a_request_saved_twice_keeps_the_first(store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    first = request("r1", chain.head.id, "q1", created=at(1))
    await store.commit(Commit(lease, requests=[first]))
    await store.commit(Commit(lease, answers={"q1": b"1"}))
    await store.commit(Commit(lease, requests=[request("r1", chain.head.id, "q1", created=at(9))]))
    [row] = await store.get_requests("r1")
    assert row.created_at == at(1) and row.answer == b"1"


async def test_drop_open_requests_keeps_answers_and_new_requests(store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    head = chain.head.id
    await store.commit(Commit(lease, requests=[request("r1", head, q) for q in ("q1", "q2", "q3")]))
    await store.commit(Commit(lease, answers={"q1": b"1"}))
    await store.commit(Commit(lease, answers={"q2": b"2"}, drop_open_requests=True,
                              requests=[request("r1", head, "q4")]))
    rows = await store.get_requests("r1")
    assert {r.id: r.answer for r in rows} == {"q1": b"1", "q2": b"2", "q4": None}


async def test_an_answer_to_an_unknown_request_writes_nothing(store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    await store.commit(Commit(lease, requests=[request("r1", chain.head.id, "q1")]))
    cp = chain.next()
    with pytest.raises(UnknownRequestError):
        await store.commit(Commit(lease, checkpoint=cp, answers={"q1": b"1", "zz": b"2"}))
    assert (await store.get_requests("r1"))[0].answer is None
    assert await store.get_checkpoint("r1", cp.meta.id) is None


async def test_reopen_clears_answers_so_requests_are_open_again(store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    head = chain.head.id
    rows = [request("r1", head, q, created=at(i)) for i, q in enumerate(("q1", "q2", "q3"))]
    await store.commit(Commit(lease, requests=rows))
    await store.commit(Commit(lease, answers={"q1": b"1", "q2": b"2"}))
    assert [r.id for r in await store.pending_requests()] == ["q3"]
    await store.commit(Commit(lease, reopen=["q1", "q3"]))  # q3 is open already: left open
    q1, q2, q3 = await store.get_requests("r1")
    assert (q1, q3) == (rows[0], rows[2])  # answer and answered_at back to None
    assert q2.answer == b"2" and q2.answered_at is not None
    assert [r.id for r in await store.get_requests("r1", open_only=True)] == ["q1", "q3"]
    assert [r.id for r in await store.pending_requests()] == ["q1", "q3"]
    assert [r.id for r in await store.pending_requests(workflow_name="wf")] == ["q1", "q3"]
    await store.commit(Commit(lease, answers={"q1": b"again"}))
    assert (await store.get_requests("r1"))[0].answer == b"again"
    assert [r.id for r in await store.pending_requests()] == ["q3"]


async def test_reopen_applies_after_answers_before_drop_and_inserts(
    store: CheckpointStore,
) -> None:
    chain, lease = await start_run(store, "r1")
    head = chain.head.id
    await store.commit(Commit(lease, requests=[
        request("r1", head, q, created=at(i)) for i, q in enumerate(("q1", "q2", "q3"))]))
    await store.commit(Commit(lease, answers={"q2": b"2", "q3": b"3"}))
    # Answered, then reopened, by one commit: open.
    await store.commit(Commit(lease, answers={"q1": b"1"}, reopen=["q1"]))
    assert [r.id for r in await store.get_requests("r1", open_only=True)] == ["q1"]
    # Reopened, then dropped with the other open requests (q1), then saved anew.
    await store.commit(Commit(lease, reopen=["q2"], drop_open_requests=True,
                              requests=[request("r1", head, "q2", created=at(9))]))
    rows = await store.get_requests("r1")
    assert [(r.id, r.answer, r.created_at) for r in rows] == [
        ("q3", b"3", at(2)), ("q2", None, at(9))]


async def test_reopen_of_a_request_the_same_commit_inserts_is_unknown(
    store: CheckpointStore,
) -> None:
    chain, lease = await start_run(store, "r1")
    with pytest.raises(UnknownRequestError) as err:
        await store.commit(Commit(lease, requests=[request("r1", chain.head.id, "q1")],
                                  reopen=["q1"]))
    assert (err.value.run_id, err.value.request_id) == ("r1", "q1")
    assert await store.get_requests("r1") == []


async def test_reopen_of_an_unknown_request_writes_nothing(store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    other, other_lease = await start_run(store, "r2")
    base = chain.head.id
    await store.commit(Commit(lease, requests=[request("r1", base, "q1"),
                                               request("r1", base, "q2")]))
    await store.commit(Commit(lease, answers={"q1": b"1"}))
    await store.commit(Commit(other_lease, requests=[request("r2", other.head.id, "theirs")]))
    run_before, requests_before = await store.get_run("r1"), await store.get_requests("r1")
    cp = chain.next(values={"x": 1})
    # Unknown: an id nobody made, another run's request, one this commit would insert.
    for bad, unknown in ((["q1", "zz"], "zz"), (["theirs"], "theirs"), (["q3", "q1"], "q3")):
        with pytest.raises(UnknownRequestError) as err:
            await store.commit(Commit(
                lease, checkpoint=cp, answers={"q2": b"2"}, reopen=bad, drop_open_requests=True,
                requests=[request("r1", base, "q3")], task_writes=[task_write("r1", base, "a")],
                mark=StatusMark(base, RunStatus.WAITING),
                run=RunUpdate(RunStatus.WAITING, head_checkpoint_id=cp.meta.id, release=True)))
        assert (err.value.run_id, err.value.request_id) == ("r1", unknown)
        assert await store.get_run("r1") == run_before
        assert await store.get_requests("r1") == requests_before
        assert await store.get_checkpoint("r1", cp.meta.id) is None
        assert await store.get_checkpoint("r1", base) == chain.metas[0]
        assert await store.get_task_writes("r1", base) == []
    assert [r.id for r in await store.get_requests("r2", open_only=True)] == ["theirs"]


async def test_reopen_under_a_lost_lease_writes_nothing(store: CheckpointStore) -> None:
    chain, stale = await start_run(store, "r1", ttl=-1)
    await store.commit(Commit(stale, requests=[request("r1", chain.head.id, "q1")]))
    await store.commit(Commit(stale, answers={"q1": b"1"}))
    await store.claim(Claim("r1", "new", 30))
    with pytest.raises(LeaseLostError):
        await store.commit(Commit(stale, reopen=["q1"]))
    assert (await store.get_requests("r1"))[0].answer == b"1"
    assert await store.pending_requests() == []


# -- leases ---------------------------------------------------------------------------------


async def test_lease_is_exclusive_while_live(store: CheckpointStore) -> None:
    await store.create_run(make_run("r1"), [], None)
    with pytest.raises(RunNotFoundError):
        await store.claim(Claim("nope", "a", 30))
    first = await store.claim(Claim("r1", "a", 30))
    assert (first.owner, first.epoch) == ("a", 1)
    assert first.expires_at > utcnow() + timedelta(seconds=25)
    with pytest.raises(RunLockedError) as locked:
        await store.claim(Claim("r1", "b", 30))
    assert locked.value.owner == "a" and 0 < locked.value.expires_in <= 30
    with pytest.raises(RunLockedError):  # not re-entrant, even for the same owner
        await store.claim(Claim("r1", "a", 30))
    await store.release_lease(first)
    again = await store.claim(Claim("r1", "a", 30))
    assert again.epoch == 2


async def test_expired_lease_is_taken_over_and_fences_the_old_holder(
    store: CheckpointStore,
) -> None:
    chain, stale = await start_run(store, "r1", ttl=-1)
    fresh = await store.claim(Claim("r1", "new", 30))
    assert fresh.epoch == stale.epoch + 1
    before = await store.get_run("r1")
    base = chain.head.id
    cp = chain.next(values={"x": 1})
    with pytest.raises(LeaseLostError):
        await store.commit(Commit(
            stale, checkpoint=cp, requests=[request("r1", base, "q1")],
            task_writes=[task_write("r1", base, "a")],
            mark=StatusMark(base, RunStatus.FAILED),
            run=RunUpdate(RunStatus.COMPLETED, head_checkpoint_id=cp.meta.id)))
    with pytest.raises(LeaseLostError):
        await store.put_task_writes(stale, [task_write("r1", base, "a")])
    with pytest.raises(LeaseLostError):
        await store.put_step(stale, step("r1", base, "a", "s", b"1"))
    with pytest.raises(LeaseLostError):
        await store.renew_lease(stale, 30)
    assert await store.get_run("r1") == before
    assert await store.get_checkpoint("r1", cp.meta.id) is None
    assert (await store.get_checkpoint("r1", base)) == chain.metas[0]
    assert await store.get_requests("r1") == []
    assert await store.get_task_writes("r1", base) == []
    assert await store.get_steps("r1", base, "a") == {}
    await store.commit(Commit(fresh, checkpoint=cp))
    assert await store.thread_head("r1", "") == cp.meta


async def test_writes_under_a_lease_of_an_unknown_run(store: CheckpointStore) -> None:
    lease = Lease("ghost", "a", 1, at(60))
    with pytest.raises(RunNotFoundError):
        await store.commit(Commit(lease))
    with pytest.raises(RunNotFoundError):
        await store.put_step(lease, step("ghost", "c", "a", "s", b"1"))


async def test_renew_and_release(store: CheckpointStore) -> None:
    _, lease = await start_run(store, "r1")
    renewed = await store.renew_lease(lease, 120)
    assert renewed.epoch == lease.epoch and renewed.expires_at > lease.expires_at
    run = await store.get_run("r1")
    assert run is not None and run.lease_expires_at == renewed.expires_at
    await store.release_lease(dataclasses.replace(lease, owner="someone else"))
    assert (await store.get_run("r1")).lease_owner == "owner-1"  # type: ignore[union-attr]
    await store.release_lease(renewed)
    run = await store.get_run("r1")
    assert run is not None and (run.lease_owner, run.lease_expires_at) == (None, None)
    taken = await store.claim(Claim("r1", "b", 30))
    assert taken.epoch == lease.epoch + 1


async def test_cancel_fences_the_holder_and_closes_requests(store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    head = chain.head.id
    await store.commit(Commit(lease, requests=[request("r1", head, "q1"), request("r1", head, "q2")]))
    await store.commit(Commit(lease, answers={"q1": b"1"}))
    cancelled = await store.cancel_run("r1")
    assert cancelled.status is RunStatus.CANCELLED
    assert cancelled.lease_epoch == lease.epoch + 1 and cancelled.lease_owner is None
    assert await store.get_run("r1") == cancelled
    assert [r.id for r in await store.get_requests("r1")] == ["q1"]
    with pytest.raises(LeaseLostError):
        await store.commit(Commit(lease, checkpoint=chain.next()))
    with pytest.raises(RunNotFoundError):
        await store.cancel_run("nope")


# -- prune -----------------------------------------------------------------------------------


async def _long_run(store: CheckpointStore, run_id: str, n: int) -> tuple[Chain, Lease]:
    """A run whose value ``first`` is written once and referenced by every checkpoint."""
    chain, lease = await start_run(store, run_id, first={"first": "kept", "count": 0})
    for i in range(1, n):
        cp = chain.next(values={"count": i}, appends={"log": [i]}, created=at(i))
        await store.commit(Commit(lease, checkpoint=cp))
    return chain, lease


async def _assert_loads_exactly(store: CheckpointStore, chain: Chain) -> None:
    kept = {m.id for m in await store.list_checkpoints(chain.run_id, thread=chain.thread)}
    for meta in chain.metas:
        if meta.id in kept:
            loaded = await store.load_checkpoint(chain.run_id, meta.id)
            assert state_of(loaded) == chain.expected[meta.id]


async def test_prune_keep_last_keeps_heads_and_referenced_values(store: CheckpointStore) -> None:
    chain, _ = await _long_run(store, "r1", 10)
    assert await store.prune(keep_last=3) == 7
    remaining = await store.list_checkpoints("r1")
    assert [m.id for m in remaining] == [m.id for m in chain.metas[-3:]][::-1]
    await _assert_loads_exactly(store, chain)
    assert await store.prune(keep_last=3) == 0


async def test_prune_by_age_and_by_run(store: CheckpointStore) -> None:
    c1, _ = await _long_run(store, "r1", 6)
    c2, _ = await _long_run(store, "r2", 6)
    assert await store.prune(run_id="r1", older_than=at(3)) == 3
    assert [m.seq for m in await store.list_checkpoints("r1")] == [5, 4, 3]
    assert len(await store.list_checkpoints("r2")) == 6
    assert await store.prune(older_than=at(100)) == 2 + 5  # both runs down to their heads
    assert await store.list_checkpoints("r1") == [c1.head]
    assert await store.list_checkpoints("r2") == [c2.head]
    await _assert_loads_exactly(store, c1)
    await _assert_loads_exactly(store, c2)


async def test_prune_spares_what_the_run_still_needs(store: CheckpointStore) -> None:
    chain, lease = await _long_run(store, "r1", 4)
    waiting, answered, anchored = chain.metas[0], chain.metas[1], chain.metas[2]
    await store.commit(Commit(lease, requests=[request("r1", waiting.id, "open"),
                                               request("r1", answered.id, "done")]))
    await store.commit(Commit(lease, answers={"done": b"1"}))
    await store.put_step(lease, step("r1", answered.id, "a", "s", b"1"))
    sub = chain.sub("review/x", at_index=2)  # node ids may hold "/" too
    await store.commit(Commit(lease, checkpoint=sub.next(values={"inner": 1})))
    for _ in range(2):
        await store.commit(Commit(lease, checkpoint=chain.next(values={"count": 99})))
    merged = chain.metas[4]  # task writes of a superstep since merged protect nothing
    await store.put_task_writes(lease, [task_write("r1", merged.id, "a")])
    await store.put_task_writes(lease, [task_write("r1", chain.head.id, "b")])
    assert await store.prune() == 3  # `answered`, metas[3] and `merged`
    kept = {m.id for m in await store.list_checkpoints("r1")}
    assert kept == {waiting.id, anchored.id, chain.head.id, sub.head.id}
    assert await store.get_requests("r1") == [request("r1", waiting.id, "open")]
    assert await store.get_steps("r1", answered.id, "a") == {}
    assert await store.get_task_writes("r1", merged.id) == []
    assert await store.get_task_writes("r1", chain.head.id) == [
        task_write("r1", chain.head.id, "b")]
    await _assert_loads_exactly(store, chain)
    await _assert_loads_exactly(store, sub)


async def test_prune_drops_task_writes_of_merged_supersteps(store: CheckpointStore) -> None:
    """A fan-out loop whose siblings finish at different times: task writes on every base."""
    chain, lease = await start_run(store, "r1", first={"first": "kept", "count": 0})
    n = 12
    for i in range(1, n):
        base = chain.head.id
        # The fast siblings save their writes (and steps) as each finishes ...
        await store.put_task_writes(lease, [task_write("r1", base, f"fast{k}")
                                            for k in range(i % 3 + 1)])
        await store.put_step(lease, step("r1", base, "slow", "call", b"1"))
        if i % 2:  # ... a slow one waits for input once: the superstep pauses ...
            await store.commit(Commit(lease, mark=StatusMark(base, RunStatus.WAITING),
                                      task_writes=[task_write("r1", base, "fast9")]))
        # ... and the last to finish merges the superstep into the next checkpoint.
        cp = chain.next(values={"count": i}, appends={"log": [i]}, created=at(i))
        await store.commit(Commit(lease, checkpoint=cp))
    head = chain.head.id
    await store.put_task_writes(lease, [task_write("r1", head, "fast0")])  # in flight
    await store.put_step(lease, step("r1", head, "slow", "call", b"2"))
    assert await store.prune(keep_last=3) == n - 3
    kept = await store.list_checkpoints("r1")
    assert [m.id for m in kept] == [m.id for m in chain.metas[-3:]][::-1]
    for meta in chain.metas[:-3]:
        assert await store.get_task_writes("r1", meta.id) == []
        assert await store.get_steps("r1", meta.id, "slow") == {}
    for meta in chain.metas[-3:-1]:  # kept by keep_last: their rows stay with them
        assert await store.get_task_writes("r1", meta.id) != []
    assert await store.get_task_writes("r1", head) == [task_write("r1", head, "fast0")]
    assert await store.get_steps("r1", head, "slow") == {"call": b"2"}
    await _assert_loads_exactly(store, chain)
    assert await store.prune() == 2
    assert await store.list_checkpoints("r1") == [chain.head]
    assert await store.get_task_writes("r1", head) == [task_write("r1", head, "fast0")]
    await _assert_loads_exactly(store, chain)


async def _invoke(store: CheckpointStore, lease: Lease, top: Chain, node: str,
                  status: RunStatus, i: int) -> Chain:
    """Run a sub-workflow anchored on the parent's head to ``status`` (two checkpoints)."""
    sub = top.sub(node)
    await store.commit(Commit(lease, checkpoint=sub.next(values={"in": i}, appends={"log": [i]},
                                                         source="input")))
    await store.commit(Commit(lease, checkpoint=sub.next(values={"out": i}, appends={"log": [-i]},
                                                         status=status)))
    return sub


async def _assert_gone(store: CheckpointStore, chain: Chain) -> None:
    assert await store.list_checkpoints(chain.run_id, thread=chain.thread) == []
    assert await store.thread_head(chain.run_id, chain.thread) is None
    for meta in chain.metas:
        with pytest.raises(CheckpointNotFoundError):
            await store.load_checkpoint(chain.run_id, meta.id)


async def test_prune_drops_finished_sub_workflows_with_their_anchors(
    store: CheckpointStore,
) -> None:
    top, lease = await start_run(store, "r1", first={"first": "kept", "i": 0})
    subs = []
    for i in range(1, 6):
        subs.append(await _invoke(store, lease, top, "child", RunStatus.COMPLETED, i))
        await store.commit(Commit(lease, checkpoint=top.next(values={"i": i},
                                                             appends={"log": [i]})))
    # A sub-workflow whose head was marked completed afterwards counts as finished too.
    late = await _invoke(store, lease, top, "late", RunStatus.RUNNING, 6)
    await store.commit(Commit(lease, mark=StatusMark(late.head.id, RunStatus.COMPLETED)))
    await store.commit(Commit(lease, checkpoint=top.next(values={"i": 6})))
    assert len(top.metas) == 7
    # Every anchor (top.metas[0:6]) goes, and with it its whole sub-thread, head included.
    assert await store.prune(keep_last=1) == 6 + 6 * 2
    assert await store.list_checkpoints("r1") == [top.head]
    for sub in [*subs, late]:
        await _assert_gone(store, sub)
    await _assert_loads_exactly(store, top)
    assert await store.prune(keep_last=1) == 0


async def test_prune_keeps_a_finished_sub_workflow_while_its_anchor_stays(
    store: CheckpointStore,
) -> None:
    """keep_last applies inside the sub-thread; its head stays as long as its anchor."""
    top, lease = await start_run(store, "r1", first={"i": 0})
    sub = await _invoke(store, lease, top, "child", RunStatus.RUNNING, 1)
    for k in (2, 3):
        status = RunStatus.COMPLETED if k == 3 else RunStatus.RUNNING
        await store.commit(Commit(lease, checkpoint=sub.next(values={"k": k}, status=status)))
    for i in range(1, 3):
        await store.commit(Commit(lease, checkpoint=top.next(values={"i": i})))
    assert await store.prune(keep_last=3) == 1  # the sub-thread's first checkpoint
    assert await store.list_checkpoints("r1", thread=sub.thread) == sub.metas[:0:-1]
    assert await store.get_checkpoint("r1", top.metas[0].id) is not None
    await _assert_loads_exactly(store, sub)
    assert await store.prune(keep_last=2) == 1 + 3  # the anchor, then what hangs from it
    await _assert_gone(store, sub)


async def test_prune_keeps_every_anchor_above_an_unfinished_sub_workflow(
    store: CheckpointStore,
) -> None:
    top, lease = await start_run(store, "r1", first={"first": "kept", "i": 0})
    subs: dict[RunStatus, Chain] = {}
    for i, status in enumerate(RunStatus, start=1):
        subs[status] = await _invoke(store, lease, top, "child", status, i)
        await store.commit(Commit(lease, checkpoint=top.next(values={"i": i})))
    # A completed sub-workflow whose first checkpoint anchors a nested one still running:
    # the nested one keeps its anchor, and that anchor keeps its own anchor in turn.
    outer = top.sub("outer")
    await store.commit(Commit(lease, checkpoint=outer.next(values={"o": 0}, source="input")))
    inner = outer.sub("inner")
    await store.commit(Commit(lease, checkpoint=inner.next(values={"in": 0}, source="input")))
    await store.commit(Commit(lease, checkpoint=outer.next(values={"o": 1},
                                                           status=RunStatus.COMPLETED)))
    await store.commit(Commit(lease, checkpoint=top.next(values={"i": 99})))
    # Also in flight: a sub-workflow anchored on the parent's head (paused on input).
    current = await _invoke(store, lease, top, "child", RunStatus.WAITING, 100)

    # The completed child's anchor and its two checkpoints; the first checkpoint of
    # each of the other children and of `current`.
    assert await store.prune(keep_last=1) == 1 + 2 + (len(RunStatus) - 1) + 1
    unfinished = [s for status, s in subs.items() if status is not RunStatus.COMPLETED]
    anchors = {s.thread.partition("/")[0] for s in [*unfinished, outer]}
    assert {m.id for m in await store.list_checkpoints("r1", namespace="")} == anchors | {
        top.head.id}
    assert {m.id for m in await store.list_checkpoints("r1", thread=outer.thread)} == {
        m.id for m in outer.metas}
    await _assert_gone(store, subs[RunStatus.COMPLETED])
    for chain in [top, outer, inner, current, *unfinished]:
        await _assert_loads_exactly(store, chain)

    # Once a paused sub-workflow completes, its anchor may go, and the sub-workflow with it.
    waiting = subs[RunStatus.WAITING]
    await store.commit(Commit(lease, mark=StatusMark(waiting.head.id, RunStatus.COMPLETED)))
    assert await store.prune(keep_last=1) == 2
    assert await store.get_checkpoint("r1", waiting.thread.partition("/")[0]) is None
    await _assert_gone(store, waiting)
    await _assert_loads_exactly(store, top)


async def test_prune_keeps_the_anchors_of_an_open_request_at_any_depth(
    store: CheckpointStore,
) -> None:
    """A request still open inside a finished-looking sub-workflow keeps it reachable."""
    top, lease = await start_run(store, "r1", first={"i": 0})
    outer = await _invoke(store, lease, top, "outer", RunStatus.COMPLETED, 1)
    inner = outer.sub("inner", at_index=0)
    await store.commit(Commit(lease, checkpoint=inner.next(values={"v": 1}, source="input")))
    await store.commit(Commit(lease, checkpoint=inner.next(values={"v": 2},
                                                           status=RunStatus.COMPLETED)))
    await store.commit(Commit(lease, requests=[request("r1", inner.metas[0].id, "q")]))
    await store.commit(Commit(lease, checkpoint=top.next(values={"i": 1})))
    assert await store.prune(keep_last=1) == 0
    for chain in (top, outer, inner):
        assert len(await store.list_checkpoints("r1", thread=chain.thread)) == len(chain.metas)
    await store.commit(Commit(lease, answers={"q": b"1"}))
    assert await store.prune(keep_last=1) == 1 + 2 + 2
    assert await store.list_checkpoints("r1") == [top.head]


async def test_prune_removes_sub_workflows_whose_anchor_is_already_gone(
    store: CheckpointStore,
) -> None:
    """What older versions left behind: nothing can reach it any more."""
    top = Chain("r1")
    orphan = Chain("r1", thread="ck-gone/child", namespace="child")
    await store.create_run(make_run("r1"), [
        top.next(values={"i": 0}), orphan.next(values={"v": 0}),
        orphan.next(values={"v": 1}, status=RunStatus.COMPLETED)], None)
    assert await store.prune(keep_last=5) == 2  # however recent
    await _assert_gone(store, orphan)
    assert await store.list_checkpoints("r1") == [top.head]


async def test_prune_keeps_values_older_checkpoints_wrote(store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1", first={"big": "x" * 100, "n": 0})
    for i in range(1, 5):
        await store.commit(Commit(lease, checkpoint=chain.next(values={"n": i})))
    assert await store.prune() == 4
    loaded = await store.load_checkpoint("r1", chain.head.id)
    assert state_of(loaded) == chain.expected[chain.head.id]
    assert loaded.values["big"] == b'"' + b"x" * 100 + b'"'


async def test_a_checkpoint_whose_value_is_missing_is_corrupted(store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    cp = chain.next(values={"x": 1})
    meta = dataclasses.replace(cp.meta, value_versions={**cp.meta.value_versions, "ghost": 0})
    await store.commit(Commit(lease, checkpoint=dataclasses.replace(cp, meta=meta)))
    with pytest.raises(CheckpointCorruptedError, match="ghost"):
        await store.load_checkpoint("r1", meta.id)
    assert state_of(await store.load_checkpoint("r1", chain.metas[0].id)) == chain.expected[
        chain.metas[0].id]


_channel_writes = st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(-(2**63), 2**63 - 1),
                                 max_size=2)
_log_appends = st.dictionaries(st.sampled_from(["log", "history:n"]),
                               st.lists(st.text(max_size=3), max_size=3), max_size=2)


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(_channel_writes, _log_appends), min_size=1, max_size=8))
async def test_any_chain_loads_back_exactly(store: CheckpointStore, steps: list[Any]) -> None:
    run_id = new_id("run")
    chain, lease = await start_run(store, run_id)
    for values, appends in steps:
        await store.commit(Commit(lease, checkpoint=chain.next(values=values, appends=appends)))
    for meta in chain.metas:
        assert state_of(await store.load_checkpoint(run_id, meta.id)) == chain.expected[meta.id]


_sub_specs = st.lists(st.tuples(st.integers(1, 3), st.sampled_from([*RunStatus, RunStatus.COMPLETED]),
                                st.booleans()), max_size=2)
_rounds = st.lists(st.tuples(_sub_specs, st.sets(st.sampled_from(["task", "ask", "answer",
                                                                 "reopen"])),
                             st.integers(0, 99)), min_size=1, max_size=8)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rounds=_rounds, keep_last=st.one_of(st.none(), st.integers(1, 3)),
       age=st.one_of(st.none(), st.none(), st.integers(0, 10)))
async def test_prune_follows_the_documented_rules(
    store: CheckpointStore, rounds: list[Any], keep_last: int | None, age: int | None,
) -> None:
    """Whatever a run did, prune removes exactly what ``CheckpointStore.prune`` says.

    Each round invokes sub-workflows (on the parent's head, or nested on a checkpoint
    of an earlier one) that end in any status, saves task writes and steps, asks,
    answers and reopens requests, then advances the parent.
    """
    run_id = new_id("run")
    top, lease = await start_run(store, run_id, first={"first": 0})
    chains: list[Chain] = [top]
    subs: list[Chain] = []
    requests: dict[str, tuple[str, bool]] = {}  # id -> (checkpoint id, open)
    for i, (specs, extras, pick) in enumerate(rounds, start=1):
        for n_steps, status, nested in specs:
            node = f"node{len(subs)}"
            if nested and subs:
                parent = subs[pick % len(subs)]
                sub = parent.sub(node, at_index=pick % len(parent.metas))
            else:
                sub = top.sub(node)
            subs.append(sub)
            chains.append(sub)
            for k in range(n_steps):
                cp = sub.next(values={"v": k}, appends={"log": [k]} if k % 2 else {},
                              status=status if k == n_steps - 1 else RunStatus.RUNNING,
                              created=at(i + k))
                await store.commit(Commit(lease, checkpoint=cp))
        metas = [m for c in chains for m in c.metas]
        target = metas[pick % len(metas)]
        if "task" in extras:
            await store.put_task_writes(lease, [task_write(run_id, target.id, "t")])
            await store.put_step(lease, step(run_id, target.id, "t", "s", b"1"))
        if "ask" in extras:
            rid = new_id("q")
            await store.commit(Commit(lease, requests=[request(run_id, target.id, rid)]))
            requests[rid] = (target.id, True)
        for action in ("answer", "reopen"):
            if action in extras and requests:
                rid = sorted(requests)[pick % len(requests)]
                if action == "answer":
                    await store.commit(Commit(lease, answers={rid: b"1"}))
                else:
                    await store.commit(Commit(lease, reopen=[rid]))
                requests[rid] = (requests[rid][0], action == "reopen")
        cp = top.next(values={"n": i} if pick % 2 else {}, appends={"log": [i]}, created=at(i))
        await store.commit(Commit(lease, checkpoint=cp))

    # The rules, straight from the docstring.
    thread_of = {m.id: c.thread for c in chains for m in c.metas}
    needed = {top.head.id} | {cid for cid, is_open in requests.values() if is_open}
    needed |= {c.head.id for c in subs if c.head.status != RunStatus.COMPLETED}
    above = list(needed)
    while above:  # ... and every anchor above a needed checkpoint
        if thread := thread_of[above.pop()]:
            anchor = thread.partition("/")[0]
            if anchor not in needed:
                needed.add(anchor)
                above.append(anchor)
    cutoff = None if age is None else at(age)
    doomed = {m.id for c in chains for m in (c.metas[:-keep_last] if keep_last else c.metas[:-1])
              if m.id not in needed and (cutoff is None or m.created_at < cutoff)}
    for c in subs:  # in creation order: a sub-thread's anchor is decided before it
        if c.thread.partition("/")[0] in doomed:
            doomed |= {m.id for m in c.metas} - needed
    event(f"anchors pruned: {bool(doomed & {c.thread.partition('/')[0] for c in subs})}")
    event(f"sub-workflows removed whole: {any(c.head.id in doomed for c in subs)}")
    with_writes = [c for c in doomed if await store.get_task_writes(run_id, c)]
    event(f"task writes pruned: {bool(with_writes)}")
    assert await store.prune(run_id=run_id, keep_last=keep_last, older_than=cutoff) == len(doomed)
    kept = {m.id for m in await store.list_checkpoints(run_id)}
    assert kept == {m.id for c in chains for m in c.metas} - doomed
    for chain in chains:
        await _assert_loads_exactly(store, chain)
    for cid in doomed:
        assert await store.get_task_writes(run_id, cid) == []
        assert await store.get_steps(run_id, cid, "t") == {}
        assert await store.get_requests(run_id, checkpoint_id=cid) == []
    assert {r.id for r in await store.get_requests(run_id)} == {
        rid for rid, (cid, _) in requests.items() if cid not in doomed}
    assert {r.id for r in await store.get_requests(run_id, open_only=True)} == {
        rid for rid, (_, is_open) in requests.items() if is_open}
