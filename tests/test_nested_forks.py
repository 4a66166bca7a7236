"""A checkpoint id stands for the whole run, nested state included: forks and prune."""

from __future__ import annotations

import collections
import sqlite3
from pathlib import Path
from typing import Annotated, Any

import pytest

from durable_flow import (
    END,
    Blackboard,
    CheckpointNotFoundError,
    Command,
    NodeContext,
    PendingRequest,
    RunResult,
    RunStatus,
    Runtime,
    Send,
    SqliteStore,
    Workflow,
    WorkflowBuilder,
    append,
)
from durable_flow.model._clock import utcnow
from durable_flow.model._records import CheckpointInfo
from durable_flow.store._protocols import CheckpointMeta, CheckpointWrite, RunRecord

Calls = collections.Counter[str]


class Board(Blackboard):
    topic: str = ""
    side: str = ""
    log: Annotated[list[str], append] = []


def asking(name: str, calls: Calls) -> Any:
    async def node(state: Board, ctx: NodeContext) -> dict[str, Any]:
        calls[name] += 1
        answer = await ctx.request({"q": name, "topic": state.topic}, response_type=str)
        return {"log": [f"{name}:{answer}"]}
    return node


def leaf_workflow(calls: Calls) -> Workflow:
    """check -> first (asks) -> second (asks), third (asks) and quick -> done."""
    b = WorkflowBuilder("leaf", state=Board)

    def check(state: Board) -> dict[str, Any]:
        calls["check"] += 1
        return {"log": [f"check {state.topic}"]}

    def quick(state: Board) -> dict[str, Any]:
        calls["quick"] += 1
        return {"log": ["quick"]}

    def done(state: Board) -> dict[str, Any]:
        calls["done"] += 1
        return {"log": ["done"]}

    b.add_node("check", check).add_node("quick", quick).add_node("done", done)
    for name in ("first", "second", "third"):
        b.add_node(name, asking(name, calls))
    b.set_entry("check").add_edge("check", "first")
    for name in ("second", "third", "quick"):
        b.add_edge("first", name)
    b.add_fan_in(["second", "third", "quick"], "done")
    b.add_edge("done", END)
    return b.build()


def middle_workflow(calls: Calls) -> Workflow:
    """prepare -> legal (the leaf)."""
    b = WorkflowBuilder("middle", state=Board)

    def prepare(state: Board) -> dict[str, Any]:
        calls["prepare"] += 1
        return {"log": ["prepare"]}

    b.add_node("prepare", prepare)
    b.add_subworkflow("legal", leaf_workflow(calls), inputs=["topic"], outputs=["log"])
    b.set_entry("prepare").add_edge("prepare", "legal").add_edge("legal", END)
    return b.build()


def top_workflow(calls: Calls, levels: int) -> Workflow:
    """start -> review (nested ``levels - 1`` deep) and side (a step, then asks) -> finish."""
    b = WorkflowBuilder("top", state=Board)

    def start(state: Board) -> dict[str, Any]:
        calls["start"] += 1
        return {"log": ["start"]}

    def fetch() -> str:
        calls["fetch"] += 1
        return "data"

    async def side(state: Board, ctx: NodeContext) -> dict[str, Any]:
        calls["side"] += 1
        data = await ctx.step("fetch", fetch)
        answer = await ctx.request({"q": "side"}, response_type=str)
        return {"side": f"{data}:{answer}"}

    def finish(state: Board) -> dict[str, Any]:
        calls["finish"] += 1
        return {"log": ["finish"]}

    inner = leaf_workflow(calls) if levels == 2 else middle_workflow(calls)
    b.add_node("start", start).add_node("side", side).add_node("finish", finish)
    b.add_subworkflow("review", inner, inputs=["topic"], outputs=["log"])
    b.set_entry("start").add_edge("start", "review").add_edge("start", "side")
    b.add_fan_in(["review", "side"], "finish")
    b.add_edge("finish", END)
    return b.build()


def by_question(requests: tuple[PendingRequest, ...] | list[PendingRequest]) -> dict[str, str]:
    """Request ids keyed by the question each asks."""
    return {r.payload["q"]: r.id for r in requests}


def comparable(requests: tuple[PendingRequest, ...]) -> list[tuple[str, str, Any]]:
    return sorted((r.id, r.node, r.payload) for r in requests)


