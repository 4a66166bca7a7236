"""Nested sub-workflows: mapping, isolation, deep requests, inspection, failures, forks."""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Annotated, Any

import pytest

from durable_flow import (
    END,
    Blackboard,
    Event,
    Message,
    NodeContext,
    RunStatus,
    Runtime,
    Workflow,
    WorkflowBuilder,
    WorkflowMismatchError,
    append,
)


class Outer(Blackboard):
    topic: str = ""
    draft: str = ""
    verdict: str = ""
    secret: str = "outer-only"
    log: Annotated[list[str], append] = []


class Middle(Blackboard):
    draft: str = ""
    verdict: str = ""
    log: Annotated[list[str], append] = []


class Inner(Blackboard):
    draft: str = ""
    verdict: str = ""
    inner_note: str = ""
    secret: str = "inner-default"
    log: Annotated[list[str], append] = []


def legal_workflow(calls: collections.Counter[str], *, extra: bool = False) -> Workflow:
    """The deepest level: check, then a person approves."""
    b = WorkflowBuilder("legal", state=Inner)

    def check(state: Inner) -> dict[str, Any]:
        calls["check"] += 1
        return {"inner_note": f"checked {state.draft}", "log": [f"check saw secret={state.secret}"]}

    async def approve(state: Inner, ctx: NodeContext) -> dict[str, Any]:
        calls["approve"] += 1
        assert ctx.node.endswith("approve")
        ok = await ctx.request({"draft": state.draft, "node": ctx.node}, response_type=bool)
        return {"verdict": "approved" if ok else "rejected", "log": [f"approve:{ok}"],
                "messages": [Message.assistant("inner chatter")]}

    b.add_node("check", check).add_node("approve", approve)
    b.set_entry("check").add_edge("check", "approve").add_edge("approve", END)
    if extra:
        b.add_node("audit", lambda s: None).add_edge("approve", "audit").add_edge("audit", END)
    return b.build()


def review_workflow(calls: collections.Counter[str], *, extra: bool = False) -> Workflow:
    """The middle level: prepare, then the legal sub-workflow."""
    b = WorkflowBuilder("review", state=Middle)

    def prepare(state: Middle) -> dict[str, Any]:
        calls["prepare"] += 1
        return {"draft": state.draft.upper(), "log": ["prepare"]}

    b.add_node("prepare", prepare)
    b.add_subworkflow("legal", legal_workflow(calls, extra=extra), inputs=["draft"],
                      outputs={"verdict": "verdict", "log": "log"})
    b.set_entry("prepare").add_edge("prepare", "legal").add_edge("legal", END)
    return b.build()


def publish_workflow(calls: collections.Counter[str], *, extra: bool = False) -> Workflow:
    """Top level: write -> review (-> legal -> approve) -> publish."""
    b = WorkflowBuilder("publish", state=Outer)

    def write(state: Outer) -> dict[str, Any]:
        calls["write"] += 1
        return {"draft": f"about {state.topic}", "log": ["write"]}

    def publish(state: Outer) -> dict[str, Any]:
        calls["publish"] += 1
        return {"log": [f"publish {state.verdict}"]}

    b.add_node("write", write).add_node("publish", publish)
    b.add_subworkflow("review", review_workflow(calls, extra=extra),
                      inputs={"draft": "draft"}, outputs=["verdict"])
    b.set_entry("write").add_edge("write", "review").add_edge("review", "publish")
    b.add_edge("publish", END)
    return b.build()


