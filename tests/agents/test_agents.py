"""Agent nodes: input resolution, templates, output, history, tools and durability."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Annotated, Any, Literal

import forkrun
import pytest
from pydantic import BaseModel

from durable_flow import (
    END,
    Agent,
    Blackboard,
    Message,
    ModelError,
    NodeContext,
    RetryPolicy,
    RunLockedError,
    RunStatus,
    Runtime,
    ToolCall,
    WorkflowBuilder,
    append,
)
from durable_flow.model._blackboard import FreeBlackboard
from durable_flow.testing import MemoryStore, ScriptedModel

ROOT = Path(__file__).resolve().parents[2]
NO_RETRY_DELAY = {"initial_delay": 0.0, "jitter": False}


def calls(*pairs: tuple[str, dict[str, Any]], prefix: str = "c") -> Message:
    """An assistant message calling tools: ``calls(("lookup", {"q": 1}), ...)``."""
    return Message.assistant(tool_calls=[
        ToolCall(id=f"{prefix}{i}", name=name, arguments=args)
        for i, (name, args) in enumerate(pairs, 1)])


def one_agent(state: type[Blackboard], model: Any, **options: Any) -> Any:
    b = WorkflowBuilder("one", state=state)
    options.setdefault("instructions", "Be brief.")
    b.add_agent("ask", model, **options)
    b.set_entry("ask")
    b.add_edge("ask", END)
    return b.build()


class Q(Blackboard):
    question: str = ""
    answer: str = ""
    reply: str = ""


# --- basic text output ---------------------------------------------------------------


async def test_text_reply_goes_to_answer_and_the_global_messages(rt: Runtime) -> None:
    model = ScriptedModel(["Paris."])
    wf = one_agent(Q, model, instructions="You answer geography questions.")
    r = await rt.run(wf, {"question": "Capital of France?"})
    assert r.status is RunStatus.COMPLETED, r.error
    assert r.state.answer == "Paris."
    [reply] = r.state.messages
    assert (reply.role, reply.content, reply.name) == ("assistant", "Paris.", "ask")
    assert reply.metadata["usage"] == {"input_tokens": 7, "output_tokens": 1}
    assert reply.metadata["model"] == "scripted"
    [call] = model.calls
    assert [(m.role, m.content) for m in call.messages] == [
        ("system", "You answer geography questions."), ("user", "Capital of France?")]
    assert call.tools == [] and call.output_schema is None


async def test_output_key_receives_the_text(rt: Runtime) -> None:
    wf = one_agent(Q, ScriptedModel(["hi"]), output_key="reply")
    r = await rt.run(wf, {"question": "?"})
    assert (r.state.reply, r.state.answer) == ("hi", "")


async def test_system_prompt_is_not_stored_and_input_and_reply_go_to_the_node_history(
        rt: Runtime) -> None:
    wf = one_agent(Q, ScriptedModel(["Paris."]), instructions="SYSTEM PROMPT")
    r = await rt.run(wf, {"question": "Capital?"})
    snap = await rt.get_state(r.run_id)
    assert [m["role"] for m in snap.values["messages"]] == ["assistant"]
    assert [(m.role, m.content) for m in snap.node_histories["ask"]] == [
        ("user", "Capital?"), ("assistant", "Paris.")]
    assert all("SYSTEM PROMPT" not in m.content for m in snap.node_histories["ask"])


# --- input resolution ------------------------------------------------------------------


class Board(Blackboard):
    shared: dict[str, Any] = {}
    question: str = ""
    input: str = ""
    message: str = ""
    query: str = ""
    prompt: str = ""
    ask: dict[str, Any] = {}
    topic: str = ""
    key: str = ""
    note: str = ""
    count: int = 0


FULL = {"shared": {"input": "shared-input"}, "question": "question", "input": "input",
        "message": "message", "query": "query", "prompt": "prompt",
        "ask": {"input": "node-input"}, "topic": "topic"}
LEVELS = ["shared", "question", "input", "message", "query", "prompt", "ask"]
EXPECTED = {"shared": "shared-input", "question": "question", "input": "input",
            "message": "message", "query": "query", "prompt": "prompt", "ask": "node-input"}


async def resolved_input(run_input: dict[str, Any], upstream: dict[str, Any] | None = None,
                         **options: Any) -> str:
    """Run ``pre`` (writes ``upstream``) then the agent ``ask``; return the user message."""
    model = ScriptedModel(["ok"])
    b = WorkflowBuilder("inputs", state=Board)
    b.add_node("pre", lambda state: upstream or {})
    b.add_agent("ask", model, instructions="", output_key="note", **options)
    b.set_entry("pre")
    b.add_edge("pre", "ask")
    async with Runtime(MemoryStore()) as rt:
        r = await rt.run(b.build(), run_input)
        assert r.status is RunStatus.COMPLETED, r.error
    return model.calls[0].messages[-1].content


async def test_input_template_wins_over_everything() -> None:
    got = await resolved_input({**FULL, "key": "k"}, input_template="T:{topic}", input_key="key")
    assert got == "T:topic"


async def test_input_key_comes_before_the_conventional_fields() -> None:
    assert await resolved_input({**FULL, "key": "k"}, input_key="key") == "k"


async def test_an_empty_input_key_falls_through() -> None:
    assert await resolved_input(FULL, input_key="key") == "shared-input"


@pytest.mark.parametrize("level", LEVELS)
async def test_input_resolution_order(level: str) -> None:
    # every source from ``level`` down is present; ``level`` must win
    present = {k: v for k, v in FULL.items() if k not in LEVELS[:LEVELS.index(level)]}
    assert await resolved_input(present) == EXPECTED[level]


async def test_then_the_original_input() -> None:
    # an upstream node overwrote the field the run started with
    got = await resolved_input({"topic": "tides"}, upstream={"topic": "", "key": "later"})
    assert got == "tides"


async def test_several_input_values_are_given_as_json() -> None:
    got = await resolved_input({"topic": "tides", "count": 3})
    assert json.loads(got) == {"topic": "tides", "count": 3}


async def test_then_the_first_string_an_upstream_node_wrote() -> None:
    assert await resolved_input({}, upstream={"key": "from-pre", "count": 2}) == "from-pre"


async def test_finally_the_empty_string_and_then_no_user_message_is_sent() -> None:
    model = ScriptedModel(["ok"])
    b = WorkflowBuilder("inputs", state=Board)
    b.add_agent("ask", model, instructions="Say something.", output_key="note")
    b.set_entry("ask")
    async with Runtime(MemoryStore()) as rt:
        r = await rt.run(b.build(), {})
        hist = (await rt.get_state(r.run_id)).node_histories["ask"]
    assert [m.role for m in model.calls[0].messages] == ["system"]
    assert [m.role for m in hist] == ["assistant"]


async def test_the_original_input_of_a_loop_stays_the_run_input(rt: Runtime) -> None:
    class Loop(Blackboard):
        topic: str = ""
        rounds: Annotated[list[str], append] = []
        answer: str = ""

    model = ScriptedModel(lambda msgs: "again")
    b = WorkflowBuilder("loop", state=Loop)
    b.add_agent("ask", model, instructions="")
    b.add_node("tick", lambda s: {"rounds": ["x"], "topic": "changed"})
    b.set_entry("ask")
    b.add_edge("ask", "tick")
    b.add_edge("tick", "ask", when=lambda s: len(s.rounds) < 2)
    r = await rt.run(b.build(), {"topic": "tides"})
    assert r.status is RunStatus.COMPLETED, r.error
    # topic is not a conventional input field: both visits get the run's input
    assert [c.messages[-1].content for c in model.calls] == ["tides", "tides"]


# --- templates -------------------------------------------------------------------------


class Profile(BaseModel):
    city: str
    zip: str | None = None


class Person(Blackboard):
    name: str = ""
    profile: Profile | None = None
    tags: list[str] = []
    answer: str = ""


async def test_templates_render_fields_and_paths_and_leave_missing_ones_literal(
        rt: Runtime) -> None:
    model = ScriptedModel(["ok"])
    wf = one_agent(Person, model,
                   instructions="Hi {name} from {profile.city} {profile.zip} {profile.country} {tags.1}",
                   input_template='{"name": "{name}"} {{name}} {profile}')
    r = await rt.run(wf, {"name": "Ada", "profile": {"city": "London"}, "tags": ["a", "b"]})
    assert r.status is RunStatus.COMPLETED, r.error
    system, user = model.calls[0].messages
    assert system.content == "Hi Ada from London {profile.zip} {profile.country} b"
    assert user.content == '{"name": "Ada"} {Ada} {"city":"London","zip":null}'


async def test_a_missing_field_on_a_free_form_blackboard_stays_literal(rt: Runtime) -> None:
    model = ScriptedModel(["ok"])
    wf = one_agent(FreeBlackboard, model, input_template="Dear {nickname}, about {topic}:")
    await rt.run(wf, {"topic": "tides"})
    assert model.calls[0].messages[-1].content == "Dear {nickname}, about tides:"


async def test_template_values_are_not_rendered_again(rt: Runtime) -> None:
    model = ScriptedModel(["ok"])
    wf = one_agent(Person, model, input_template="{name}")
    await rt.run(wf, {"name": "{answer} {__class__}"})
    assert model.calls[0].messages[-1].content == "{answer} {__class__}"


async def test_shared_input_in_a_template_is_the_run_input(rt: Runtime) -> None:
    model = ScriptedModel(["ok"])
    b = WorkflowBuilder("shared", state=Person)
    b.add_node("rename", lambda s: {"name": "Bob"}, produces=["name"])
    b.add_agent("ask", model, instructions="Originally: {shared.input}", input_template="{name}")
    b.set_entry("rename")
    b.add_edge("rename", "ask")
    await rt.run(b.build(), {"name": "Ada"})
    assert [m.content for m in model.calls[0].messages] == ["Originally: Ada", "Bob"]


# --- structured output -----------------------------------------------------------------


class Verdict(BaseModel):
    Label: str
    Confidence: float
    note: str | None = None


class Graded(Blackboard):
    question: str = ""
    label: str = ""
    confidence: float = 0.0
    note: str | None = None
    result: Verdict | None = None
    answer: str = ""


async def test_structured_output_is_flattened_into_lowercase_fields_and_result(
        rt: Runtime) -> None:
    model = ScriptedModel(['```json\n{"Label": "spam", "Confidence": 0.9}\n```'])
    wf = one_agent(Graded, model, output=Verdict)
    r = await rt.run(wf, {"question": "buy now!!!", "note": "kept"})
    assert r.status is RunStatus.COMPLETED, r.error
    s = r.state
    assert (s.label, s.confidence, s.note, s.answer) == ("spam", 0.9, "kept", "")
    assert s.result == Verdict(Label="spam", Confidence=0.9)
    assert model.calls[0].output_schema == Verdict.model_json_schema()


async def test_structured_output_on_a_free_form_blackboard(rt: Runtime) -> None:
    wf = one_agent(FreeBlackboard, ScriptedModel(['{"Label": "ham", "Confidence": 1}']),
                   output=Verdict)
    r = await rt.run(wf, {"question": "hello"})
    extra = r.state.model_extra
    assert extra["label"] == "ham" and extra["confidence"] == 1.0
    assert extra["result"] == {"Label": "ham", "Confidence": 1.0, "note": None}
    assert "note" not in extra


class Refund(BaseModel):
    amount: float
    reason: str


class Bug(BaseModel):
    component: str
    reason: str


class Chat(BaseModel):
    reason: str


class Routed(Blackboard):
    question: str = ""
    amount: float = 0
    component: str = ""
    reason: str = ""
    result: Refund | Bug | Chat | None = None
    matched_type: str | None = None
    handled_by: str = ""


def handler(name: str) -> Any:
    return lambda state: {"handled_by": name}


def routed_workflow(model: Any) -> Any:
    b = WorkflowBuilder("routed", state=Routed)
    b.add_agent("classify", model, instructions="Classify.", output=(Refund, Bug, Chat))
    for name in ("refunds", "bugs", "chat"):
        b.add_node(name, handler(name), produces=["handled_by"])
        b.add_edge(name, END)
    b.set_entry("classify")
    b.route_by_type("classify", {Refund: "refunds", "Bug": "bugs"}, default="chat")
    return b.build()


@pytest.mark.parametrize(("reply", "matched", "target"), [
    ({"amount": 12.5, "reason": "double charge"}, "Refund", "refunds"),
    ({"component": "login", "reason": "500 error"}, "Bug", "bugs"),
    ({"reason": "just saying hi"}, "Chat", "chat"),
])
async def test_union_output_sets_matched_type_and_route_by_type_routes_on_it(
        rt: Runtime, reply: dict[str, Any], matched: str, target: str) -> None:
    model = ScriptedModel([json.dumps(reply)])
    r = await rt.run(routed_workflow(model), {"question": "..."})
    assert r.status is RunStatus.COMPLETED, r.error
    assert (r.state.matched_type, r.state.handled_by) == (matched, target)
    assert type(r.state.result).__name__ == matched
    assert {s["title"] for s in model.calls[0].output_schema["$defs"].values()} == {
        "Refund", "Bug", "Chat"}


async def test_an_unparsable_reply_is_retried_per_the_retry_policy(rt: Runtime) -> None:
    model = ScriptedModel(["not json at all", '{"Label": "ok", "Confidence": 1}'])
    wf = one_agent(Graded, model, output=Verdict,
                   retry=RetryPolicy(max_attempts=2, **NO_RETRY_DELAY))
    r = await rt.run(wf, {"question": "?"})
    assert r.status is RunStatus.COMPLETED, r.error
    assert r.state.label == "ok" and len(model.calls) == 2


async def test_a_reply_that_never_parses_fails_the_run_with_the_raw_reply(rt: Runtime) -> None:
    model = ScriptedModel(lambda msgs: '{"Label": "no confidence"}')
    wf = one_agent(Graded, model, output=Verdict,
                   retry=RetryPolicy(max_attempts=3, **NO_RETRY_DELAY))
    r = await rt.run(wf, {"question": "?"})
    # the first reply is recorded and sent back once (output_retries=1); each of the three
    # attempts replays it and asks for the repair again, which is never recorded
    assert r.status is RunStatus.FAILED and len(model.calls) == 4
    assert r.error is not None and r.error.type == "ModelError" and r.error.node == "ask"
    assert '{"Label": "no confidence"}' in r.error.message
    assert "Confidence" in r.error.message


# --- history ---------------------------------------------------------------------------


class Convo(Blackboard):
    question: str = ""
    topic: str = "tides"
    answer: str = ""
    other: str = ""
    turns: Annotated[list[str], append] = []


def loop_workflow(model: Any, **options: Any) -> Any:
    """opener (another agent) -> ask -> tick -> ask (second visit) -> END."""
    b = WorkflowBuilder("hist", state=Convo)
    b.add_agent("opener", ScriptedModel(lambda m: "opener says hi"), instructions="",
                output_key="other")
    b.add_agent("ask", model, instructions="SYS", **options)
    b.add_node("tick", lambda s: {"turns": ["t"], "question": "second?"})
    b.set_entry("opener")
    b.add_edge("opener", "ask")
    b.add_edge("ask", "tick")
    b.add_edge("tick", "ask", when=lambda s: len(s.turns) < 2)
    return b.build()


def seen(model: ScriptedModel, call: int) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in model.calls[call].messages]


async def test_node_history_shows_the_agents_own_earlier_turns(rt: Runtime) -> None:
    model = ScriptedModel(["a1", "a2", "a3"])
    await rt.run(loop_workflow(model), {"question": "first?"})
    assert seen(model, 1) == [("system", "SYS"), ("user", "first?"), ("assistant", "a1"),
                              ("user", "second?")]


async def test_global_history_shows_the_global_messages(rt: Runtime) -> None:
    model = ScriptedModel(["a1", "a2", "a3"])
    await rt.run(loop_workflow(model, history="global"), {"question": "first?"})
    assert seen(model, 0) == [("system", "SYS"), ("assistant", "opener says hi"),
                              ("user", "first?")]
    assert seen(model, 1)[1:] == [("assistant", "opener says hi"), ("assistant", "a1"),
                                  ("user", "second?")]


async def test_no_history(rt: Runtime) -> None:
    model = ScriptedModel(["a1", "a2", "a3"])
    await rt.run(loop_workflow(model, history="none"), {"question": "first?"})
    assert seen(model, 1) == [("system", "SYS"), ("user", "second?")]


async def test_reads_inject_a_context_block_and_imply_no_history(rt: Runtime) -> None:
    model = ScriptedModel(["a1", "a2", "a3"])
    await rt.run(loop_workflow(model, reads=["topic", "other"]), {"question": "first?"})
    assert seen(model, 1) == [
        ("system", "SYS\n\nContext:\n- topic: tides\n- other: opener says hi"),
        ("user", "second?")]


async def test_reads_with_keep_history(rt: Runtime) -> None:
    model = ScriptedModel(["a1", "a2", "a3"])
    await rt.run(loop_workflow(model, reads=["topic"], keep_history=True),
                 {"question": "first?"})
    assert [r for r, _ in seen(model, 1)] == ["system", "user", "assistant", "user"]


# --- tools -----------------------------------------------------------------------------


class Desk(Blackboard):
    question: str = ""
    answer: str = ""


def weather(city: str, days: int = 1) -> str:
    """Forecast for a city.

    Longer text the model does not need.
    """
    return f"sunny in {city} for {days} day(s)"


async def population(city: str) -> dict[str, Any]:
    """How many people live in a city."""
    return {"city": city, "people": 8_800_000}


async def test_tools_get_a_schema_and_their_results_are_tool_messages(rt: Runtime) -> None:
    model = ScriptedModel([
        calls(("weather", {"city": "London", "days": 2}), ("population", {"city": "London"})),
        "Sunny, and 8.8M people.",
    ])
    wf = one_agent(Desk, model, tools=[weather, population])
    r = await rt.run(wf, {"question": "London?"})
    assert r.status is RunStatus.COMPLETED, r.error
    assert r.state.answer == "Sunny, and 8.8M people."
    spec = {t.name: t for t in model.calls[0].tools}
    assert spec["weather"].description == "Forecast for a city."
    assert spec["weather"].parameters["properties"]["days"]["type"] == "integer"
    assert spec["weather"].parameters["required"] == ["city"]
    snap = await rt.get_state(r.run_id)
    hist = snap.node_histories["ask"]
    assert [m.role for m in hist] == ["user", "assistant", "tool", "tool", "assistant"]
    assert hist[2].content == "sunny in London for 2 day(s)"
    assert (hist[2].tool_call_id, hist[2].name) == ("c1", "weather")
    assert json.loads(hist[3].content) == {"city": "London", "people": 8800000}
    assert [m["role"] for m in snap.values["messages"]] == ["assistant"]
    assert [m.role for m in model.calls[1].messages][-3:] == ["assistant", "tool", "tool"]


async def test_bad_tool_calls_are_answered_with_an_error_the_model_can_read(
        rt: Runtime) -> None:
    model = ScriptedModel([
        calls(("nope", {}), ("weather", {"days": "many"})),
        "sorry",
    ])
    r = await rt.run(one_agent(Desk, model, tools=[weather]), {"question": "?"})
    assert r.status is RunStatus.COMPLETED, r.error
    tool_msgs = [m.content for m in model.calls[1].messages if m.role == "tool"]
    assert tool_msgs[0].startswith("error: there is no tool 'nope'")
    assert "city: Field required" in tool_msgs[1] and "days" in tool_msgs[1]


async def test_too_many_tool_rounds_fail_the_node(rt: Runtime) -> None:
    model = ScriptedModel(lambda msgs: calls(("weather", {"city": "x"}),
                                             prefix=f"r{len(msgs)}-"))
    r = await rt.run(one_agent(Desk, model, tools=[weather], max_tool_rounds=2),
                     {"question": "?"})
    assert r.status is RunStatus.FAILED and r.error is not None
    assert "max_tool_rounds=2" in r.error.message and len(model.calls) == 3


async def test_a_repeated_tool_call_id_does_not_clash(rt: Runtime) -> None:
    model = ScriptedModel([calls(("weather", {"city": "a"})), calls(("weather", {"city": "b"})),
                           "done"])
    r = await rt.run(one_agent(Desk, model, tools=[weather]), {"question": "?"})
    assert r.status is RunStatus.COMPLETED, r.error


async def test_calls_that_share_one_id_in_one_reply_each_run_once(rt: Runtime) -> None:
    ran: list[str] = []

    def visit(city: str) -> str:
        """Visit a city."""
        ran.append(city)
        return f"visited {city}"

    same = Message.assistant(tool_calls=[ToolCall(id="c", name="visit", arguments={"city": c})
                                         for c in ("a", "b", "c")])
    model = ScriptedModel([same, calls(("visit", {"city": "d"}), prefix="c"), "done"])
    r = await rt.run(one_agent(Desk, model, tools=[visit]), {"question": "?"})
    assert r.status is RunStatus.COMPLETED, r.error
    assert ran == ["a", "b", "c", "d"]
    tools = [m for m in (await rt.get_state(r.run_id)).node_histories["ask"] if m.role == "tool"]
    assert [m.content for m in tools] == [f"visited {c}" for c in "abcd"]


async def test_a_crash_in_a_tool_loop_resumes_without_repeating_finished_calls(
        rt: Runtime) -> None:
    ran: list[str] = []
    failures = iter([True])

    def first(x: int) -> int:
        """Step one."""
        ran.append(f"first:{x}")
        return x + 1

    async def second(x: int) -> int:
        """Step two; crashes the first time."""
        ran.append(f"second:{x}")
        if next(failures, False):
            raise ConnectionError("the tool's backend went away")
        return x * 10

    model = ScriptedModel([
        calls(("first", {"x": 1}), ("first", {"x": 2}), prefix="a"),
        calls(("second", {"x": 3}), prefix="b"),
        "all done",
    ])
    wf = one_agent(Desk, model, tools=[first, second])
    r = await rt.run(wf, {"question": "go"})
    assert r.status is RunStatus.FAILED and r.error is not None
    assert "went away" in r.error.message
    assert ran == ["first:1", "first:2", "second:3"] and len(model.calls) == 2

    r = await rt.resume(wf, r.run_id)
    assert r.status is RunStatus.COMPLETED, r.error
    assert ran == ["first:1", "first:2", "second:3", "second:3"]
    assert len(model.calls) == 3  # rounds 0 and 1 were replayed, not asked again
    hist = (await rt.get_state(r.run_id)).node_histories["ask"]
    assert [m.content for m in hist if m.role == "tool"] == ["2", "3", "30"]


async def test_a_tool_can_ask_a_person_and_earlier_tool_calls_are_not_repeated(
        rt: Runtime) -> None:
    ran: list[str] = []

    def lookup(order: str) -> str:
        """Find an order."""
        ran.append("lookup")
        return f"{order}: 40 EUR"

    async def refund(order: str, amount: float, ctx: NodeContext) -> str:
        """Refund an order, after a person approves."""
        ran.append("refund-asked")
        ok = await ctx.request({"action": "refund", "order": order, "amount": amount},
                               response_type=bool)
        ran.append(f"refund-{ok}")
        return "refunded" if ok else "refused by a person"

    model = ScriptedModel([calls(("lookup", {"order": "A1"})),
                           calls(("refund", {"order": "A1", "amount": 40}), prefix="r"),
                           "Refunded 40 EUR."])
    wf = one_agent(Desk, model, tools=[lookup, refund])
    r = await rt.run(wf, {"question": "refund A1"})
    assert r.status is RunStatus.WAITING, r.error
    [req] = r.pending_requests
    assert req.payload == {"action": "refund", "order": "A1", "amount": 40.0}
    assert req.node == "ask"
    r = await rt.resume(wf, r.run_id, responses={req.id: True})
    assert r.status is RunStatus.COMPLETED, r.error
    assert r.state.answer == "Refunded 40 EUR."
    assert ran == ["lookup", "refund-asked", "refund-asked", "refund-True"]
    assert len(model.calls) == 3


# --- the Agent value -------------------------------------------------------------------


async def test_an_agent_value_gives_a_node_spec_for_loaders(rt: Runtime) -> None:
    agent = Agent(ScriptedModel(["hey"]), instructions="{question}", tools=[weather],
                  output_key="answer")
    spec = agent.node_spec("greeter")
    assert spec.kind == "agent" and spec.takes_ctx
    assert spec.meta["tools"] == ("weather",) and spec.meta["history"] == "node"
    assert spec.produces == ("messages", "answer") and spec.consumes == ("question",)
    b = WorkflowBuilder("spec", state=Q)
    b.add_spec(spec)
    b.set_entry("greeter")
    r = await rt.run(b.build(), {"question": "hello"})
    assert r.state.answer == "hey"


def test_explain_names_model_history_tools_reads_and_writes() -> None:
    text = one_agent(Desk, ScriptedModel([], name="gpt-test"), tools=[weather],
                     input_template="{question}").explain()
    assert "ask [agent]" in text
    assert "model: gpt-test" in text and "history: node" in text and "tools: weather" in text
    assert "reads: question" in text and "writes: messages, answer" in text


# --- the example -----------------------------------------------------------------------


@pytest.mark.process
def test_the_triage_example_runs_offline() -> None:
    proc = forkrun.run([ROOT / "examples" / "triage_agents.py"], timeout=120, cwd=ROOT,
                       plain=True)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "-> Outage: email is down" in out and "degraded since 09:12 UTC" in out
    assert "-> Billing: double charge on an invoice" in out
    assert "-> Other: general question" in out


# --- a real crash ----------------------------------------------------------------------

FLOW = '''
import os, signal, sys
from pathlib import Path
from durable_flow import END, Blackboard, Message, ToolCall, WorkflowBuilder
from durable_flow.testing import ScriptedModel

LOG = Path(os.environ["AGENT_LOG"])


def note(line):
    with LOG.open("a") as fh:
        fh.write(line + "\\n")
        fh.flush()
        os.fsync(fh.fileno())


class Desk(Blackboard):
    question: str = ""
    answer: str = ""


def charge(amount: int) -> str:
    """Charge a card (a side effect that must not happen twice)."""
    note("charge")
    return f"charged {amount}"


def notify(text: str) -> str:
    """Tell the customer."""
    note("notify")
    if os.environ.get("AGENT_DIE") == "1":
        os.kill(os.getpid(), signal.SIGKILL)
    return "sent"


def script(messages):
    note("model")
    done = [m for m in messages if m.role == "tool"]
    if not done:
        return Message.assistant(tool_calls=[ToolCall(id="c1", name="charge",
                                                      arguments={"amount": 5})])
    if len(done) == 1:
        return Message.assistant(tool_calls=[ToolCall(id="c2", name="notify",
                                                      arguments={"text": "ok"})])
    return "charged and notified"


def workflow():
    b = WorkflowBuilder("agent-crash", state=Desk)
    b.add_agent("desk", ScriptedModel(script), instructions="", tools=[charge, notify])
    b.set_entry("desk")
    b.add_edge("desk", END)
    return b.build()


async def child(db, run_id):
    from durable_flow import Runtime
    from durable_flow.store.sqlite._sqlite import SqliteStore
    async with Runtime(SqliteStore(db)) as rt:  # the parent takes a killed holder's lease at once
        await rt.run(workflow(), {"question": "charge me"}, run_id=run_id)


if __name__ == "__main__":
    import asyncio
    asyncio.run(child(sys.argv[1], sys.argv[2]))
'''


@pytest.mark.crash
async def test_a_sigkilled_tool_loop_resumes_without_repeating_finished_tool_calls(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import durable_flow.store.sqlite._sqlite as sqlite
    script, log, db = tmp_path / "agent_flow.py", tmp_path / "exec.log", tmp_path / "runs.db"
    script.write_text(textwrap.dedent(FLOW))
    env = {**os.environ, "AGENT_LOG": str(log), "AGENT_DIE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(script), str(db), "r1"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert log.read_text().split() == ["model", "charge", "model", "notify"]

    monkeypatch.setenv("AGENT_LOG", str(log))
    monkeypatch.syspath_prepend(str(tmp_path))
    import agent_flow

    async with Runtime(sqlite.SqliteStore(db)) as rt:
        for _ in range(100):
            try:
                r = await rt.resume(agent_flow.workflow(), "r1")
                break
            except RunLockedError:
                await asyncio.sleep(0.1)
        assert r.status is RunStatus.COMPLETED, r.error
        assert r.state.answer == "charged and notified"
    # the charge ran once; the model was not asked again for the rounds it had answered
    assert log.read_text().split() == ["model", "charge", "model", "notify", "notify", "model"]


# --- literal types survive a round trip through the store ------------------------------


class Level(BaseModel):
    level: Literal["low", "high"]


async def test_structured_output_survives_a_wait_and_resume(rt: Runtime) -> None:
    class Leveled(Blackboard):
        question: str = ""
        level: str = ""
        result: Level | None = None
        approved: bool = False

    b = WorkflowBuilder("lvl", state=Leveled)
    b.add_agent("grade", ScriptedModel(['{"level": "high"}']), instructions="", output=Level)

    @b.node(produces=["approved"])
    async def approve(state: Leveled, ctx: NodeContext) -> dict[str, Any]:
        return {"approved": await ctx.request({"level": state.level}, response_type=bool)}

    b.set_entry("grade")
    b.add_edge("grade", "approve")
    wf = b.build()
    r = await rt.run(wf, {"question": "?"})
    r = await rt.resume(wf, r.run_id, responses={r.pending_requests[0].id: True})
    assert r.status is RunStatus.COMPLETED, r.error
    assert r.state.result == Level(level="high") and r.state.approved


def test_model_errors_are_durable_flow_errors() -> None:
    err = ModelError("bad", raw="{oops")
    assert err.raw == "{oops" and "{oops" in str(err)