async def answer(rt: Runtime, wf: Workflow, result: RunResult, *questions: str) -> RunResult:
    ids = by_question(result.pending_requests)
    return await rt.resume(wf, result.run_id, responses={ids[q]: f"{q}!" for q in questions})


async def everything(rt: Runtime, run_id: str) -> Any:
    """All a reader can see of a run, to check that forking leaves it alone."""
    histories = {ns: await rt.history(run_id, namespace=ns)
                 for ns in ("", "review", "review.legal")}
    snapshots = {cp.id: await rt.get_state(run_id, cp.id) for cp in histories[""]}
    return histories, snapshots, await rt.get_state(run_id)


def paused_path(levels: int) -> list[str]:
    return ["review"] if levels == 2 else ["review", "legal"]


@pytest.mark.parametrize("levels", [2, 3])
async def test_fork_of_the_reported_id_resumes_inside_the_paused_sub_workflow(
    rt: Runtime, levels: int,
) -> None:
    calls: Calls = collections.Counter()
    wf = top_workflow(calls, levels)
    paused = await answer(rt, wf, await rt.run(wf, {"topic": "tides"}), "first")
    assert sorted(by_question(paused.pending_requests)) == ["second", "side", "third"]
    paused = await answer(rt, wf, paused, "second")  # recorded; `second` runs later
    assert paused.status is RunStatus.WAITING
    assert sorted(by_question(paused.pending_requests)) == ["side", "third"]
    # Each resume moved the paused superstep to a new top-level checkpoint (same
    # superstep, nothing ran): the reported id is the newest of them.
    top = await rt.history(paused.run_id)
    assert paused.checkpoint_id == top[0].id
    assert [(c.nodes, c.superstep) for c in top[:3]] == [((), 1), ((), 1), (("start",), 1)]
    # get_state of that id shows the sub-workflow exactly where it paused.
    snap = await rt.get_state(paused.run_id, paused.checkpoint_id)
    inner = snap
    for node in paused_path(levels):
        inner = inner.subworkflows[node]
    assert inner.next_tasks == ("quick", "second", "third")
    assert [r.payload["q"] for r in inner.pending_requests] == ["third"]
    assert comparable(snap.pending_requests) == comparable(paused.pending_requests)
    original = await everything(rt, paused.run_id)
    counts = dict(calls)

    forked = await rt.fork(wf, paused.run_id, paused.checkpoint_id)

    assert forked.status is RunStatus.WAITING, forked.error
    assert comparable(forked.pending_requests) == comparable(paused.pending_requests)
    assert {r.run_id for r in forked.pending_requests} == {forked.run_id}
    assert dict(calls) == counts  # nothing ran again: every task is still blocked
    fork_snap = await rt.get_state(forked.run_id)
    fork_inner = fork_snap
    for node in paused_path(levels):
        fork_inner = fork_inner.subworkflows[node]
    assert fork_inner.values == inner.values and fork_inner.next_tasks == inner.next_tasks
    assert fork_inner.status is RunStatus.WAITING
    assert await everything(rt, paused.run_id) == original

    done_fork = await answer(rt, wf, forked, "third", "side")
    after_fork = collections.Counter(calls)
    done_original = await answer(rt, wf, paused, "third", "side")
    assert done_fork.status is done_original.status is RunStatus.COMPLETED
    assert done_fork.state == done_original.state
    assert done_fork.state.side == "data:side!"
    assert {"first:first!", "second:second!", "quick"} <= set(done_fork.state.log)
    # Finished inner nodes (check, first, quick) and the recorded step (fetch) are
    # reused; `second` runs once more, as in the original, and gets its recorded
    # answer instead of asking again.
    forked_ran = after_fork - collections.Counter(counts)
    assert forked_ran == calls - after_fork == collections.Counter(
        second=1, third=1, side=1, done=1, finish=1)


