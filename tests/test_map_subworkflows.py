"""``Send`` to a sub-workflow node: one nested run per instance, answerable from the top."""

from __future__ import annotations

import collections
from typing import Annotated, Any

from mapkit import collect

from durable_flow import (
    Blackboard,
    Command,
    NodeContext,
    RunStatus,
    Runtime,
    Send,
    Workflow,
    WorkflowBuilder,
    append,
)


class Doc(Blackboard):
    title: str = ""
    risky: bool = False
    reviewer: str = ""
    verdict: str = ""


class Batch(Blackboard):
    docs: list[dict[str, Any]] = []
    reviewer: str = "ann"
    verdicts: Annotated[list[str], append] = []


def review_workflow(calls: collections.Counter[str]) -> Workflow:
    """approve: asks a person only for risky documents."""
    b = WorkflowBuilder("review", state=Doc)

    @b.node()
    async def approve(state: Doc, ctx: NodeContext) -> dict[str, Any]:
        calls[ctx.node] += 1
        if state.risky:
            ok = await ctx.request({"title": state.title}, response_type=bool)
            return {"verdict": f"{state.title}/{state.reviewer}/{'ok' if ok else 'no'}"}
        return {"verdict": f"{state.title}/{state.reviewer}/auto"}

    b.set_entry("approve")
    return b.build()


def batch_workflow(inner: Workflow, max_concurrency: int | None = None) -> Workflow:
    b = WorkflowBuilder("batch", state=Batch)
    b.add_node("split", lambda s: Command(goto=[Send("review", d) for d in s.docs]),
               goto=["review"])
    b.add_subworkflow("review", inner, inputs=["reviewer"], outputs={"verdicts": "verdict"},
                      max_concurrency=max_concurrency)
    b.set_entry("split")
    return b.build()


DOCS = [{"title": f"d{i}", "risky": i % 3 == 0} for i in range(7)]