async def test_inputs_and_outputs_map_fields_and_keep_levels_isolated(rt: Runtime) -> None:
    b = WorkflowBuilder("flat", state=Outer)
    inner = WorkflowBuilder("inner", state=Inner)
    seen: list[Inner] = []

    def look(state: Inner) -> dict[str, Any]:
        seen.append(state)
        return {"verdict": f"ok {state.draft}", "inner_note": "private", "secret": "leaked?",
                "log": ["inner"], "messages": [Message.user("inner only")]}

    inner.add_node("look", look).set_entry("look").add_edge("look", END)
    b.add_node("start", lambda s: {"log": ["start"]})
    b.add_subworkflow("sub", inner.build(), inputs={"draft": "topic"},
                      outputs={"verdict": "verdict", "log": "log"})
    b.set_entry("start").add_edge("start", "sub").add_edge("sub", END)
    result = await rt.run(b.build(), {"topic": "tides", "secret": "parent secret"})
    assert result.status is RunStatus.COMPLETED, result.error
    # the inner blackboard saw only its inputs (and its own defaults)
    assert seen[0].draft == "tides" and seen[0].secret == "inner-default"
    assert seen[0].log == [] and seen[0].messages == []
    # the parent got only the outputs, through its reducers
    assert result.state.verdict == "ok tides"
    assert result.state.log == ["start", "inner"]
    assert result.state.secret == "parent secret" and result.state.messages == []
    history = await rt.history(result.run_id, namespace="sub")
    assert [cp.nodes for cp in history] == [("look",), ()]
    assert all(cp.namespace == "sub" for cp in history)


async def test_three_levels_deep_request_is_answered_through_the_parent(
    rt: Runtime, store_factory: Callable[[], Any]
) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = publish_workflow(calls)
    waiting = await rt.run(wf, {"topic": "tides"})
    assert waiting.status is RunStatus.WAITING, waiting.error
    [req] = waiting.pending_requests
    assert req.node == "review.legal.approve"
    assert req.payload == {"draft": "ABOUT TIDES", "node": "review.legal.approve"}
    assert req.response_schema == {"type": "boolean"}
    assert [r.id for r in await rt.pending_requests()] == [req.id]
    assert (await rt.pending_requests(workflow_name="publish"))[0].node == "review.legal.approve"
    assert waiting.state.log == ["write"] and waiting.state.verdict == ""

    # the nested in-flight state is readable
    snap = await rt.get_state(waiting.run_id)
    assert snap.status is RunStatus.WAITING and snap.next_tasks == ("review",)
    assert [r.id for r in snap.pending_requests] == [req.id]
    review = snap.subworkflows["review"]
    assert review.namespace == "review" and review.next_tasks == ("legal",)
    assert review.values["draft"] == "ABOUT TIDES" and review.values["log"] == ["prepare"]
    legal = review.subworkflows["legal"]
    assert legal.namespace == "review.legal" and legal.next_tasks == ("approve",)
    assert legal.values["inner_note"] == "checked ABOUT TIDES"
    assert [r.node for r in legal.pending_requests] == ["review.legal.approve"]
    inner_history = await rt.history(waiting.run_id, namespace="review.legal")
    assert [cp.nodes for cp in inner_history] == [("check",), ()]
    assert all(cp.namespace == "review.legal" and cp.run_id == waiting.run_id
               for cp in inner_history)
    assert [cp.nodes for cp in await rt.history(waiting.run_id, namespace="review")] == \
        [("prepare",), ()]
    assert (await rt.get_state(waiting.run_id, namespace="review.legal")).checkpoint_id == \
        inner_history[0].id

    # answered through the parent's resume, from a second runtime and store object
    async with Runtime(store_factory()) as rt2:
        done = await rt2.resume(wf, waiting.run_id, responses={req.id: True})
        final = await rt2.get_state(waiting.run_id)
        inner_after = await rt2.history(waiting.run_id, namespace="review.legal")
    assert done.status is RunStatus.COMPLETED, done.error
    assert done.state.verdict == "approved"
    assert done.state.log == ["write", "publish approved"]
    assert done.pending_requests == () and final.subworkflows == {}
    assert calls == {"write": 1, "prepare": 1, "check": 1, "approve": 2, "publish": 1}
    # the resume moved the paused thread under a new top-level checkpoint (a copy: no nodes)
    assert [cp.nodes for cp in inner_after] == [("approve",), (), ("check",), ()]
    assert await rt.pending_requests() == []


