"""WorkflowBuilder: node forms, routing declarations and build-time validation."""

from __future__ import annotations

import threading
from typing import Annotated, Any, Literal

import pytest

from durable_flow import (
    END,
    Blackboard,
    ExpressionError,
    MemoryStore,
    NodeContext,
    RetryPolicy,
    RunStatus,
    Runtime,
    Workflow,
    WorkflowBuilder,
    WorkflowValidationError,
    add,
    append,
)


class Trace(Blackboard):
    steps: Annotated[list[str], append] = []
    topic: str = ""


async def test_decorator_forms_and_add_node_register_nodes(rt: Runtime) -> None:
    b = WorkflowBuilder("forms", state=Trace)
    main_thread = threading.get_ident()
    threads: dict[str, int] = {}

    @b.node()
    async def async_two(state: Trace, ctx: NodeContext) -> dict[str, Any]:
        assert isinstance(ctx, NodeContext) and ctx.node == "async_two"
        return {"steps": [f"async_two@{ctx.superstep}"]}

    @b.node("named")
    async def whatever(state: Trace) -> dict[str, Any]:
        return {"steps": ["named"]}

    @b.node(retry=RetryPolicy(max_attempts=2, initial_delay=0, jitter=False))
    def sync_two(state: Trace, ctx: NodeContext) -> dict[str, Any]:
        threads["sync_two"] = threading.get_ident()
        return {"steps": [f"sync_two:{ctx.node}"]}

    def sync_one(state: Trace) -> dict[str, Any]:
        return {"steps": [f"sync_one saw {len(state.steps)}"]}

    b.add_node("sync_one", sync_one)
    b.set_entry("async_two")
    b.add_edge("async_two", "named").add_edge("named", "sync_two")
    b.add_edge("sync_two", "sync_one").add_edge("sync_one", END)
    wf = b.build()
    assert isinstance(wf, Workflow)
    assert set(wf.nodes) == {"async_two", "named", "sync_two", "sync_one"}
    assert wf.nodes["sync_two"].retry == RetryPolicy(max_attempts=2, initial_delay=0, jitter=False)
    # the decorator returns the function unchanged
    assert whatever.__name__ == "whatever"
    result = await rt.run(wf, {})
    assert result.status is RunStatus.COMPLETED
    assert result.state.steps == ["async_two@1", "named", "sync_two:sync_two", "sync_one saw 3"]
    assert threads["sync_two"] != main_thread  # sync nodes do not block the loop


async def test_none_return_and_one_arg_lambda_nodes(rt: Runtime) -> None:
    b = WorkflowBuilder("lambdas", state=Trace)
    b.add_node("a", lambda s: None).add_node("b", lambda s: {"topic": s.topic.upper()})
    b.set_entry("a").add_edge("a", "b").add_edge("b", END)
    result = await rt.run(b.build(), {"topic": "tides"})
    assert result.state.topic == "TIDES"


def test_set_entry_again_replaces_it() -> None:
    b = WorkflowBuilder("entry", state=Trace)
    b.add_node("a", lambda s: None).add_node("b", lambda s: None)
    b.add_edge("a", END).add_edge("b", END)
    b.set_entry("a").set_entry("b")
    with pytest.raises(WorkflowValidationError) as info:
        b.build()
    assert info.value.problems == ["node 'a' is unreachable from the entry 'b'"]


def test_built_workflow_is_immutable() -> None:
    b = WorkflowBuilder("frozen", state=Trace)
    b.add_node("a", lambda s: None).set_entry("a").add_edge("a", END)
    wf = b.build()
    with pytest.raises(AttributeError):
        wf.entry = "b"  # type: ignore[misc]
    with pytest.raises(TypeError):
        wf.nodes["x"] = wf.nodes["a"]  # type: ignore[index]
    # building does not freeze the builder into the workflow
    b.add_node("later", lambda s: None)
    assert "later" not in wf.nodes


def _inner() -> Workflow:
    class Inner(Blackboard):
        text: str = ""
        verdict: str = ""

    b = WorkflowBuilder("inner", state=Inner)
    b.add_node("judge", lambda s: {"verdict": "ok"}).set_entry("judge").add_edge("judge", END)
    return b.build()