async def test_fork_of_a_paused_inner_head_keeps_the_parents_paused_siblings(
    rt: Runtime,
) -> None:
    """The anchors above a forked inner checkpoint bring their superstep in progress too."""
    calls: Calls = collections.Counter()
    wf = top_workflow(calls, 3)
    paused = await answer(rt, wf, await rt.run(wf, {"topic": "tides"}), "first")
    paused = await answer(rt, wf, paused, "second")
    inner_head = (await rt.history(paused.run_id, namespace="review.legal"))[0]
    counts = dict(calls)
    forked = await rt.fork(wf, paused.run_id, inner_head.id)
    assert comparable(forked.pending_requests) == comparable(paused.pending_requests)
    assert dict(calls) == counts
    # An update on the inner head runs its superstep afresh; the parent's side still waits.
    edited = await rt.fork(wf, paused.run_id, inner_head.id, update={"topic": "moon"})
    asked = {r.payload["q"]: r.payload.get("topic") for r in edited.pending_requests}
    assert asked == {"second": "moon", "third": "moon", "side": None}
    assert collections.Counter(calls) - collections.Counter(counts) == collections.Counter(
        second=1, third=1, quick=1)


async def test_fork_of_an_older_top_level_checkpoint_runs_its_superstep_again(
    rt: Runtime,
) -> None:
    """Once its superstep merged, a checkpoint forks as the state it holds (time travel)."""
    calls: Calls = collections.Counter()
    wf = top_workflow(calls, 3)
    result = await rt.run(wf, {"topic": "tides"})
    for questions in (("first",), ("second", "third"), ("side",)):
        result = await answer(rt, wf, result, *questions)
    assert result.status is RunStatus.COMPLETED
    base = next(cp for cp in await rt.history(result.run_id) if cp.nodes == ("start",))
    counts = dict(calls)
    forked = await rt.fork(wf, result.run_id, base.id, update={"topic": "moon"})
    assert sorted(by_question(forked.pending_requests)) == ["first", "side"]
    assert {r.payload.get("topic") for r in forked.pending_requests} == {"moon", None}
    ran = {k: calls[k] - counts.get(k, 0) for k in calls}
    assert {k: n for k, n in ran.items() if n} == {
        "prepare": 1, "check": 1, "first": 1, "side": 1, "fetch": 1}


async def test_fork_from_a_top_level_head_reuses_finished_siblings(rt: Runtime) -> None:
    """A sub-workflow that finished while its sibling waits is not run again by a fork."""
    calls: Calls = collections.Counter()
    wf = top_workflow(calls, 3)
    result = await rt.run(wf, {"topic": "tides"})
    for questions in (("first",), ("second", "third")):
        result = await answer(rt, wf, result, *questions)
    assert list(by_question(result.pending_requests)) == ["side"]
    counts = dict(calls)
    forked = await rt.fork(wf, result.run_id, result.checkpoint_id)
    assert comparable(forked.pending_requests) == comparable(result.pending_requests)
    done = await answer(rt, wf, forked, "side")
    assert done.status is RunStatus.COMPLETED
    assert done.state == (await answer(rt, wf, result, "side")).state
    ran = {k: calls[k] - counts.get(k, 0) for k in calls}
    assert {k: n for k, n in ran.items() if n} == {"side": 2, "finish": 2}


# -- prune, then fork whatever is left ---------------------------------------------------


async def fork_everything(rt: Runtime, wf: Workflow, run_id: str) -> list[CheckpointInfo]:
    """Fork every checkpoint of every namespace; each fork must run."""
    seen = []
    for ns in ("", "review", "review.legal"):
        for cp in await rt.history(run_id, namespace=ns):
            forked = await rt.fork(wf, run_id, cp.id)
            assert forked.error is None and forked.status in (
                RunStatus.WAITING, RunStatus.COMPLETED), (ns, cp)
            seen.append(cp)
    return seen


@pytest.mark.parametrize("rounds", [
    [], [("first",)], [("first",), ("second", "third")],
    [("first",), ("second", "third"), ("side",)],
])
async def test_every_checkpoint_left_by_prune_can_be_forked(
    rt: Runtime, rounds: list[tuple[str, ...]],
) -> None:
    calls: Calls = collections.Counter()
    wf = top_workflow(calls, 3)
    result = await rt.run(wf, {"topic": "tides"})
    for questions in rounds:
        result = await answer(rt, wf, result, *questions)
    assert await rt.prune(result.run_id, keep_last=1) > 0
    kept = await fork_everything(rt, wf, result.run_id)
    assert result.checkpoint_id in {cp.id for cp in kept}
    # What a paused run needs survives: it still finishes.
    for questions in [("first",), ("second", "third"), ("side",)][len(rounds):]:
        result = await answer(rt, wf, result, *questions)
    assert result.status is RunStatus.COMPLETED