async def test_sibling_instances_of_one_inner_workflow_wait_and_answer_separately(
    rt: Runtime, store_factory: Callable[[], Any]
) -> None:
    calls: collections.Counter[str] = collections.Counter()
    legal = legal_workflow(calls)

    class Pair(Blackboard):
        left_draft: str = ""
        right_draft: str = ""
        left_verdict: str = ""
        right_verdict: str = ""

    b = WorkflowBuilder("pair", state=Pair)
    b.add_node("start", lambda s: None)
    b.add_subworkflow("left", legal, inputs={"draft": "left_draft"},
                      outputs={"left_verdict": "verdict"})
    b.add_subworkflow("right", legal, inputs={"draft": "right_draft"},
                      outputs={"right_verdict": "verdict"})
    b.set_entry("start").add_edge("start", "left").add_edge("start", "right")
    b.add_edge("left", END).add_edge("right", END)
    wf = b.build()
    waiting = await rt.run(wf, {"left_draft": "L", "right_draft": "R"})
    assert waiting.status is RunStatus.WAITING
    reqs = {r.node: r for r in waiting.pending_requests}
    assert set(reqs) == {"left.approve", "right.approve"}
    assert reqs["left.approve"].payload["draft"] == "L"
    assert reqs["right.approve"].payload["draft"] == "R"
    assert reqs["left.approve"].id != reqs["right.approve"].id

    half = await rt.resume(wf, waiting.run_id, responses={reqs["right.approve"].id: False})
    assert half.status is RunStatus.WAITING
    assert [r.node for r in half.pending_requests] == ["left.approve"]
    snap = await rt.get_state(waiting.run_id)
    assert set(snap.subworkflows) == {"left"}
    assert snap.subworkflows["left"].values["draft"] == "L"
    assert [cp.nodes for cp in await rt.history(waiting.run_id, namespace="right")] == \
        [("approve",), (), ("check",), ()]  # (): the copy the resume continued from

    async with Runtime(store_factory()) as rt2:
        done = await rt2.resume(wf, waiting.run_id, responses={reqs["left.approve"].id: True})
    assert done.status is RunStatus.COMPLETED
    assert (done.state.left_verdict, done.state.right_verdict) == ("approved", "rejected")
    assert calls["check"] == 2 and calls["approve"] == 4
    left_hist = await rt.history(waiting.run_id, namespace="left")
    left_state = await rt.get_state(waiting.run_id, left_hist[0].id)
    assert left_state.values["draft"] == "L" and left_state.values["verdict"] == "approved"


def failing_workflow() -> Workflow:
    inner = WorkflowBuilder("legal", state=Inner)

    def explode(state: Inner) -> None:
        raise ValueError(f"cannot review {state.draft}")

    inner.add_node("check", lambda s: None).add_node("explode", explode)
    inner.set_entry("check").add_edge("check", "explode").add_edge("explode", END)
    middle = WorkflowBuilder("review", state=Middle)
    middle.add_node("prepare", lambda s: None)
    middle.add_subworkflow("legal", inner.build(), inputs=["draft"], outputs=["verdict"])
    middle.set_entry("prepare").add_edge("prepare", "legal").add_edge("legal", END)
    top = WorkflowBuilder("publish", state=Outer)
    top.add_node("write", lambda s: {"draft": "d1"})
    top.add_subworkflow("review", middle.build(), inputs=["draft"], outputs=["verdict"])
    top.set_entry("write").add_edge("write", "review").add_edge("review", END)
    return top.build()


async def test_an_inner_failure_fails_the_parent_with_subworkflow_error(rt: Runtime) -> None:
    events: list[Event] = [e async for e in rt.stream(failing_workflow(), {})]
    result = events[-1].result
    assert result is not None and result.status is RunStatus.FAILED
    err = result.error
    # the run's error names the inner exception, its message and its full path
    assert err is not None and err.type == "ValueError"
    assert err.node == "review.legal.explode"
    assert err.message == "cannot review d1"
    assert err.traceback is not None and "cannot review d1" in err.traceback
    failed = [e for e in events if e.kind == "subworkflow_failed"]
    assert [(e.namespace, e.node) for e in failed] == [("review", "review.legal"), ("", "review")]
    assert all(e.data["path"] == "review.legal.explode" and e.data["error_type"] == "ValueError"
               and e.data["message"] == "cannot review d1" for e in failed)
    assert [e.kind for e in events][-1] == "run_failed"
    assert (await rt.list_runs())[0].error == err
    inner = await rt.history(result.run_id, namespace="review.legal")
    assert inner[0].status is RunStatus.FAILED and inner[0].nodes == ("check",)