def test_build_reports_every_problem_at_once() -> None:
    b = WorkflowBuilder("broken", state=Trace)
    for nid in ("start", "a", "b", "orphan", "loop1", "loop2", "late", "tail", "dup"):
        b.add_node(nid, lambda s: None)
    b.add_node("dup", lambda s: None)                      # duplicate id
    b.add_node("bad id", lambda s: None)                   # invalid id
    b.add_node("a.b", lambda s: None)                      # invalid id (dots are paths)
    b.add_node(END, lambda s: None)                        # reserved id
    b.set_entry("start")
    b.add_edge("start", "a").add_edge("a", END)
    b.add_edge("start", "ghost")                           # unknown edge target
    b.add_edge("nowhere", "a")                             # unknown edge source
    b.add_edge("start", "b", when="topic ==")              # condition that does not parse
    b.add_edge("b", END)
    b.add_edge("orphan", END)                              # unreachable
    b.add_edge("start", "loop1").add_edge("loop1", "loop2").add_edge("loop2", "loop1")  # no finish
    b.add_fan_in(["a", "late"], "tail")                    # 'late' only comes after the join
    b.add_edge("tail", "late").add_edge("late", END)
    b.add_edge("tail", "dup").add_edge("dup", END)
    b.add_switch("a", [("topic == 'x'", "phantom")], default="ghost2")
    b.add_subworkflow("sub", _inner(), inputs={"text": "missing_parent", "nope": "topic"},
                      outputs={"absent": "verdict", "topic": "no_inner"})
    b.add_edge("start", "sub").add_edge("sub", END)
    with pytest.raises(WorkflowValidationError) as info:
        b.build()
    problems = info.value.problems
    text = "\n".join(problems)
    expected = [
        "node 'dup' is defined twice",
        "node id 'bad id' is invalid",
        "node id 'a.b' is invalid",
        f"node id '{END}' is invalid",
        "edge start->ghost refers to unknown node 'ghost'",
        "refers to unknown node 'nowhere'",
        "edge start->b: cannot parse 'topic =='",
        "switch a->phantom refers to unknown node 'phantom'",
        "switch a default refers to unknown node 'ghost2'",
        "node 'orphan' is unreachable",
        "node 'loop1' has no way to finish",
        "node 'loop2' has no way to finish",
        "fan-in into 'tail': source 'late' can never complete",
        "sub-workflow 'sub' inputs: parent field 'missing_parent' does not exist",
        "sub-workflow 'sub' inputs: inner field 'nope' does not exist",
        "sub-workflow 'sub' outputs: parent field 'absent' does not exist",
        "sub-workflow 'sub' outputs: inner field 'no_inner' does not exist",
    ]
    for piece in expected:
        assert piece in text, piece
    assert len(problems) == len(expected), text
    assert str(len(problems)) in str(info.value)


def test_missing_entry_is_reported_with_the_other_problems() -> None:
    b = WorkflowBuilder("no-entry", state=Trace)
    b.add_node("a", lambda s: None).add_edge("a", "ghost")
    with pytest.raises(WorkflowValidationError) as info:
        b.build()
    assert info.value.problems == [
        "no entry node: call set_entry(...)",
        "edge a->ghost refers to unknown node 'ghost'",
    ]


def test_entry_that_is_not_a_node_is_reported() -> None:
    b = WorkflowBuilder("bad-entry", state=Trace)
    b.add_node("a", lambda s: None).add_edge("a", END).set_entry("zzz")
    with pytest.raises(WorkflowValidationError) as info:
        b.build()
    assert info.value.problems == ["entry 'zzz' is not a node"]


def test_undeclared_goto_target_and_unknown_exit_are_reported() -> None:
    b = WorkflowBuilder("goto", state=Trace)
    b.add_node("a", lambda s: None, goto=["nowhere"]).set_entry("a").add_edge("a", END)
    b.set_exit("gone")
    with pytest.raises(WorkflowValidationError) as info:
        b.build()
    assert info.value.problems == ["node a goto refers to unknown node 'nowhere'",
                                   "exit refers to unknown node 'gone'"]


def test_bad_skip_if_and_non_callable_node_are_reported() -> None:
    b = WorkflowBuilder("skip", state=Trace)
    b.add_node("a", lambda s: None, skip_if="topic and")
    b.add_node("b", "not a function")  # type: ignore[arg-type]
    b.set_entry("a").add_edge("a", "b").add_edge("b", END)
    with pytest.raises(WorkflowValidationError) as info:
        b.build()
    assert len(info.value.problems) == 2
    assert info.value.problems[0].startswith("node 'a' skip_if: cannot parse")
    assert "is not callable" in info.value.problems[1]


