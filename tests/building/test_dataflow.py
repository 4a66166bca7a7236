"""The build-time data-flow check and Workflow.explain()."""

from __future__ import annotations

from itertools import pairwise
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from durable_flow import END, Blackboard, WorkflowBuilder, WorkflowValidationError, append
from durable_flow.building._dataflow import parallel_pairs
from durable_flow.model._blackboard import FreeBlackboard
from durable_flow.testing import ScriptedModel
from durable_flow.transforms import pick, rename


class State(Blackboard):
    question: str = ""
    topic: str = ""
    answer: str = ""
    summary: str = ""
    draft: str = ""
    log: Annotated[list[str], append] = []


def model() -> ScriptedModel:
    return ScriptedModel(["ok"])


def fn(state: Any) -> dict[str, Any]:
    return {}


def problems(b: WorkflowBuilder) -> list[str]:
    with pytest.raises(WorkflowValidationError) as info:
        b.build()
    return info.value.problems


def wire(b: WorkflowBuilder, *ids: str) -> WorkflowBuilder:
    b.set_entry(ids[0])
    for a, c in pairwise(ids):
        b.add_edge(a, c)
    return b


# --- reads -----------------------------------------------------------------------------


def test_a_template_of_a_field_nobody_writes_is_an_error() -> None:
    b = WorkflowBuilder("flow", state=State)
    b.add_agent("writer", model(), instructions="Summarize {summry} about {topic}.")
    wire(b, "writer")
    assert problems(b) == [
        "node 'writer' reads 'summry' (instructions template), but no upstream node writes it "
        "and the input does not provide it (State does not declare it)"]


@pytest.mark.parametrize(("options", "how"), [
    ({"input_template": "{facts.main}"}, "input template"),
    ({"reads": ["facts"]}, "reads"),
    ({"input_key": "facts"}, "input_key"),
])
def test_agent_reads_are_checked(options: dict[str, Any], how: str) -> None:
    b = WorkflowBuilder("flow", state=State)
    b.add_agent("a", model(), instructions="", **options)
    wire(b, "a")
    [problem] = problems(b)
    assert f"node 'a' reads 'facts' ({how})" in problem


def test_consumes_on_a_function_node_is_checked() -> None:
    b = WorkflowBuilder("flow", state=State)
    b.add_node("f", fn, consumes=["sources"])
    wire(b, "f")
    assert "node 'f' reads 'sources' (consumes=)" in problems(b)[0]


def test_declared_fields_count_as_provided_by_the_input() -> None:
    b = WorkflowBuilder("flow", state=State)
    b.add_agent("a", model(), instructions="{topic} {summary}", reads=["draft"],
                input_key="question", output_key="answer")
    wire(b, "a").build()


def test_shared_input_is_always_provided() -> None:
    b = WorkflowBuilder("flow", state=State)
    b.add_agent("a", model(), instructions="{shared.input}")
    wire(b, "a").build()


def test_reads_are_not_checked_on_a_free_form_blackboard() -> None:
    b = WorkflowBuilder("flow", state=FreeBlackboard)
    b.add_agent("a", model(), instructions="{anything}", reads=["whatever"])
    wire(b, "a").build()


# --- writes ----------------------------------------------------------------------------


class Classification(BaseModel):
    label: str
    Urgency: int


def test_structured_output_fields_must_be_declared() -> None:
    b = WorkflowBuilder("flow", state=State)
    b.add_agent("classify", model(), instructions="", output=Classification)
    wire(b, "classify")
    assert problems(b) == [
        "node 'classify' writes 'label' (agent output), but State does not declare it",
        "node 'classify' writes 'urgency' (agent output), but State does not declare it",
        "node 'classify' writes 'result' (agent output), but State does not declare it"]


def test_union_output_also_writes_matched_type() -> None:
    class Other(BaseModel):
        note: str

    class Typed(Blackboard):
        label: str = ""
        urgency: int = 0
        note: str = ""
        result: Any = None

    b = WorkflowBuilder("flow", state=Typed)
    b.add_agent("classify", model(), instructions="", output=(Classification, Other))
    wire(b, "classify")
    assert problems(b) == [
        "node 'classify' writes 'matched_type' (agent output), but Typed does not declare it"]


def test_produces_and_transforms_must_write_declared_fields() -> None:
    b = WorkflowBuilder("flow", state=State)
    b.add_node("f", fn, produces=["answer", "answr"])
    b.add_transform("t", rename(draft="text"))
    wire(b, "f", "t")
    assert problems(b) == [
        "node 'f' writes 'answr' (produces=), but State does not declare it",
        "node 't' writes 'text' (transform), but State does not declare it"]


# --- parallel last-write-wins writes -----------------------------------------------------


def test_two_parallel_agents_writing_the_same_field_is_an_error() -> None:
    b = WorkflowBuilder("flow", state=State)
    b.add_node("start", fn)
    b.add_agent("pro", model(), instructions="Argue for {topic}.")
    b.add_agent("con", model(), instructions="Argue against {topic}.")
    b.set_entry("start")
    b.add_edge("start", "pro")
    b.add_edge("start", "con")
    assert problems(b) == [
        "nodes 'con' and 'pro' can run in the same superstep and both write the "
        "last-write-wins field 'answer'; give it a reducer (e.g. Annotated[..., append]) "
        "or let only one of them write it"]


def test_parallel_writes_to_a_reducer_field_are_fine() -> None:
    b = WorkflowBuilder("flow", state=State)
    b.add_node("start", fn)
    b.add_node("a", fn, produces=["log"])
    b.add_node("c", fn, produces=["log"])
    b.set_entry("start")
    b.add_edge("start", "a")
    b.add_edge("start", "c")
    b.build()