async def test_each_instance_runs_nested_with_its_arg_over_the_inputs(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = batch_workflow(review_workflow(calls), max_concurrency=2)
    r = await rt.run(wf, {"docs": [{"title": "a"}, {"title": "b", "reviewer": "bob"}]})
    assert r.status is RunStatus.COMPLETED, r.error
    assert list(r.state.verdicts) == ["a/ann/auto", "b/bob/auto"]
    assert calls == {"review[0].approve": 1, "review[1].approve": 1}
    for i, title in enumerate("ab"):
        history = await rt.history(r.run_id, namespace=f"review[{i}]")
        assert [c.namespace for c in history] == [f"review[{i}]"] * 2
        first = await rt.get_state(r.run_id, history[-1].id)
        assert first.values["title"] == title


async def test_requests_inside_instances_are_answered_from_the_top(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = batch_workflow(review_workflow(calls))
    r = await rt.run(wf, {"docs": DOCS})
    assert r.status is RunStatus.WAITING
    ids = sorted(q.id for q in r.pending_requests)
    assert ids == ["review[0]@2/approve@1#0", "review[3]@2/approve@1#0",
                   "review[6]@2/approve@1#0"]
    assert sorted(q.node for q in r.pending_requests) == [
        "review[0].approve", "review[3].approve", "review[6].approve"]
    r = await rt.resume(wf, r.run_id, responses={ids[1]: False})
    assert sorted(q.id for q in r.pending_requests) == [ids[0], ids[2]]  # the rest still wait
    r = await rt.resume(wf, r.run_id, responses={ids[0]: True, ids[2]: True})
    assert r.status is RunStatus.COMPLETED, r.error
    assert list(r.state.verdicts) == [
        "d0/ann/ok", "d1/ann/auto", "d2/ann/auto", "d3/ann/no", "d4/ann/auto", "d5/ann/auto",
        "d6/ann/ok"]
    asked = {k: v for k, v in calls.items() if k in ("review[0].approve", "review[3].approve",
                                                     "review[6].approve")}
    assert asked == {"review[0].approve": 2, "review[3].approve": 2, "review[6].approve": 2}
    assert sum(calls.values()) == 7 + 3  # auto documents ran once


async def test_get_state_shows_every_waiting_instance_and_fork_resumes_inside_them(
        rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = batch_workflow(review_workflow(calls))
    r = await rt.run(wf, {"docs": DOCS[:4]})
    snap = await rt.get_state(r.run_id)
    assert snap.next_tasks == ("review[0]", "review[1]", "review[2]", "review[3]")
    assert sorted(snap.subworkflows) == ["review[0]", "review[3]"]
    assert snap.subworkflows["review[3]"].namespace == "review[3]"
    assert [q.id for q in snap.subworkflows["review[3]"].pending_requests] == [
        "review[3]@2/approve@1#0"]
    forked = await rt.fork(wf, r.run_id, r.checkpoint_id)
    assert sorted(q.id for q in forked.pending_requests) == sorted(
        q.id for q in r.pending_requests)
    before = calls.copy()
    done = await rt.resume(wf, forked.run_id,
                           responses={q.id: True for q in forked.pending_requests})
    assert done.status is RunStatus.COMPLETED, done.error
    assert list(done.state.verdicts) == ["d0/ann/ok", "d1/ann/auto", "d2/ann/auto", "d3/ann/ok"]
    assert calls - before == {"review[0].approve": 1, "review[3].approve": 1}


async def test_a_fork_from_inside_one_instance_resumes_inside_it(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = batch_workflow(review_workflow(calls))
    r = await rt.run(wf, {"docs": DOCS[:4]})
    inner = (await rt.history(r.run_id, namespace="review[3]"))[0]
    forked = await rt.fork(wf, r.run_id, inner.id)
    # the sibling instance waiting beside it is carried along
    assert sorted(q.id for q in forked.pending_requests) == [
        "review[0]@2/approve@1#0", "review[3]@2/approve@1#0"]
    before = calls.copy()
    half = await rt.resume(wf, forked.run_id, responses={"review[3]@2/approve@1#0": True})
    assert [q.id for q in half.pending_requests] == ["review[0]@2/approve@1#0"]
    done = await rt.resume(wf, forked.run_id, responses={"review[0]@2/approve@1#0": False})
    assert done.status is RunStatus.COMPLETED, done.error
    assert list(done.state.verdicts) == ["d0/ann/no", "d1/ann/auto", "d2/ann/auto", "d3/ann/ok"]
    assert calls - before == {"review[0].approve": 1, "review[3].approve": 1}


async def test_nested_instances_have_qualified_paths_at_every_depth(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    review = review_workflow(calls)
    mid = WorkflowBuilder("legal", state=Doc)
    mid.add_subworkflow("check", review, inputs=["title", "risky", "reviewer"],
                        outputs=["verdict"])
    mid.set_entry("check")
    top = WorkflowBuilder("top", state=Batch)
    top.add_node("split", lambda s: Command(goto=[Send("legal", d) for d in s.docs]),
                 goto=["legal"])
    top.add_subworkflow("legal", mid.build(), inputs=["reviewer"],
                        outputs={"verdicts": "verdict"})
    top.set_entry("split")
    wf = top.build()
    r = await rt.run(wf, {"docs": [{"title": "x"}, {"title": "y", "risky": True}]})
    assert [q.node for q in r.pending_requests] == ["legal[1].check.approve"]
    assert [q.id for q in r.pending_requests] == ["legal[1]@2/check@1/approve@1#0"]
    r = await rt.resume(wf, r.run_id, responses={r.pending_requests[0].id: True})
    assert list(r.state.verdicts) == ["x/ann/auto", "y/ann/ok"]


async def test_an_error_inside_an_instance_names_its_full_path(rt: Runtime) -> None:
    b = WorkflowBuilder("breaks", state=Doc)

    def check(state: Doc) -> dict[str, Any]:
        if state.title == "bad":
            raise ValueError("unreadable")
        return {"verdict": state.title}

    b.add_node("check", check)
    b.set_entry("check")
    wf = batch_workflow(b.build())
    events = await collect(rt.stream(wf, {"docs": [{"title": "ok"}, {"title": "bad"}]}))
    result = events[-1].result
    assert result is not None and result.status is RunStatus.FAILED
    assert result.error is not None and result.error.type == "ValueError"
    assert result.error.node == "review[1].check"
    failed = [e for e in events if e.kind == "subworkflow_failed"]
    assert [e.node for e in failed] == ["review[1]"]


async def test_an_arg_naming_unknown_inner_fields_fails_the_run(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = batch_workflow(review_workflow(calls))
    r = await rt.run(wf, {"docs": [{"title": "a"}, {"titel": "typo"}]})
    assert r.status is RunStatus.FAILED
    assert r.error is not None and r.error.type == "InvalidInputError"
    assert "'review[1]'" in r.error.message and "titel" in r.error.message
    assert not calls