def test_conditions_and_loops_that_can_finish_build() -> None:
    b = WorkflowBuilder("ok", state=Trace)
    b.add_node("a", lambda s: None).add_node("b", lambda s: None)
    b.set_entry("a")
    b.add_edge("a", "b")
    b.add_switch("b", [("topic == 'again'", "a")], default=END)
    b.add_edge("b", "a", when=lambda s: len(s.steps) < 3)
    wf = b.build()
    assert wf.entry == "a"


def test_a_condition_error_is_an_expression_error() -> None:
    with pytest.raises(ExpressionError):
        from durable_flow.model._expr import parse_expression
        parse_expression("a >")


def test_signature_ignores_function_bodies_but_not_structure() -> None:
    def make(fn: Any, extra_edge: bool = False) -> Workflow:
        b = WorkflowBuilder("sig", state=Trace)
        b.add_node("a", fn).add_node("b", lambda s: None)
        b.set_entry("a").add_edge("a", "b").add_edge("b", END)
        if extra_edge:
            b.add_edge("a", END)
        return b.build()

    assert make(lambda s: None).signature == make(lambda s: {"topic": "x"}).signature
    assert make(lambda s: None).signature != make(lambda s: None, extra_edge=True).signature


def test_conditional_edges_and_gotos_may_end_a_branch() -> None:
    # when no condition holds the branch ends, so these loops can finish
    b = WorkflowBuilder("cond-loop", state=Trace)
    b.add_node("a", lambda s: None).add_node("b", lambda s: None)
    b.set_entry("a").add_edge("a", "b").add_edge("b", "a", when="topic == 'again'")
    b.build()
    g = WorkflowBuilder("goto-loop", state=Trace)
    g.add_node("a", lambda s: None).add_node("b", lambda s: None, goto=["a"])
    g.set_entry("a").add_edge("a", "b").add_edge("b", "a")
    g.build()
    # a switch with a default always picks a target: that loop cannot finish
    s = WorkflowBuilder("switch-loop", state=Trace)
    s.add_node("a", lambda s: None).add_node("b", lambda s: None)
    s.set_entry("a").add_edge("a", "b")
    s.add_switch("b", [("topic == 'x'", "a")], default="a")
    with pytest.raises(WorkflowValidationError) as info:
        s.build()
    assert len(info.value.problems) == 2
    assert all("has no way to finish" in p for p in info.value.problems)


# -- text that cannot be stored --------------------------------------------------------------

SURROGATE = "\ud800"  # a lone surrogate: a Python str may hold it, UTF-8 and orjson refuse it


def _condition_named(name: str) -> Any:
    def cond(state: Any) -> bool:
        return True

    cond.__qualname__ = name
    return cond


def _surrogate_in(where: str) -> WorkflowBuilder:
    """A workflow that would run, but for a surrogate at ``where``."""
    b = WorkflowBuilder("flow" + SURROGATE if where == "name" else "flow")
    b.add_node("a", lambda s: None,
               skip_if=f"topic == '{SURROGATE}'" if where == "skip_if" else None,
               produces=["topic" + SURROGATE] if where == "produces" else None)
    b.set_entry("a")
    if where == "switch":
        b.add_switch("a", [(f"topic == '{SURROGATE}'", END)], default=END)
    elif where == "route_by_type":
        b.route_by_type("a", {"Math" + SURROGATE: END}, default=END)
    elif where == "callable":
        b.add_edge("a", END, when=_condition_named("check" + SURROGATE))
    else:
        b.add_edge("a", END, when=f"topic != '{SURROGATE}'" if where == "edge" else None)
    return b