def test_a_function_node_without_produces_never_causes_an_error() -> None:
    b = WorkflowBuilder("flow", state=State)
    b.add_node("start", fn)
    b.add_node("a", lambda s: {"answer": "x"})
    b.add_node("c", fn, produces=["answer"])
    b.add_agent("d", model(), instructions="{topic}")
    b.set_entry("start")
    for t in ("a", "c"):
        b.add_edge("start", t)
    b.add_edge("a", "d")
    b.build()


def test_alternative_routes_are_not_parallel() -> None:
    b = WorkflowBuilder("flow", state=State)
    b.add_node("router", fn, goto=["x", "y"])
    b.add_agent("a", model(), instructions="")
    b.add_agent("c", model(), instructions="")
    b.add_agent("x", model(), instructions="")
    b.add_agent("y", model(), instructions="")
    b.add_node("start", fn)
    b.set_entry("start")
    b.add_switch("start", [("topic == 'a'", "a")], default="router")
    b.add_edge("a", "c", when="question != ''")
    b.add_edge("a", "x", when="question == ''")
    b.build()


def test_parallel_branches_one_step_apart_are_found() -> None:
    # start -> (a, b); a -> a2; b -> b2: a2 and b2 run together in superstep 3
    b = WorkflowBuilder("flow", state=State)
    for n in ("start", "a", "b"):
        b.add_node(n, fn)
    b.add_node("a2", fn, produces=["summary"])
    b.add_transform("b2", rename(draft="summary"))
    b.set_entry("start")
    b.add_edge("start", "a")
    b.add_edge("start", "b")
    b.add_edge("a", "a2")
    b.add_edge("b", "b2")
    [problem] = problems(b)
    assert problem.startswith("nodes 'a2' and 'b2' can run in the same superstep")


def test_a_join_target_runs_alongside_what_runs_with_its_sources() -> None:
    b = WorkflowBuilder("flow", state=State)
    for n in ("start", "a", "b", "side"):
        b.add_node(n, fn)
    b.add_node("join", fn, produces=["answer"])
    b.add_node("after_side", fn, produces=["answer"])
    b.set_entry("start")
    for t in ("a", "b", "side"):
        b.add_edge("start", t)
    b.add_fan_in(["a", "b"], "join")
    b.add_edge("side", "after_side")
    [problem] = problems(b)
    assert "nodes 'after_side' and 'join'" in problem


def test_a_join_of_sources_finishing_apart_is_not_paired() -> None:
    # start -> a, c; c -> e; join(a, e) -> d. d runs after e, never with it.
    b = WorkflowBuilder("flow", state=State)
    for n in ("start", "a", "c"):
        b.add_node(n, fn)
    b.add_node("e", fn, produces=["answer"])
    b.add_node("d", fn, produces=["answer"])
    b.set_entry("start")
    b.add_edge("start", "a")
    b.add_edge("start", "c")
    b.add_edge("c", "e")
    b.add_fan_in(["a", "e"], "d")
    wf = b.build()
    assert ("d", "e") not in parallel_pairs(wf)


def test_a_skipped_node_passes_its_parallelism_on() -> None:
    # when maybe is skipped, a is scheduled in its place, next to c
    b = WorkflowBuilder("flow", state=State)
    b.add_node("start", fn)
    b.add_node("maybe", fn, skip_if="topic == ''")
    b.add_node("a", fn, produces=["answer"])
    b.add_node("c", fn, produces=["answer"])
    b.set_entry("start")
    b.add_edge("start", "maybe")
    b.add_edge("start", "c")
    b.add_edge("maybe", "a")
    [problem] = problems(b)
    assert problem.startswith("nodes 'a' and 'c' can run in the same superstep")


def test_every_problem_is_reported_at_once() -> None:
    b = WorkflowBuilder("flow", state=State)
    b.add_node("start", fn)
    b.add_agent("pro", model(), instructions="{nope}", tools=[42])  # type: ignore[list-item]
    b.add_agent("con", model(), instructions="", history="all")  # type: ignore[arg-type]
    b.set_entry("start")
    b.add_edge("start", "pro")
    b.add_edge("start", "con")
    got = problems(b)
    assert len(got) == 4
    assert any("agent 'pro': tool 42" in p for p in got)
    assert any("history must be one of node, global, none" in p for p in got)
    assert any("reads 'nope'" in p for p in got)
    assert any("both write the last-write-wins field 'answer'" in p for p in got)


# --- explain ---------------------------------------------------------------------------


def lookup(key: str) -> str:
    """Look something up."""
    return key


def test_explain_lists_each_node() -> None:
    b = WorkflowBuilder("explained", state=State)
    b.add_node("start", fn)
    b.add_agent("research", ScriptedModel([], name="gpt-x"), instructions="{topic}",
                tools=[lookup], output_key="draft", history="global")
    b.add_transform("keep", pick("draft", "topic"))
    b.add_node("publish", fn, produces=["answer"], consumes=["draft"])
    b.set_entry("start")
    b.add_edge("start", "research")
    b.add_switch("research", [("draft == ''", "research")], default="keep")
    b.add_edge("keep", "publish")
    b.add_edge("publish", END)
    text = b.build().explain()
    assert text.splitlines() == [
        "workflow 'explained' on State (entry: start)",
        "start [function]",
        "  reads: -",
        "  writes: any field (no produces=)",
        "  next: research",
        "research [agent]",
        "  model: gpt-x  history: global  tools: lookup",
        "  reads: topic",
        "  writes: messages, draft",
        "  next: switch(draft == '' -> research; default -> keep)",
        "keep [transform]",
        "  steps: pick(draft, topic)",
        "  reads: -",
        "  writes: any field",
        "  next: publish",
        "publish [function]",
        "  reads: draft",
        "  writes: answer",
        "  next: END",
    ]