class Loop(Blackboard):
    n: int = 0
    log: Annotated[list[str], append] = []


def loop_workflow() -> Workflow:
    """review (a one-node sub-workflow) -> count, three times."""
    inner = WorkflowBuilder("work", state=Loop)
    inner.add_node("work", lambda s: {"log": ["work"]}).set_entry("work")
    inner.add_edge("work", END)
    b = WorkflowBuilder("loop", state=Loop)
    b.add_subworkflow("review", inner.build(), outputs=["log"])
    b.add_node("count", lambda s: {"n": s.n + 1})
    b.set_entry("review").add_edge("review", "count")
    b.add_switch("count", [("n < 3", "review")], default=END)
    return b.build()


async def test_prune_removes_finished_sub_workflows_row_and_all(tmp_path: Path) -> None:
    """Storage stays bounded: nothing of a pruned anchor's sub-workflow is left behind."""
    db = tmp_path / "runs.db"
    async with Runtime(SqliteStore(db)) as rt:
        wf = loop_workflow()
        done = await rt.run(wf, {})
        assert done.state.log == ["work"] * 3
        assert len(await rt.history(done.run_id, namespace="review")) == 3 * 2
        assert await rt.prune(done.run_id, keep_last=1) > 0
        assert await rt.history(done.run_id, namespace="review") == []
        assert [cp.id for cp in await rt.history(done.run_id)] == [done.checkpoint_id]
        assert (await rt.get_state(done.run_id)).values["log"] == ["work"] * 3
    with sqlite3.connect(db) as conn:
        for query in ("SELECT count(*) FROM checkpoints WHERE thread != ''",
                      "SELECT count(*) FROM log_chunks WHERE thread != ''",
                      "SELECT count(*) FROM channel_values WHERE thread != ''"):
            assert conn.execute(query).fetchall() == [(0,)], query


async def test_a_sub_workflow_left_without_its_anchor_fails_naming_the_given_id(
    rt: Runtime,
) -> None:
    """Data pruned by older versions: the error names the id the caller passed."""
    calls: Calls = collections.Counter()
    wf = top_workflow(calls, 2)
    now = utcnow()
    top = CheckpointMeta(id="cp-top", run_id="orphans", thread="", namespace="",
                         parent_id=None, seq=0, superstep=0, created_at=now,
                         status=RunStatus.COMPLETED, source="input")
    orphan = CheckpointMeta(id="cp-orphan", run_id="orphans", thread="cp-gone/review",
                            namespace="review", parent_id=None, seq=0, superstep=0,
                            created_at=now, status=RunStatus.COMPLETED, source="input")
    record = RunRecord(run_id="orphans", workflow_name=wf.name, status=RunStatus.COMPLETED,
                       created_at=now, updated_at=now, head_checkpoint_id="cp-top",
                       signature=wf.signature)
    await rt.store.create_run(record, [CheckpointWrite(top), CheckpointWrite(orphan)], None)
    with pytest.raises(CheckpointNotFoundError) as err:
        await rt.fork(wf, "orphans", "cp-orphan")
    assert (err.value.run_id, err.value.checkpoint_id) == ("orphans", "cp-orphan")


def nested_instances(asked: list[tuple[str, Any]]) -> Workflow:
    """outer: sub (inner: split sends two instances of ``work``, each asking about its arg)."""
    inner = WorkflowBuilder("inner", state=Board)
    inner.add_node("split", lambda s: Command(goto=[Send("work", f"doc{i}") for i in range(2)]),
                   goto=["work"])

    async def work(state: Board, ctx: NodeContext) -> dict[str, Any]:
        answer = await ctx.request({"approve": ctx.arg}, response_type=str)
        asked.append((ctx.node, ctx.arg))
        return {"log": [f"{ctx.arg}:{answer}"]}

    inner.add_node("work", work, arg_type=str)
    inner.set_entry("split")
    outer = WorkflowBuilder("outer", state=Board)
    outer.add_subworkflow("sub", inner.build(), inputs=["topic"], outputs={"log": "log"})
    outer.set_entry("sub").add_edge("sub", END)
    return outer.build()


