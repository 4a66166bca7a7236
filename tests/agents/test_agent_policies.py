"""Agent policies: handoffs (transfer tools, exactly one, routing with the model's reason),
context (window, user_only, from_state, none, combined with +) and output repair rounds."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from durable_flow import (
    END,
    Blackboard,
    Message,
    RunStatus,
    Runtime,
    ToolCall,
    WorkflowBuilder,
    WorkflowValidationError,
)
from durable_flow.agents.context import from_state, none, user_only, window
from durable_flow.testing import MemoryStore, ScriptedModel


class Desk(Blackboard):
    question: str = ""
    answer: str = ""
    plan: str = ""


def transfer(target: str, reason: str, call_id: str = "t1") -> Message:
    return Message.assistant(tool_calls=[ToolCall(id=call_id, name=f"transfer_to_{target}",
                                                  arguments={"reason": reason})])


def desk(triage: ScriptedModel, **options: Any) -> Any:
    b = WorkflowBuilder("desk", state=Desk)
    b.add_agent("triage", triage, instructions="Route.", handoffs=["billing", "support"],
                **options)
    b.add_agent("billing", ScriptedModel(lambda m: "billing here"), instructions="Bill.",
                history="global")
    b.add_agent("support", ScriptedModel(lambda m: "support here"), instructions="Help.")
    b.set_entry("triage")
    b.add_edge("billing", END)
    b.add_edge("support", END)
    return b.build()


async def test_a_handoff_routes_to_the_chosen_node_with_the_models_reason() -> None:
    triage = ScriptedModel([transfer("billing", "a refund question")])
    async with Runtime(MemoryStore()) as rt:
        r = await rt.run(desk(triage), {"question": "refund?"})
        history = await rt.history(r.run_id)
    assert r.status is RunStatus.COMPLETED, r.error
    assert r.state.answer == "billing here"
    assert [t.name for t in triage.calls[0].tools] == ["transfer_to_billing", "transfer_to_support"]
    assert any(c.routing_reason == "a refund question" for c in history)
    # the transfer is answered, so the next agent's global history is well formed
    assert [m.role for m in r.state.messages] == ["assistant", "tool", "assistant"]


@pytest.mark.parametrize("bad", [
    Message.assistant("I think billing"),
    Message.assistant(tool_calls=[ToolCall(id="a", name="transfer_to_billing", arguments={}),
                                  ToolCall(id="b", name="transfer_to_support", arguments={})]),
])
async def test_a_reply_that_does_not_hand_off_exactly_once_is_sent_back(bad: Message) -> None:
    triage = ScriptedModel([bad, transfer("support", "a bug")])
    async with Runtime(MemoryStore()) as rt:
        r = await rt.run(desk(triage), {"question": "it crashes"})
    assert r.status is RunStatus.COMPLETED, r.error
    assert r.state.answer == "support here"
    assert "exactly one of transfer_to_billing, transfer_to_support" in \
        triage.calls[1].messages[-1].content


async def test_a_handoff_that_never_comes_fails_the_node() -> None:
    triage = ScriptedModel(lambda m: "no idea")
    async with Runtime(MemoryStore()) as rt:
        r = await rt.run(desk(triage, output_retries=2), {"question": "?"})
    assert r.status is RunStatus.FAILED and r.error is not None
    assert r.error.type == "ModelError" and "hand off" in r.error.message
    assert len(triage.calls) == 3


def test_handoffs_to_unknown_nodes_and_with_output_are_build_errors() -> None:
    class Out(BaseModel):
        x: int

    b = WorkflowBuilder("bad", state=Desk)
    b.add_agent("triage", ScriptedModel([]), instructions="", handoffs=["nowhere"], output=Out)
    b.set_entry("triage")
    with pytest.raises(WorkflowValidationError) as info:
        b.build()
    text = str(info.value)
    assert "nowhere" in text and "drop output= or handoffs=" in text


# --- context ----------------------------------------------------------------------------


def test_context_policies_select_from_a_history() -> None:
    history = [Message.user("u1"), Message.assistant("a1"),
               Message.assistant(tool_calls=[ToolCall(id="c", name="f", arguments={})]),
               Message.tool("r", tool_call_id="c"), Message.user("u2"), Message.assistant("a2")]
    assert [m.content for m in window(2).select(history)] == ["u2", "a2"]
    assert [m.role for m in window(3).select(history)] == ["user", "assistant"]  # no orphan tool
    assert [m.content for m in user_only().select(history)] == ["u1", "u2"]
    assert [m.content for m in (window(1) + user_only()).select(history)] == ["u2"]
    assert (user_only() + window(1)) == (window(1) + user_only())
    assert none().select(history) == []
    assert (window(4) + window(2)).last == 2
    assert (window(2) + from_state("plan")).describe() == "window(2) + from_state('plan')"
    with pytest.raises(ValueError, match="whole number"):
        window(-1)


def test_a_window_wider_than_the_history_keeps_all_of_it() -> None:
    history = [Message.user("u1"), Message.assistant("a1"), Message.user("u2"),
               Message.assistant("a2")]
    for n in (4, 5, 8, 100):
        assert [m.content for m in window(n).select(history)] == ["u1", "a1", "u2", "a2"], n
    assert [m.content for m in window(3).select(history[:2])] == ["u1", "a1"]
    assert window(3).select([]) == []


class Chat(Blackboard):
    question: str = ""
    answer: str = ""
    plan: str = "walk the dog"
    rounds: int = 0


async def test_context_on_an_agent_shapes_what_the_model_sees() -> None:
    model = ScriptedModel(lambda m: f"reply {len(m)}")
    b = WorkflowBuilder("ctx", state=Chat)
    b.add_agent("talk", model, instructions="Talk.", context=window(2) + from_state("plan"))
    b.add_node("count", lambda s: {"rounds": s.rounds + 1, "question": f"q{s.rounds + 1}"})
    b.set_entry("talk")
    b.add_edge("talk", "count")
    b.add_edge("count", "talk", when="rounds < 3")
    b.add_edge("count", END, when="rounds >= 3")
    async with Runtime(MemoryStore()) as rt:
        r = await rt.run(b.build(), {"question": "q0"})
    assert r.status is RunStatus.COMPLETED, r.error
    last = model.calls[-1].messages
    assert last[0].role == "system" and "- plan: walk the dog" in last[0].content
    assert [m.content for m in last[1:]] == ["q1", "reply 4", "q2"]  # window(2) + the new input


async def test_context_none_sends_only_instructions_and_input() -> None:
    model = ScriptedModel(lambda m: "ok")
    b = WorkflowBuilder("ctx", state=Chat)
    b.add_agent("talk", model, instructions="Talk.", history="global", context=none())
    b.set_entry("talk")
    b.add_edge("talk", END)
    async with Runtime(MemoryStore()) as rt:
        await rt.run(b.build(), {"question": "hi", "messages": [Message.user("old")]})
    assert [m.content for m in model.calls[0].messages] == ["Talk.", "hi"]


# --- output repair rounds -------------------------------------------------------------------


class Verdict(BaseModel):
    label: str


class Graded(Blackboard):
    question: str = ""
    label: str = ""
    result: Verdict | None = None


async def test_a_reply_that_breaks_the_schema_is_sent_back_once_with_the_error() -> None:
    model = ScriptedModel(['{"wrong": 1}', '{"label": "fine"}'])
    b = WorkflowBuilder("repair", state=Graded)
    b.add_agent("grade", model, instructions="Grade.", output=Verdict)
    b.set_entry("grade")
    b.add_edge("grade", END)
    async with Runtime(MemoryStore()) as rt:
        r = await rt.run(b.build(), {"question": "?"})
    assert r.status is RunStatus.COMPLETED, r.error
    assert r.state.label == "fine" and len(model.calls) == 2
    fix = model.calls[1].messages[-1]
    assert fix.role == "user" and "label: Field required" in fix.content
    assert model.calls[1].messages[-2].content == '{"wrong": 1}'


async def test_output_retries_zero_fails_at_the_first_bad_reply() -> None:
    model = ScriptedModel(['{"wrong": 1}', '{"label": "fine"}'])
    b = WorkflowBuilder("repair", state=Graded)
    b.add_agent("grade", model, instructions="Grade.", output=Verdict, output_retries=0)
    b.set_entry("grade")
    b.add_edge("grade", END)
    async with Runtime(MemoryStore()) as rt:
        r = await rt.run(b.build(), {"question": "?"})
    assert r.status is RunStatus.FAILED and len(model.calls) == 1


# --- the declarative format -------------------------------------------------------------------


def declared(**triage: Any) -> dict[str, Any]:
    return {"name": "desk", "nodes": [
        {"id": "triage", "agent_name": "triage", "is_entry": True, **triage},
        {"id": "billing", "agent_name": "billing", "is_exit": True},
        {"id": "support", "agent_name": "support", "is_exit": True}], "connections": []}


def registry(triage: ScriptedModel) -> dict[str, Any]:
    from durable_flow import Agent

    return {"triage": Agent(triage, "Route."),
            "billing": Agent(ScriptedModel(lambda m: "billing here"), "Bill."),
            "support": Agent(ScriptedModel(lambda m: f"support saw {len(m)}"), "Help.")}


async def test_a_declarative_agent_node_takes_handoffs_and_context() -> None:
    from durable_flow import dump_workflow, load_workflow

    triage = ScriptedModel([transfer("support", "a bug")])
    d = declared(handoffs=["billing", "support"], context="window(4) + from_state('plan')")
    wf = load_workflow(d, registry(triage))
    async with Runtime(MemoryStore()) as rt:
        r = await rt.run(wf, {"question": "it crashes", "plan": "p1"})
    assert r.status is RunStatus.COMPLETED, r.error
    assert r.state.answer.startswith("support saw")
    assert "- plan: p1" in triage.calls[0].messages[0].content
    node = next(n for n in dump_workflow(wf)["nodes"] if n["id"] == "triage")
    assert node["handoffs"] == ["billing", "support"]
    assert node["context"] == "window(4) + from_state('plan')"
    again = load_workflow(dump_workflow(wf), registry(ScriptedModel([])))
    assert again.nodes["triage"].goto == ("billing", "support")


@pytest.mark.parametrize(("options", "problem"), [
    ({"context": "window(x)"}, "nodes[0].context: window(x) takes a whole number"),
    ({"context": "everything()"}, "nodes[0].context: 'everything()' is not window(N)"),
    ({"context": 3}, "nodes[0].context: must be a string"),
    ({"handoffs": "billing"}, "nodes[0].handoffs: must be a list of node ids"),
])
def test_bad_agent_options_in_a_file_are_located_problems(options: dict[str, Any],
                                                          problem: str) -> None:
    from durable_flow import load_workflow

    with pytest.raises(WorkflowValidationError) as info:
        load_workflow(declared(**options), registry(ScriptedModel([])))
    assert any(p.startswith(problem) for p in info.value.problems), info.value.problems