async def test_resuming_with_a_changed_inner_workflow_raises_mismatch(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    waiting = await rt.run(publish_workflow(calls), {"topic": "t"})
    before = await rt.history(waiting.run_id, namespace="review.legal")
    with pytest.raises(WorkflowMismatchError):
        await rt.resume(publish_workflow(calls, extra=True), waiting.run_id,
                        responses={waiting.pending_requests[0].id: True})
    assert await rt.history(waiting.run_id, namespace="review.legal") == before
    assert [r.id for r in await rt.pending_requests()] == [waiting.pending_requests[0].id]


async def test_fork_from_an_inner_checkpoint_resumes_inside_it(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = publish_workflow(calls)
    waiting = await rt.run(wf, {"topic": "tides"})
    done = await rt.resume(wf, waiting.run_id, responses={waiting.pending_requests[0].id: False})
    assert done.state.verdict == "rejected"
    original = await rt.history(waiting.run_id, namespace="review.legal")
    after_check = next(cp for cp in original if cp.nodes == ("check",))
    counts = dict(calls)

    forked = await rt.fork(wf, waiting.run_id, after_check.id)
    assert forked.status is RunStatus.WAITING, forked.error
    [req] = forked.pending_requests
    assert req.node == "review.legal.approve" and req.run_id == forked.run_id
    # it resumed inside: nothing before the inner checkpoint ran again
    assert {k: calls[k] - counts.get(k, 0) for k in calls} == \
        {"write": 0, "prepare": 0, "check": 0, "approve": 1, "publish": 0}
    snap = await rt.get_state(forked.run_id)
    legal = snap.subworkflows["review"].subworkflows["legal"]
    assert legal.values["inner_note"] == "checked ABOUT TIDES"
    finished = await rt.resume(wf, forked.run_id, responses={req.id: True})
    assert finished.status is RunStatus.COMPLETED
    assert finished.state.verdict == "approved"
    assert finished.state.log == ["write", "publish approved"]
    # the original run is untouched
    assert await rt.history(waiting.run_id, namespace="review.legal") == original
    assert (await rt.get_state(waiting.run_id)).values["verdict"] == "rejected"
    info = next(r for r in await rt.list_runs() if r.run_id == forked.run_id)
    assert info.forked_from is not None and info.forked_from.checkpoint_id == after_check.id


async def test_fork_with_update_inside_a_sub_workflow(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = publish_workflow(calls)
    waiting = await rt.run(wf, {"topic": "tides"})
    inner = await rt.history(waiting.run_id, namespace="review.legal")
    forked = await rt.fork(wf, waiting.run_id, inner[0].id, update={"draft": "EDITED"})
    assert forked.pending_requests[0].payload["draft"] == "EDITED"
    # the original still waits with its own request
    assert (await rt.get_state(waiting.run_id)).status is RunStatus.WAITING
    assert len(await rt.pending_requests()) == 2


async def test_resume_after_fixing_an_inner_node_continues_inside(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    broken = {"on": True}
    inner = WorkflowBuilder("legal", state=Inner)

    def check(state: Inner) -> dict[str, Any]:
        calls["check"] += 1
        return {"inner_note": "checked"}

    def sign(state: Inner) -> dict[str, Any]:
        calls["sign"] += 1
        if broken["on"]:
            raise RuntimeError("pen out of ink")
        return {"verdict": f"signed after {state.inner_note}"}

    inner.add_node("check", check).add_node("sign", sign)
    inner.set_entry("check").add_edge("check", "sign").add_edge("sign", END)
    top = WorkflowBuilder("top", state=Outer)
    top.add_node("write", lambda s: {"log": ["write"]})
    top.add_subworkflow("legal", inner.build(), inputs=["draft"], outputs=["verdict"])
    top.set_entry("write").add_edge("write", "legal").add_edge("legal", END)
    wf = top.build()
    failed = await rt.run(wf, {})
    assert failed.status is RunStatus.FAILED and failed.error is not None
    assert failed.error.node == "legal.sign" and "pen out of ink" in failed.error.message
    broken["on"] = False
    done = await rt.resume(wf, failed.run_id)
    assert done.status is RunStatus.COMPLETED, done.error
    assert done.state.verdict == "signed after checked" and done.state.log == ["write"]
    assert calls == {"check": 1, "sign": 2}