@pytest.mark.parametrize("where", ["top", "nested"])
async def test_a_fork_of_a_checkpoint_of_instances_carries_them_and_their_args(
    rt: Runtime, where: str,
) -> None:
    asked: list[tuple[str, Any]] = []
    wf = nested_instances(asked)
    paused = await rt.run(wf, {"topic": "t"})
    [inner] = await rt.history(paused.run_id, namespace="sub", limit=1)
    forked = await rt.fork(wf, paused.run_id, paused.checkpoint_id if where == "top" else inner.id)
    assert [q.node for q in forked.pending_requests] == ["sub.work[0]", "sub.work[1]"]
    [head] = await rt.history(forked.run_id, namespace="sub", limit=1)
    meta = await rt.store.get_checkpoint(forked.run_id, head.id)
    assert meta is not None and dict(meta.task_args) == {"work[0]": b'"doc0"',
                                                          "work[1]": b'"doc1"'}
    done = await rt.resume(wf, forked.run_id, responses={
        q.id: "yes" for q in forked.pending_requests})
    assert done.status is RunStatus.COMPLETED, done.error
    assert list(done.state.log) == ["doc0:yes", "doc1:yes"]
    assert sorted(asked) == [("sub.work[0]", "doc0"), ("sub.work[1]", "doc1")]


class Nest(Blackboard):
    x: int = 0


def two_inner_questions(calls: Calls) -> Workflow:
    """outer: sub (inner: prep -> ask1 -> ask2, each asker adding its answer to x)."""
    def asker(name: str) -> Any:
        async def node(state: Nest, ctx: NodeContext) -> dict[str, Any]:
            return {"x": state.x + await ctx.request({"q": name}, response_type=int)}
        return node

    def prep(state: Nest) -> None:
        calls["prep"] += 1

    inner = WorkflowBuilder("inner", state=Nest)
    inner.add_node("prep", prep).add_node("ask1", asker("ask1")).add_node("ask2", asker("ask2"))
    inner.set_entry("prep").add_edge("prep", "ask1").add_edge("ask1", "ask2")
    inner.add_edge("ask2", END)
    outer = WorkflowBuilder("outer", state=Nest)
    outer.add_subworkflow("sub", inner.build(), inputs=["x"], outputs={"x": "x"})
    outer.set_entry("sub").add_edge("sub", END)
    return outer.build()


async def test_each_inner_wait_is_reported_with_a_checkpoint_id_of_its_own(rt: Runtime) -> None:
    calls: Calls = collections.Counter()
    wf = two_inner_questions(calls)
    first = await rt.run(wf, {"x": 1})
    [ask1] = first.pending_requests
    second = await rt.resume(wf, first.run_id, responses={ask1.id: 10})
    assert [r.node for r in second.pending_requests] == ["sub.ask2"]
    assert second.checkpoint_id != first.checkpoint_id
    assert (await rt.get_run(first.run_id)).head_checkpoint_id == second.checkpoint_id
    then = (await rt.get_state(first.run_id, first.checkpoint_id)).subworkflows["sub"]
    assert then.values["x"] == 1 and then.next_tasks == ("ask1",)  # the first moment
    assert [c.nodes for c in await rt.history(first.run_id, namespace="sub")] == [
        ("ask1",), (), ("prep",), ()]  # (): the copy the resume went on from
    now = (await rt.get_state(first.run_id, second.checkpoint_id)).subworkflows["sub"]
    assert now.values["x"] == 11 and [r.node for r in now.pending_requests] == ["sub.ask2"]
    forked = await rt.fork(wf, first.run_id, first.checkpoint_id)
    assert [r.node for r in forked.pending_requests] == ["sub.ask1"]
    assert calls == {"prep": 1}  # the fork resumed inside the first moment
    forked = await rt.resume(wf, forked.run_id, responses={forked.pending_requests[0].id: 5})
    assert [r.node for r in forked.pending_requests] == ["sub.ask2"]
    done = await rt.resume(wf, forked.run_id, responses={forked.pending_requests[0].id: 1})
    assert done.status is RunStatus.COMPLETED and done.state.x == 7
    later = await rt.fork(wf, first.run_id, second.checkpoint_id)
    assert [r.node for r in later.pending_requests] == ["sub.ask2"]
    done = await rt.resume(wf, first.run_id, responses={second.pending_requests[0].id: 100})
    assert done.status is RunStatus.COMPLETED and done.state.x == 111