@pytest.mark.parametrize(("where", "located"), [
    ("name", "the workflow name: 'flow\\ud800' contains the surrogate code point '\\ud800' at "
             "offset 4"),
    ("edge", "edge a->__end__: cannot parse \"topic != '\\ud800'\" at offset 10: the surrogate "
             "code point '\\ud800' is not valid Unicode text"),
    ("skip_if", "node 'a' skip_if: cannot parse \"topic == '\\ud800'\" at offset 10"),
    ("switch", "switch a->__end__: cannot parse \"topic == '\\ud800'\" at offset 10"),
    ("route_by_type", "switch a->__end__: cannot parse \"matched_type == 'Math\\ud800'\""),
    ("callable", "edge 'a' -> '__end__' condition: 'check\\ud800' contains the surrogate"),
    ("produces", "node 'a' produces: 'topic\\ud800' contains the surrogate"),
], ids=["name", "edge", "skip_if", "switch", "route_by_type", "callable", "produces"])
def test_text_that_is_not_valid_unicode_is_refused_by_build_naming_where(
        where: str, located: str) -> None:
    with pytest.raises(WorkflowValidationError) as info:
        _surrogate_in(where).build()
    assert [p for p in info.value.problems if p.startswith(located)], info.value.problems
    str(info.value).encode("utf-8")  # the error itself can be printed and logged


async def test_without_the_surrogate_that_workflow_builds_and_runs() -> None:
    async with Runtime(MemoryStore()) as rt:
        result = await rt.run(_surrogate_in("nowhere").build(), {})
    assert result.status is RunStatus.COMPLETED


def test_problems_quoting_an_invalid_node_id_can_be_printed() -> None:
    b = WorkflowBuilder("ids")
    b.add_node("a" + SURROGATE, lambda s: None).set_entry("a" + SURROGATE)
    b.add_edge("a" + SURROGATE, END)
    with pytest.raises(WorkflowValidationError) as info:
        b.build()
    assert "node id 'a\\ud800' is invalid: use letters, digits, '_' or '-'" in info.value.problems
    str(info.value).encode("utf-8")


def test_a_node_id_ending_in_a_newline_is_invalid() -> None:
    b = WorkflowBuilder("ids")
    b.add_node("a\n", lambda s: None).set_entry("a\n").add_edge("a\n", END)
    with pytest.raises(WorkflowValidationError) as info:
        b.build()
    assert "node id 'a\\n' is invalid: use letters, digits, '_' or '-'" in info.value.problems


# -- a join into the entry: the map-reduce loop -------------------------------------------------


class Rounds(Blackboard):
    rounds: Annotated[int, add] = 0
    results: Annotated[list[str], append] = []


WORKERS = [f"w{i}" for i in range(8)]


def _map_reduce(stop: Literal["edge", "switch"]) -> Workflow:
    """``fan`` (the entry) maps onto eight workers, whose join runs ``fan`` again."""
    b = WorkflowBuilder("map-reduce", state=Rounds)
    b.add_node("fan", lambda s: {"rounds": 1})
    for name in WORKERS:
        b.add_node(name, lambda s, ctx: {"results": [f"{ctx.node}@{s.rounds}"]})
        b.add_edge("fan", name, when="rounds < 3")
    b.add_fan_in(WORKERS, "fan")
    if stop == "edge":
        b.add_edge("fan", END, when="rounds >= 3")
    else:
        b.add_switch("fan", [("rounds >= 3", END)])
    b.set_entry("fan")
    return b.build()


@pytest.mark.parametrize("stop", ["edge", "switch"])
async def test_a_join_into_the_entry_builds_and_loops_until_its_condition_stops_it(
        stop: Literal["edge", "switch"]) -> None:
    async with Runtime(MemoryStore()) as rt:
        result = await rt.run(_map_reduce(stop), {})
        history = await rt.history(result.run_id)
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.state.rounds == 3
    assert result.state.results == [f"{w}@{r}" for r in (1, 2) for w in WORKERS]
    # fan, the workers, fan, the workers, fan: five supersteps after the input checkpoint
    assert [(cp.superstep, cp.nodes) for cp in reversed(history)] == [
        (0, ()), (1, ("fan",)), (2, tuple(WORKERS)), (3, ("fan",)), (4, tuple(WORKERS)),
        (5, ("fan",))]


def test_a_join_into_the_entry_still_needs_sources_the_entry_can_reach() -> None:
    b = WorkflowBuilder("orphan-join", state=Rounds)
    b.add_node("fan", lambda s: {"rounds": 1}).add_node("w0", lambda s: None)
    b.add_node("lost", lambda s: None)
    b.set_entry("fan").add_edge("fan", "w0", when="rounds < 3").add_edge("lost", "fan")
    b.add_fan_in(["w0", "lost"], "fan")
    with pytest.raises(WorkflowValidationError) as info:
        b.build()
    assert ("fan-in into 'fan': source 'lost' can never complete (it is not reachable from the "
            "entry without the join itself)") in info.value.problems
