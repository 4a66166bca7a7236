"""Misuse raises at once, as a DurableFlowError subclass whose message names the bad thing.

Argument misuse (a ``RetryPolicy`` value, a store option, run input that is
not a mapping) raises ``InvalidInputError``, which is also a ``ValueError``.
Builder misuse is collected and reported by ``build()`` as one
``WorkflowValidationError`` listing every problem. Bad input changes nothing
that was stored.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from durable_flow import (
    END,
    Blackboard,
    DurableFlowError,
    InvalidInputError,
    NodeContext,
    RetryPolicy,
    RunStatus,
    Runtime,
    SqliteStore,
    Workflow,
    WorkflowBuilder,
    WorkflowValidationError,
    append,
)
from durable_flow.engine._state import input_values
from durable_flow.model._blackboard import schema_for
from durable_flow.testing import ScriptedModel
from durable_flow.transforms import rename


class Doc(Blackboard):
    topic: str = ""
    draft: str = ""
    log: Annotated[list[str], append] = []


def noop(state: Doc) -> None:
    return None


def base(name: str = "misuse") -> WorkflowBuilder:
    """A valid builder: one node 'a' that ends the run."""
    b = WorkflowBuilder(name, state=Doc)
    b.add_node("a", noop).set_entry("a").add_edge("a", END)
    return b


def problems_of(b: WorkflowBuilder) -> list[str]:
    with pytest.raises(WorkflowValidationError) as info:
        b.build()
    assert isinstance(info.value, DurableFlowError)
    assert info.value.problems and all(p in str(info.value) for p in info.value.problems)
    return info.value.problems


def only_problem(b: WorkflowBuilder, *needles: str) -> str:
    """The single problem of ``b`` (no follow-up noise), containing every needle."""
    problems = problems_of(b)
    assert len(problems) == 1, problems
    for needle in needles:
        assert needle in problems[0], (needle, problems[0])
    return problems[0]


# ---------------------------------------------------------------------------
# InvalidInputError is a DurableFlowError and a ValueError
# ---------------------------------------------------------------------------


def test_invalid_input_error_is_also_a_value_error() -> None:
    assert issubclass(InvalidInputError, DurableFlowError)
    assert issubclass(InvalidInputError, ValueError)
    with pytest.raises(ValueError, match="max_attempts"):  # old callers keep working
        RetryPolicy(max_attempts=0)


# ---------------------------------------------------------------------------
# RetryPolicy
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("kwargs", "needles"), [
    ({"max_attempts": 0}, ("max_attempts", "0")),
    ({"max_attempts": -2}, ("max_attempts", "-2")),
    ({"max_attempts": 2.5}, ("max_attempts", "2.5")),
    ({"max_attempts": "3"}, ("max_attempts", "'3'")),
    ({"max_attempts": True}, ("max_attempts", "True")),
    ({"initial_delay": -1}, ("initial_delay", "-1")),
    ({"initial_delay": "0.5"}, ("initial_delay", "'0.5'")),
    ({"initial_delay": None}, ("initial_delay", "None")),
    ({"initial_delay": float("nan")}, ("initial_delay", "nan")),
    ({"backoff": 0.5}, ("backoff", "0.5")),
    ({"backoff": "2"}, ("backoff", "'2'")),
    ({"max_delay": -0.1}, ("max_delay", "-0.1")),
    ({"max_delay": [30]}, ("max_delay", "[30]")),
    ({"jitter": "yes"}, ("jitter", "'yes'")),
    ({"retry_on": "ValueError"}, ("retry_on", "'ValueError'")),
    ({"retry_on": (ValueError, "KeyError")}, ("retry_on", "'KeyError'")),
    ({"retry_on": (int,)}, ("retry_on", "int")),
    ({"retry_on": (ValueError(),)}, ("retry_on", "ValueError()")),
    ({"retry_on": None}, ("retry_on", "None")),
])
def test_bad_retry_policy_values_raise_invalid_input(kwargs: dict[str, Any],
                                                     needles: tuple[str, ...]) -> None:
    with pytest.raises(InvalidInputError) as info:
        RetryPolicy(**kwargs)
    message = str(info.value)
    assert "RetryPolicy" in message
    for needle in needles:
        assert needle in message, (needle, message)


def test_good_retry_policies_still_build() -> None:
    assert RetryPolicy().retry_on == (Exception,)
    assert RetryPolicy(max_attempts=1, initial_delay=0, backoff=1, max_delay=0, jitter=False)
    assert RetryPolicy(max_delay=float("inf")).max_delay == float("inf")
    # one class, or a list of them, is taken as a tuple
    one: Any = ConnectionError
    assert RetryPolicy(retry_on=one).retry_on == (ConnectionError,)
    listed: Any = [KeyError, TimeoutError]
    assert RetryPolicy(retry_on=listed).retry_on == (KeyError, TimeoutError)
    assert RetryPolicy(retry_on=one) == RetryPolicy(retry_on=(ConnectionError,))


# ---------------------------------------------------------------------------
# SqliteStore
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "kwargs", "needles"), [
    ((":memory:",), {}, ("':memory:'", "MemoryStore")),
    (("",), {}, ("file path", "''")),
    ((5,), {}, ("file path", "5")),
    ((None,), {}, ("file path", "None")),
    ((b"runs.db",), {}, ("file path", "b'runs.db'")),
    (("runs.db",), {"synchronous": "off"}, ("synchronous", "'off'")),
    (("runs.db",), {"synchronous": "FULLY"}, ("synchronous", "'FULLY'")),
    (("runs.db",), {"synchronous": ["full"]}, ("synchronous", "['full']")),
    (("runs.db",), {"busy_timeout": -1}, ("busy_timeout", "-1")),
    (("runs.db",), {"busy_timeout": "5"}, ("busy_timeout", "'5'")),
    (("runs.db",), {"busy_timeout": None}, ("busy_timeout", "None")),
    (("runs.db",), {"busy_timeout": float("nan")}, ("busy_timeout", "nan")),
    (("runs.db",), {"busy_timeout": True}, ("busy_timeout", "True")),
    (("runs.db",), {"busy_timeout": 10**9}, ("busy_timeout", "1000000000")),
])
def test_bad_sqlite_store_arguments_raise_invalid_input(
    tmp_path: Path, args: tuple[Any, ...], kwargs: dict[str, Any], needles: tuple[str, ...]
) -> None:
    with pytest.raises(InvalidInputError) as info:
        SqliteStore(*args, **kwargs)
    message = str(info.value)
    assert "SqliteStore" in message
    for needle in needles:
        assert needle in message, (needle, message)
    assert list(tmp_path.iterdir()) == []  # nothing was created


async def test_good_sqlite_store_arguments_still_work(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "ok.db", synchronous="normal", busy_timeout=0)
    assert store.path == str(tmp_path / "ok.db")
    async with SqliteStore(str(tmp_path / "ok.db"), busy_timeout=2) as opened:
        assert await opened._pragma("busy_timeout") == 2000


# ---------------------------------------------------------------------------
# run input that is not a mapping
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [5, [1, 2], "topic", [("topic", "x")], 2.5])
def test_input_values_refuses_non_mapping_input_naming_the_schema(bad: Any) -> None:
    with pytest.raises(InvalidInputError) as info:
        input_values(schema_for(Doc), bad)
    message = str(info.value)
    assert "Doc" in message and "mapping" in message and type(bad).__name__ in message


def test_input_values_still_takes_mappings_and_instances() -> None:
    assert input_values(schema_for(Doc), {"topic": "t"})["topic"] == "t"
    assert input_values(schema_for(Doc), Doc(draft="d"))["draft"] == "d"


@pytest.mark.parametrize("bad", [5, [1, 2], "topic"])
async def test_run_with_non_mapping_input_raises_and_stores_nothing(rt: Runtime, bad: Any) -> None:
    with pytest.raises(InvalidInputError, match="Doc") as info:
        await rt.run(base().build(), bad, run_id="r1")
    assert type(bad).__name__ in str(info.value)
    assert await rt.list_runs() == []


# ---------------------------------------------------------------------------
# WorkflowBuilder: misuse is collected and reported by build()
# ---------------------------------------------------------------------------


class NotABoard(BaseModel):
    topic: str = ""


@pytest.mark.parametrize(("state", "needles"), [
    (dict, ("state must be a Blackboard subclass", "dict")),
    ("Doc", ("state must be a Blackboard subclass", "'Doc'")),
    (Doc(), ("Blackboard subclass", "not an instance")),
    (NotABoard, ("NotABoard", "subclass durable_flow.Blackboard")),
])
def test_state_that_is_not_a_blackboard_subclass(state: Any, needles: tuple[str, ...]) -> None:
    b = WorkflowBuilder("bad_state", state=state)
    b.add_node("a", noop, produces=["draft"], consumes=["topic"]).set_entry("a")
    b.add_edge("a", END)
    only_problem(b, *needles)


@pytest.mark.parametrize(("cases", "needles"), [
    ([("draft == 'x'",)], ("switch on 'a'", "case 0", "(condition, target) pair")),
    ([("draft == 'x'", "b", "c")], ("case 0", "(condition, target) pair")),
    (["draft == 'x'"], ("case 0", "\"draft == 'x'\"")),
    ([("draft == 'x'", 5)], ("case 0", "node id", "5")),
    ({"draft == 'x'": "b"}, ("cases must be a list of (condition, target) pairs", "dict")),
    ("draft == 'x'", ("cases must be a list", "str")),
    (7, ("cases must be a list", "int")),
])
def test_switch_cases_that_are_not_condition_target_pairs(cases: Any,
                                                          needles: tuple[str, ...]) -> None:
    b = base()
    b.add_node("b", noop).add_edge("b", END)
    b.add_switch("a", cases, default="b")
    only_problem(b, *needles)


def test_switch_with_a_bad_default_or_source() -> None:
    b = base()
    b.add_node("b", noop).add_edge("b", END)
    b.add_switch("a", [("draft == 'x'", "b")], default=3)  # type: ignore[arg-type]
    only_problem(b, "switch on 'a'", "default", "3")
    b = base()
    b.add_switch(["a"], [("draft == 'x'", "a")])  # type: ignore[arg-type]
    only_problem(b, "switch", "source", "['a']")


class NotBuilt(Blackboard):
    draft: str = ""


@pytest.mark.parametrize(("inner", "needles"), [
    (WorkflowBuilder("inner", state=NotBuilt), ("sub-workflow 'sub'", "call .build()")),
    ("legal", ("sub-workflow 'sub'", "expected a Workflow", "str")),
    (None, ("sub-workflow 'sub'", "expected a Workflow", "NoneType")),
])
def test_subworkflow_that_is_not_a_workflow(inner: Any, needles: tuple[str, ...]) -> None:
    b = base()
    b.add_subworkflow("sub", inner, inputs=["draft"], outputs=["draft"])
    b.add_edge("a", "sub").add_edge("sub", END)
    only_problem(b, *needles)


def inner_workflow() -> Workflow:
    b = WorkflowBuilder("inner", state=NotBuilt)
    b.add_node("x", noop).set_entry("x").add_edge("x", END)
    return b.build()


def test_subworkflow_inputs_and_outputs_must_be_field_names() -> None:
    b = base()
    b.add_subworkflow("sub", inner_workflow(), inputs=5)  # type: ignore[arg-type]
    b.add_edge("a", "sub").add_edge("sub", END)
    only_problem(b, "sub-workflow 'sub' inputs", "5")
    b = base()
    b.add_subworkflow("sub", inner_workflow(), outputs={"draft": 1})  # type: ignore[dict-item]
    b.add_edge("a", "sub").add_edge("sub", END)
    only_problem(b, "sub-workflow 'sub' outputs", "{'draft': 1}")
    b = base()  # one string is one name, not its letters
    b.add_subworkflow("sub", inner_workflow(), inputs="draft", outputs="draft")
    b.add_edge("a", "sub").add_edge("sub", END)
    wf = b.build()
    sub = wf.nodes["sub"].subworkflow
    assert sub is not None and dict(sub.inputs) == dict(sub.outputs) == {"draft": "draft"}


@pytest.mark.parametrize("retry", [3, {"max_attempts": 3}, "RetryPolicy()", RetryPolicy])
def test_retry_that_is_not_a_retry_policy(retry: Any) -> None:
    b = base()
    b.add_node("b", noop, retry=retry).add_edge("a", "b").add_edge("b", END)
    only_problem(b, "node 'b'", "retry must be a RetryPolicy", repr(retry)[:20])


@pytest.mark.parametrize("timeout", [0, -1, "5", True, float("nan"), [1.0]])
def test_timeout_that_is_not_a_positive_number(timeout: Any) -> None:
    b = base()
    b.add_node("b", noop, timeout=timeout).add_edge("a", "b").add_edge("b", END)
    only_problem(b, "node 'b'", "timeout must be a positive number", repr(timeout))


def test_retry_and_timeout_are_checked_on_every_kind_of_node() -> None:
    b = base()
    b.add_subworkflow("sub", inner_workflow(), retry=2, timeout=-5)  # type: ignore[arg-type]
    b.add_transform("t", rename(topic="draft"), retry="x", timeout="1")
    b.add_agent("ag", ScriptedModel(["hi"]), instructions="say hi", output_key="draft",
                retry=[1], timeout=0)  # type: ignore[arg-type]
    b.add_edge("a", "sub").add_edge("sub", "t").add_edge("t", "ag").add_edge("ag", END)
    problems = problems_of(b)
    assert len(problems) == 6, problems
    for nid, bad in (("sub", "2"), ("t", "'x'"), ("ag", "[1]")):
        assert any(f"node {nid!r}: retry must be a RetryPolicy" in p and bad in p
                   for p in problems), (nid, problems)
    for nid, bad in (("sub", "-5"), ("t", "'1'"), ("ag", "0")):
        assert any(f"node {nid!r}: timeout must be a positive number" in p and bad in p
                   for p in problems), (nid, problems)


@pytest.mark.parametrize(("option", "value", "needles"), [
    ("goto", 5, ("node 'b' goto", "node ids", "5")),
    ("goto", ["a", 1], ("node 'b' goto", "['a', 1]")),
    ("goto", {"a": 1}, ("node 'b' goto", "{'a': 1}")),
    ("produces", 5, ("node 'b' produces", "field names", "5")),
    ("produces", [None], ("node 'b' produces", "[None]")),
    ("consumes", 7, ("node 'b' consumes", "field names", "7")),
    ("consumes", ["topic", b"draft"], ("node 'b' consumes", "b'draft'")),
])
def test_goto_produces_consumes_must_be_names(option: str, value: Any,
                                              needles: tuple[str, ...]) -> None:
    b = base()
    b.add_node("b", noop, **{option: value}).add_edge("a", "b").add_edge("b", END)
    only_problem(b, *needles)


def test_one_string_is_one_name_for_goto_produces_consumes() -> None:
    b = base()
    b.add_node("b", noop, goto="a", produces="draft", consumes="topic").add_edge("a", "b")
    wf = b.build()
    spec = wf.nodes["b"]
    assert (spec.goto, spec.produces, spec.consumes) == (("a",), ("draft",), ("topic",))


@pytest.mark.parametrize(("source", "target", "needles"), [
    (1, "a", ("edge", "source must be a node id", "1")),
    ("a", ["b"], ("edge", "target must be a node id", "['b']")),
    (None, None, ("source must be a node id", "target must be a node id", "None")),
])
def test_edge_with_a_source_or_target_that_is_not_a_string(source: Any, target: Any,
                                                           needles: tuple[str, ...]) -> None:
    b = base()
    b.add_edge(source, target)
    only_problem(b, *needles)


def test_entry_exit_fan_in_and_route_by_type_take_node_ids() -> None:
    b = base()
    b.set_entry(5)  # type: ignore[arg-type]
    only_problem(b, "set_entry", "5")
    b = base()
    b.set_exit("a", 6)  # type: ignore[arg-type]
    only_problem(b, "set_exit", "6")
    b = base()
    b.add_fan_in(5, "a")  # type: ignore[arg-type]
    only_problem(b, "fan-in into 'a' sources", "5")
    b = base()
    b.add_fan_in(["a"], 9)  # type: ignore[arg-type]
    only_problem(b, "fan-in", "target", "9")
    b = base()
    b.route_by_type("a", ["X"])  # type: ignore[arg-type]
    only_problem(b, "route_by_type on 'a'", "mapping", "['X']")
    b = base()
    b.route_by_type("a", {3: "a"})  # type: ignore[dict-item]
    only_problem(b, "route_by_type on 'a'", "3", "class name")


def test_node_decorator_misuse() -> None:
    b = base()

    @b.node  # type: ignore[arg-type]  # forgot the parentheses
    def forgotten(state: Doc) -> None:
        return None

    only_problem(b, "node()", "the id must be a string", "parentheses")
    b = base()
    b.node("b", retries=3)(noop)
    b.add_edge("a", "b").add_edge("b", END)
    only_problem(b, "node()", "unknown option", "retries")


def test_transform_misuse() -> None:
    b = base()
    b.add_transform("t", {"topic": "draft"})  # type: ignore[arg-type]
    b.add_edge("a", "t").add_edge("t", END)
    only_problem(b, "transform 't'", "durable_flow.transforms", "dict")
    b = base()
    b.add_transform("t", rename(topic="draft"), retries=2)
    b.add_edge("a", "t").add_edge("t", END)
    only_problem(b, "transform 't'", "unknown option", "retries")


def test_agent_misuse_is_reported_not_raised() -> None:
    b = base()
    b.add_agent("ag", ScriptedModel(["hi"]), instructions="hi", reads=5)  # type: ignore[arg-type]
    b.add_edge("a", "ag").add_edge("ag", END)
    only_problem(b, "agent 'ag'")


def test_workflow_name_and_max_supersteps() -> None:
    b = base(5)  # type: ignore[arg-type]
    only_problem(b, "workflow name", "5")
    b = base()
    b.max_supersteps = 0
    only_problem(b, "max_supersteps", "0")


def test_every_misuse_is_reported_at_once_by_build() -> None:
    b = WorkflowBuilder("many", state=dict)  # type: ignore[arg-type]
    b.add_node("a", noop, retry=3, timeout=-1, goto=5)  # type: ignore[arg-type]
    b.add_switch("a", [("x",)])  # type: ignore[list-item]
    b.add_subworkflow("sub", "legal")  # type: ignore[arg-type]
    b.add_edge(1, "sub")  # type: ignore[arg-type]
    b.set_entry("a").add_edge("a", "sub").add_edge("sub", END)
    problems = problems_of(b)  # nothing raised before build()
    for needle in ("state must be a Blackboard subclass", "retry must be a RetryPolicy",
                   "timeout must be a positive number", "node 'a' goto",
                   "(condition, target) pair", "sub-workflow 'sub'",
                   "source must be a node id"):
        assert sum(needle in p for p in problems) == 1, (needle, problems)
    assert len(problems) == 7, problems


# ---------------------------------------------------------------------------
# Runtime-level misuse (the fix lives in _runtime.py)
# ---------------------------------------------------------------------------


class Ask(Blackboard):
    ok: bool = False
    log: Annotated[list[str], append] = []


def asking_workflow() -> Workflow:
    b = WorkflowBuilder("asking", state=Ask)

    def start(state: Ask) -> dict[str, Any]:
        return {"log": ["start"]}

    async def ask(state: Ask, ctx: NodeContext) -> dict[str, Any]:
        return {"ok": await ctx.request({"q": "ok?"}, response_type=bool)}

    b.add_node("start", start).add_node("ask", ask)
    b.set_entry("start").add_edge("start", "ask").add_edge("ask", END)
    return b.build()


async def stored(rt: Runtime) -> Any:
    """Everything a misuse must leave alone: runs, histories, pending requests, states."""
    runs = await rt.list_runs()
    return (runs,
            {r.run_id: await rt.history(r.run_id) for r in runs},
            {r.run_id: (await rt.get_state(r.run_id)).values for r in runs},
            await rt.pending_requests())


async def waiting_run(rt: Runtime) -> tuple[Workflow, str]:
    wf = asking_workflow()
    result = await rt.run(wf, {}, run_id="waiting")
    assert result.status is RunStatus.WAITING
    return wf, result.run_id


NOT_WORKFLOWS = [WorkflowBuilder("unbuilt", state=Ask), "asking", None]


def not_workflow_id(value: Any) -> str:
    return type(value).__name__


def _raises_naming(message: str, *needles: str) -> None:
    for needle in needles:
        assert needle in message, (needle, message)


@pytest.mark.parametrize("bad", NOT_WORKFLOWS, ids=not_workflow_id)
async def test_run_and_stream_refuse_what_is_not_a_workflow(rt: Runtime, bad: Any) -> None:
    with pytest.raises(DurableFlowError) as info:
        await rt.run(bad, {})
    _raises_naming(str(info.value), "Workflow", type(bad).__name__)
    with pytest.raises(DurableFlowError) as info:
        async for _ in rt.stream(bad, {}):
            pass
    _raises_naming(str(info.value), "Workflow", type(bad).__name__)
    assert await rt.list_runs() == []


@pytest.mark.parametrize("bad", NOT_WORKFLOWS, ids=not_workflow_id)
async def test_resume_fork_update_recover_refuse_what_is_not_a_workflow(rt: Runtime,
                                                                         bad: Any) -> None:
    _wf, run_id = await waiting_run(rt)
    before = await stored(rt)
    head = (await rt.history(run_id))[0].id
    calls: list[Callable[[], Any]] = [
        lambda: rt.resume(bad, run_id),
        lambda: rt.fork(bad, run_id, head),
        lambda: rt.update_state(bad, run_id, {"ok": True}),
        lambda: rt.recover(bad),
    ]
    for call in calls:
        with pytest.raises(DurableFlowError) as info:
            await call()
        _raises_naming(str(info.value), "Workflow", type(bad).__name__)
    with pytest.raises(DurableFlowError) as info:
        async for _ in rt.stream_resume(bad, run_id):
            pass
    _raises_naming(str(info.value), "Workflow", type(bad).__name__)
    assert await stored(rt) == before


@pytest.mark.parametrize("bad", [[True], "yes", 5], ids=not_workflow_id)
async def test_resume_refuses_responses_that_are_not_a_mapping(rt: Runtime, bad: Any) -> None:
    wf, run_id = await waiting_run(rt)
    before = await stored(rt)
    with pytest.raises(DurableFlowError) as info:
        await rt.resume(wf, run_id, responses=bad)
    _raises_naming(str(info.value), "responses", type(bad).__name__)
    assert await stored(rt) == before


@pytest.mark.parametrize("bad", [[("ok", True)], "ok", 5], ids=not_workflow_id)
async def test_fork_refuses_an_update_that_is_not_a_mapping(rt: Runtime, bad: Any) -> None:
    wf, run_id = await waiting_run(rt)
    before = await stored(rt)
    head = (await rt.history(run_id))[0].id
    with pytest.raises(DurableFlowError) as info:
        await rt.fork(wf, run_id, head, update=bad)
    _raises_naming(str(info.value), "update", type(bad).__name__)
    assert await stored(rt) == before


@pytest.mark.parametrize("bad", [[("ok", True)], "ok", 5, None], ids=not_workflow_id)
async def test_update_state_refuses_values_that_are_not_a_mapping(rt: Runtime, bad: Any) -> None:
    wf, run_id = await waiting_run(rt)
    before = await stored(rt)
    with pytest.raises(DurableFlowError) as info:
        await rt.update_state(wf, run_id, bad)
    _raises_naming(str(info.value), "values", repr(bad))
    assert await stored(rt) == before


@pytest.mark.parametrize(("kwargs", "needles"), [
    ({}, ("keep_last", "older_than")),
    ({"keep_last": 0}, ("keep_last",)),
    ({"keep_last": -3}, ("keep_last",)),
    ({"keep_last": "3"}, ("keep_last", "'3'")),
    ({"keep_last": 2.5}, ("keep_last", "2.5")),
    ({"keep_last": True}, ("keep_last", "True")),
    ({"older_than": 5}, ("older_than", "timedelta", "5")),
    ({"older_than": "1d"}, ("older_than", "timedelta", "'1d'")),
    ({"run_id": 7, "keep_last": 1}, ("run_id", "7")),
])
async def test_prune_refuses_bad_arguments(rt: Runtime, kwargs: dict[str, Any],
                                           needles: tuple[str, ...]) -> None:
    await waiting_run(rt)
    before = await stored(rt)
    with pytest.raises(DurableFlowError) as info:
        await rt.prune(**kwargs)
    _raises_naming(str(info.value), *needles)
    assert await stored(rt) == before


async def test_prune_with_good_arguments_still_works(rt: Runtime) -> None:
    await waiting_run(rt)
    assert await rt.prune(keep_last=1) >= 0
    assert await rt.prune("waiting", older_than=timedelta(days=1)) >= 0


def test_misuse_messages_are_one_clear_sentence() -> None:
    """A sample of the messages above, read as a person would."""
    with pytest.raises(InvalidInputError) as info:
        RetryPolicy(max_attempts=0)
    assert re.fullmatch(r"RetryPolicy\.max_attempts must be .+, got 0", str(info.value))
    with pytest.raises(InvalidInputError) as info:
        SqliteStore(":memory:")
    assert str(info.value).startswith("SqliteStore needs a file path")
