"""Declarative workflows: loading, routing, validation, context_passed, round trip, fuzzing."""

from __future__ import annotations

import copy
import importlib.util
import json
import string
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durable_flow import (
    Blackboard,
    Command,
    MemoryStore,
    RetryPolicy,
    RunResult,
    RunStatus,
    Runtime,
    Workflow,
    WorkflowBuilder,
    WorkflowValidationError,
    dump_workflow,
    load_workflow,
    to_mermaid,
)
from durable_flow.building._diagram import to_dot
from durable_flow.building.declarative._load import META_KEY, ContextView, load_registry
from durable_flow.building.declarative._state import parse_type, type_name
from durable_flow.model._blackboard import FreeBlackboard, schema_for
from durable_flow.model._graph import NodeSpec
from durable_flow.model._reducers import add, append, merge

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


# -- helpers -----------------------------------------------------------------------------------


def step(update: dict[str, Any] | None = None) -> Callable[[Any], dict[str, Any]]:
    """A node that appends its own name to ``seen`` (plus ``update``)."""

    def node(state: Any) -> dict[str, Any]:
        return {"seen": [node.__name__], **(update or {})}

    return node


def recorder(calls: list[Any], update: dict[str, Any] | None = None) -> Callable[[Any], Any]:
    def node(state: Any) -> dict[str, Any]:
        calls.append(state)
        return dict(update or {})

    return node


class Registry(dict[str, Any]):
    """Every lookup of an unknown name is a node that logs its own id in ``seen``."""

    def __missing__(self, key: str) -> Any:
        fn = step()
        fn.__name__ = key
        return fn

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.islower() and key.isidentifier()


REG = Registry()
SEEN_STATE = {"seen": {"type": "list[str]", "reducer": "append"}, "x": "int"}


def nodes(*specs: str | dict[str, Any]) -> list[dict[str, Any]]:
    """``"a"`` -> {"id": "a", "agent_name": "a"}; dicts pass through with the same default."""
    out = []
    for s in specs:
        node = {"id": s} if isinstance(s, str) else dict(s)
        node.setdefault("agent_name", node["id"])
        out.append(node)
    return out


def links(*pairs: str | tuple[str, str, str]) -> list[dict[str, Any]]:
    """``"a>b"`` or ``("a>b", "condition")``."""
    out = []
    for p in pairs:
        text, cond = (p, None) if isinstance(p, str) else (p[0], p[1])
        source, target = text.split(">")
        out.append({"source_id": source, "target_id": target}
                   | ({"condition": cond} if cond else {}))
    return out


def linear() -> dict[str, Any]:
    return {
        "name": "linear",
        "nodes": nodes({"id": "a", "is_entry": True}, "b", {"id": "c", "is_exit": True}),
        "connections": links("a>b", "b>c"),
    }


def problems_of(source: Any, registry: Any = REG, **kw: Any) -> list[str]:
    with pytest.raises(WorkflowValidationError) as info:
        load_workflow(source, registry, **kw)
    return info.value.problems


async def run(wf: Workflow, data: dict[str, Any] | None = None) -> RunResult:
    async with Runtime(MemoryStore()) as rt:
        return await rt.run(wf, data or {})


# -- loading and routing ---------------------------------------------------------------------


def test_load_builds_the_graph_with_entry_exits_and_a_free_form_blackboard() -> None:
    wf = load_workflow(linear(), REG)
    assert list(wf.nodes) == ["a", "b", "c"]
    assert wf.entry == "a" and wf.exits == {"c"}
    assert wf.state is FreeBlackboard
    assert wf.loaded_from is None


async def test_first_matching_connection_wins_in_order() -> None:
    d = {"name": "first", "state": SEEN_STATE,
         "nodes": nodes({"id": "a", "is_entry": True}, *({"id": t, "is_exit": True} for t in "bcd")),
         "connections": links(("a>b", "x > 5"), ("a>c", "x > 1"), "a>d")}
    wf = load_workflow(d, REG)
    for x, expected in ((10, ["a", "b"]), (3, ["a", "c"]), (0, ["a", "d"])):
        assert (await run(wf, {"x": x})).state.seen == expected


async def test_fan_out_takes_every_connection_that_holds() -> None:
    d = {"name": "fan", "state": SEEN_STATE,
         "nodes": nodes({"id": "a", "is_entry": True, "fan_out": True},
                        *({"id": t, "is_exit": True} for t in "bcd")),
         "connections": links(("a>b", "x > 5"), ("a>c", "x > 1"), "a>d")}
    wf = load_workflow(d, REG)
    assert sorted((await run(wf, {"x": 10})).state.seen) == ["a", "b", "c", "d"]
    assert sorted((await run(wf, {"x": 3})).state.seen) == ["a", "c", "d"]


async def test_skipped_targets_pass_control_on_recursively() -> None:
    d = {"name": "skips", "state": {**SEEN_STATE, "flags": "dict[str, bool]"},
         "nodes": nodes({"id": "a", "is_entry": True}, {"id": "b", "skip_condition": "flags.b"},
                        {"id": "c", "skip_condition": "flags.c"}, {"id": "d", "is_exit": True}),
         "connections": links("a>b", "b>c", "c>d")}
    wf = load_workflow(d, REG)
    assert (await run(wf, {"flags": {"b": True, "c": True}})).state.seen == ["a", "d"]
    assert (await run(wf, {"flags": {"c": True}})).state.seen == ["a", "b", "d"]
    assert (await run(wf, {})).state.seen == ["a", "b", "c", "d"]


async def test_join_waits_for_every_incoming_branch() -> None:
    d = {"name": "join", "state": SEEN_STATE,
         "nodes": nodes({"id": "a", "is_entry": True, "fan_out": True}, "b", "b2", "c",
                        {"id": "j", "join": True, "is_exit": True}),
         "connections": links("a>b", "a>c", "b>b2", "b2>j", "c>j")}
    wf = load_workflow(d, REG)
    assert [f.sources for f in wf.fan_ins] == [("b2", "c")]
    seen = (await run(wf)).state.seen
    assert seen[-1] == "j" and seen.count("j") == 1 and set(seen) == {"a", "b", "b2", "c", "j"}


async def test_loops_run_when_max_supersteps_is_set() -> None:
    d = {"name": "loop", "max_supersteps": 20,
         "state": {**SEEN_STATE, "count": {"type": "int", "reducer": "add"}},
         "nodes": nodes({"id": "a", "is_entry": True}, {"id": "done", "is_exit": True}),
         "connections": links(("a>a", "count < 3"), "a>done")}
    reg = {"a": lambda s: {"count": 1}, "done": step()}
    wf = load_workflow(d, reg)
    assert wf.max_supersteps == 20
    assert (await run(wf)).state.count == 3


async def test_retry_and_timeout_reach_the_node() -> None:
    attempts: list[int] = []

    def flaky(state: Any) -> dict[str, Any]:
        attempts.append(1)
        if len(attempts) < 2:
            raise RuntimeError("first try fails")
        return {"ok": True}

    d = linear()
    d["nodes"][1].update(retry={"max_attempts": 2, "initial_delay": 0, "jitter": False}, timeout=1.5)
    reg = Registry(b=flaky)
    wf = load_workflow(d, reg)
    assert wf.nodes["b"].retry == RetryPolicy(max_attempts=2, initial_delay=0, jitter=False)
    assert wf.nodes["b"].timeout == 1.5
    result = await run(wf)
    assert result.status is RunStatus.COMPLETED and len(attempts) == 2


# -- the state section ----------------------------------------------------------------------


async def test_state_section_builds_a_typed_blackboard_with_reducers() -> None:
    d = {"name": "typed", "state": {
        "user": "str", "notes": {"type": "list[str]", "reducer": "append"},
        "total": {"type": "int", "reducer": "add", "default": 10},
        "tags": {"type": "dict[str, int]", "reducer": "merge"},
        "level": {"type": "float | None", "description": "last reading"}},
        "nodes": nodes({"id": "a", "is_entry": True, "fan_out": True},
                       {"id": "b", "is_exit": True}, {"id": "c", "is_exit": True}),
        "connections": links("a>b", "a>c")}
    update = {"notes": ["n"], "total": 1, "tags": {"k": 1}}
    wf = load_workflow(d, {"a": lambda s: update, "b": lambda s: update,
                           "c": lambda s: {**update, "tags": {"z": 2}}})
    assert issubclass(wf.state, Blackboard) and not schema_for(wf.state).free_form
    fields = schema_for(wf.state).fields
    assert fields["notes"].reducer is append and fields["total"].reducer is add
    assert fields["tags"].reducer is merge and fields["user"].is_lww
    assert wf.state.model_fields["level"].description == "last reading"
    state = (await run(wf, {"user": "ann"})).state
    assert (state.user, state.notes, state.total, state.level) == ("ann", ["n"] * 3, 13, None)
    assert state.tags == {"k": 1, "z": 2}


@pytest.mark.parametrize(("text", "expected"), [
    ("str", str), ("int", int), ("float", float), ("bool", bool), ("list", list[Any]),
    ("dict", dict[str, Any]), ("list[str]", list[str]), ("dict[str, list[int]]", dict[str, list[int]]),
    ("float | None", float | None), ("list[dict[str, any]]", list[dict[str, Any]]),
    (" int|str ", int | str),
])
def test_state_types_parse_from_a_closed_set_and_name_back(text: str, expected: Any) -> None:
    assert parse_type(text) == expected
    assert parse_type(type_name(parse_type(text)) or "") == expected


@pytest.mark.parametrize("text", [
    "", "tuple", "list[", "list[str", "dict[int, str]", "__import__('os')", "list[str]]",
    "str | ", "x" * 300, "list[" * 20 + "str" + "]" * 20, "List[str]", "int,",
])
def test_unknown_or_malformed_state_types_are_problems(text: str) -> None:
    d = linear() | {"state": {"f": text}}
    assert any(p.startswith("state.f.type: ") for p in problems_of(d))


@pytest.mark.parametrize(("field", "expected"), [
    ({"type": "int", "reducer": "append"}, "state.f.reducer: append does not fit type 'int'"),
    ({"type": "str", "reducer": "sum"}, "state.f.reducer: must be one of append, add, merge, none"),
    ({"type": "int", "default": "many"}, "state.f.default: does not fit the type"),
    ({"type": "int", "size": 3}, "state.f: unknown key 'size'"),
    ({"reducer": "add"}, "state.f.type: must be a type name"),
    (3, "state.f.type: must be a type name"),
])
def test_state_field_problems_are_located(field: Any, expected: str) -> None:
    problems = problems_of(linear() | {"state": {"f": field}})
    assert any(p.startswith(expected) for p in problems), problems


@pytest.mark.parametrize("name", ["messages", "_private", "model_x", "class", "copy", "2x"])
def test_unusable_state_field_names_are_problems(name: str) -> None:
    problems = problems_of(linear() | {"state": {name: "str"}})
    assert any(f"{name!r} is not a usable field name" in p for p in problems)


def test_conditions_on_a_typed_state_must_read_declared_fields() -> None:
    d = linear() | {"state": {"x": "int"}}
    d["connections"][0]["condition"] = "y > 1 and x > 1"
    d["nodes"][1]["skip_condition"] = "flags.skip"
    assert problems_of(d) == [
        "nodes[1].skip_condition: 'flags.skip' does not start with a state field",
        "connections[0].condition: 'y' does not start with a state field"]


# -- validation: every rule, every location ------------------------------------------------


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(d: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = d
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        if isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value

    return mutate


def _append(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d[key].append(value)


VALIDATION_CASES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("no entry", _set("nodes.0.is_entry", False),
     'nodes: no entry node; set "is_entry": true on exactly one node'),
    ("two entries", _set("nodes.1.is_entry", True),
     "nodes[1].is_entry: a second entry node ('b'; 'a' at nodes[0] is one already), "
     "a workflow has exactly one"),
    ("no exit", _set("nodes.2.is_exit", False),
     'nodes: no exit node; set "is_exit": true on at least one node'),
    ("unreachable", _append("nodes", {"id": "d", "agent_name": "d"}),
     "nodes[3]: node 'd' is unreachable from the entry 'a'"),
    ("cycle", _append("connections", {"source_id": "c", "target_id": "a"}),
     "connections[2]: 'c' -> 'a' closes a cycle; loops are allowed only when the definition "
     "sets 'max_supersteps'"),
    ("self loop", _append("connections", {"source_id": "b", "target_id": "b"}),
     "connections[2]: 'b' -> 'b' closes a cycle; loops are allowed only when the definition "
     "sets 'max_supersteps'"),
    ("not in registry", _set("nodes.1.agent_name", "Missing"),
     "nodes[1].agent_name: 'Missing' is not in the registry"),
    ("bad condition", _set("connections.0.condition", "x =="),
     "connections[0].condition: cannot parse 'x ==' at offset 4: "),
    ("bad skip condition", _set("nodes.1.skip_condition", "len(x) > 1"),
     "nodes[1].skip_condition: cannot parse 'len(x) > 1' at offset 3: "),
    ("duplicate id", _set("nodes.2.id", "a"), "nodes[2].id: duplicate id 'a' (also nodes[0])"),
    ("unknown target", _set("connections.1.target_id", "x"), "connections[1].target_id: unknown node 'x'"),
    ("unknown source", _set("connections.1.source_id", "x"), "connections[1].source_id: unknown node 'x'"),
    ("bad id", _set("nodes.1.id", "1 b"), "nodes[1].id: '1 b' is not a valid node id"),
    ("reserved id", _set("nodes.1.id", "__end__"), "nodes[1].id: '__end__' is not a valid node id"),
    ("no agent", lambda d: d["nodes"][1].pop("agent_name"),
     "nodes[1]: needs an 'agent_name' (or a 'workflow' file)"),
    ("agent and workflow", _set("nodes.1.workflow", "x.json"),
     "nodes[1]: give 'agent_name' or 'workflow', not both"),
    ("name missing", lambda d: d.pop("name"), "name: is required"),
    ("name empty", _set("name", " "), "name: must not be empty"),
    ("name type", _set("name", 3), "name: must be a string, not a number"),
    ("version type", _set("version", [1]), "version: must be a string or a number, not a list"),
    ("unknown top key", _set("edges", []), "definition: unknown key 'edges'"),
    ("nodes not a list", _set("nodes", {"a": 1}), "nodes: must be a list, not an object"),
    ("node not an object", _append("nodes", "d"), "nodes[3]: must be an object, not a string"),
    ("connections not a list", _set("connections", "a>b"), "connections: must be a list, not a string"),
    ("connection not an object", _append("connections", ["a", "c"]),
     "connections[2]: must be an object, not a list"),
    ("connection missing target", lambda d: d["connections"][0].pop("target_id"),
     "connections[0].target_id: is required"),
    ("unknown node key", _set("nodes.1.skip_condtion", "x"), "nodes[1]: unknown key 'skip_condtion'"),
    ("flag type", _set("nodes.0.is_entry", "yes"), "nodes[0].is_entry: must be true or false, not a string"),
    ("timeout negative", _set("nodes.1.timeout", -1), "nodes[1].timeout: must be above 0, not -1"),
    ("timeout type", _set("nodes.1.timeout", "1s"), "nodes[1].timeout: must be a number, not a string"),
    ("timeout nan", _set("nodes.1.timeout", float("nan")),
     "nodes[1].timeout: must be a number, not a non-finite number"),
    ("retry type", _set("nodes.1.retry", 3), "nodes[1].retry: must be an object, not a number"),
    ("retry attempts", _set("nodes.1.retry", {"max_attempts": 0}),
     "nodes[1].retry.max_attempts: must be at least 1, not 0"),
    ("retry backoff", _set("nodes.1.retry", {"backoff": 0.5}),
     "nodes[1].retry.backoff: must be at least 1, not 0.5"),
    ("retry unknown key", _set("nodes.1.retry", {"tries": 2}), "nodes[1].retry: unknown key 'tries'"),
    ("max_supersteps", _set("max_supersteps", 0), "max_supersteps: must be at least 1, not 0"),
    ("max_supersteps bool", _set("max_supersteps", True),
     "max_supersteps: must be an integer, not a boolean"),
    ("context type", _set("connections.0.context_passed", "user"),
     "connections[0].context_passed: must be a list, not a string"),
    ("context items", _set("connections.0.context_passed", [1]),
     "connections[0].context_passed: must be a list of strings"),
    ("inputs shape", _set("nodes.1.inputs", {"a": 1}),
     "nodes[1].inputs: must be a list of field names or an object of field name to field name"),
    ("inputs on a function", _set("nodes.1.inputs", ["x"]),
     "nodes[1]: only sub-workflow nodes take 'inputs' and 'outputs'"),
    ("dead connection", _append("connections", {"source_id": "a", "target_id": "c"}),
     "connections[2]: never taken: connections[0] from 'a' has no condition and is tried first"),
    ("state type", _set("state", ["x"]), "state: must be an object of field name to type, not list"),
    ("description type", _set("nodes.1.description", 5), "nodes[1].description: must be a string"),
]


@pytest.mark.parametrize(("mutate", "expected"), [c[1:] for c in VALIDATION_CASES],
                         ids=[c[0] for c in VALIDATION_CASES])
def test_each_validation_rule_reports_its_location(
    mutate: Callable[[dict[str, Any]], None], expected: str
) -> None:
    d = linear()
    mutate(d)
    problems = problems_of(d)
    assert any(p.startswith(expected) for p in problems), problems


def test_every_problem_is_listed_at_once() -> None:
    d = linear()
    d["nodes"][0]["is_entry"] = False
    d["nodes"][1]["skip_condition"] = "a +"
    d["nodes"][2]["agent_name"] = "Nope"
    d["connections"].append({"source_id": "c", "target_id": "zz", "condition": "=="})
    d["connections"].append(7)
    problems = problems_of(d)
    assert len(problems) == 6
    assert [p.split(":")[0] for p in problems] == [
        "nodes", "nodes[1].skip_condition", "nodes[2].agent_name", "connections[2].condition",
        "connections[2].target_id", "connections[3]"]  # in the order of the file


@pytest.mark.parametrize(("source", "expected"), [
    ([1, 2], "definition: expected a file path or a mapping, not a list"),
    (42, "definition: expected a file path or a mapping, not a number"),
    (None, "definition: expected a file path or a mapping, not null"),
])
def test_a_definition_that_is_not_a_mapping_is_a_problem(source: Any, expected: str) -> None:
    assert problems_of(source) == [expected]


def test_registry_entries_of_the_wrong_kind_are_problems() -> None:
    reg = {"a": step(), "b": 42, "c": step()}
    assert problems_of(linear(), reg) == [
        "nodes[1].agent_name: registry entry 'b' is a number, not a node function, an agent "
        "spec or a Workflow"]
    with pytest.raises(WorkflowValidationError, match="registry: must be a mapping"):
        load_workflow(linear(), ["a"])  # type: ignore[arg-type]


async def test_without_a_registry_names_are_not_checked_and_a_note_says_so() -> None:
    notes: list[str] = []
    wf = load_workflow(linear(), None, notes=notes)
    assert notes == ["no registry given: agent names were not checked, and their nodes fail "
                     "if the workflow is run"]
    result = await run(wf)
    assert result.status is RunStatus.FAILED and result.error is not None
    assert "agent 'a' is not bound" in result.error.message
    silent: list[str] = []
    load_workflow(linear(), REG, notes=silent)
    assert silent == []


def test_join_rules_are_checked() -> None:
    d = {"name": "j", "nodes": nodes({"id": "a", "is_entry": True, "fan_out": True}, "b", "c",
                                     {"id": "j", "join": True, "is_exit": True},
                                     {"id": "k", "join": True}),
         "connections": links("a>b", "a>c", ("b>j", "x > 1"), "c>j", "c>b")}
    assert problems_of(d) == [
        "nodes[4].join: node 'k' has no incoming connections to wait for",
        "nodes[4]: node 'k' is unreachable from the entry 'a'",
        "connections[2].condition: a connection into join node 'j' cannot have a condition "
        "(the join waits for every incoming connection)",
        "connections[3]: 'c' takes only its first matching connection, so its connection into "
        "join node 'j' must be its only one (or set \"fan_out\": true on 'c')"]


def test_graph_problems_found_by_the_builder_are_reported_too() -> None:
    d = {"name": "forever", "max_supersteps": 5,
         "nodes": nodes({"id": "a", "is_entry": True}, "b", {"id": "c", "is_exit": True}),
         "connections": links("a>b", ("b>a", "x < 1"), "b>c")}
    load_workflow(d, REG)  # a loop that may end
    d["connections"] = links("a>b", "b>a", "c>a")
    d["nodes"][2]["is_entry"], d["nodes"][0]["is_entry"] = True, False
    problems = problems_of(d)
    assert any("no way to finish" in p for p in problems), problems


# -- files and nested workflows ----------------------------------------------------------------


def test_json_and_yaml_files_load_and_record_where_from(tmp_path: Path) -> None:
    (tmp_path / "w.json").write_text(json.dumps(linear()))
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(linear()))
    for name in ("w.json", "w.yaml"):
        wf = load_workflow(tmp_path / name, REG)
        assert wf.loaded_from == str(tmp_path / name)
        assert wf.signature == load_workflow(linear(), REG).signature
    assert load_workflow(str(tmp_path / "w.yaml"), REG).entry == "a"


@pytest.mark.parametrize(("name", "text", "expected"), [
    ("w.json", "{nope", "definition: w.json is not valid JSON: "),
    ("w.yaml", "a: [1", "definition: w.yaml is not valid YAML: "),
    ("w.yaml", "a: &x [1]\nb: *x", "definition: w.yaml is not valid YAML: aliases (*name) are not supported"),
    ("w.json", "[1, 2]", "definition: must be an object, not a list"),
    ("w.txt", "{}", "definition: "),
])
def test_unreadable_files_are_problems(tmp_path: Path, name: str, text: str, expected: str) -> None:
    (tmp_path / name).write_text(text)
    problems = problems_of(tmp_path / name)
    assert len(problems) == 1 and problems[0].startswith(expected), problems


def test_text_that_is_not_valid_unicode_is_a_located_problem(tmp_path: Path) -> None:
    d = linear()
    d["name"] = "linear\ud800"
    d["nodes"][1]["metadata"] = {"note": ["fine", "bad \udfff"], "k\ud800": 1}
    d["connections"][0]["condition"] = "x != '\ud800'"
    (tmp_path / "w.json").write_text(json.dumps(d))  # written as \\ud800 escapes: valid JSON
    expected = [
        "connections[0].condition: \"x != '\\ud800'\" contains the surrogate code point "
        "'\\ud800' at offset 6, which is not valid Unicode text and cannot be stored",
        "name: 'linear\\ud800' contains the surrogate code point '\\ud800' at offset 6, which "
        "is not valid Unicode text and cannot be stored",
        "nodes[1].metadata.note[1]: 'bad \\udfff' contains the surrogate code point '\\udfff' "
        "at offset 4, which is not valid Unicode text and cannot be stored",
        "nodes[1].metadata: key: 'k\\ud800' contains the surrogate code point '\\ud800' at "
        "offset 1, which is not valid Unicode text and cannot be stored",
    ]
    for source in (d, tmp_path / "w.json"):
        with pytest.raises(WorkflowValidationError) as info:
            load_workflow(source, REG)
        assert info.value.problems == expected
        str(info.value).encode("utf-8")  # the error itself can be printed and logged


def test_a_missing_file_is_a_problem(tmp_path: Path) -> None:
    assert problems_of(tmp_path / "none.json")[0].startswith("definition: cannot read ")


def _sub_definition() -> dict[str, Any]:
    return {"name": "inner", "state": {"reading": "float", "status": "str"},
            "nodes": nodes({"id": "classify", "is_entry": True, "is_exit": True})}


async def test_workflow_files_nest_relative_to_the_definition(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "flows" / "parts").mkdir(parents=True)
    (tmp_path / "flows" / "parts" / "inner.yaml").write_text(yaml.safe_dump(_sub_definition()))
    outer = {"name": "outer", "state": {"level": "float", "verdict": "str"},
             "nodes": [{"id": "check", "workflow": "parts/inner.yaml", "is_entry": True,
                        "is_exit": True, "inputs": {"reading": "level"},
                        "outputs": {"verdict": "status"}}]}
    (tmp_path / "flows" / "outer.json").write_text(json.dumps(outer))
    monkeypatch.chdir(tmp_path)
    reg = {"classify": lambda s: {"status": "high" if s.reading > 7 else "ok"}}
    wf = load_workflow(Path("flows/outer.json"), reg)
    assert wf.nodes["check"].kind == "subworkflow"
    assert (await run(wf, {"level": 9.0})).state.verdict == "high"
    # a mapping's paths are relative to base_dir
    assert load_workflow(outer, reg, base_dir=tmp_path / "flows").nodes["check"].subworkflow
    assert problems_of(outer, reg)[0].startswith("nodes[0].workflow: parts/inner.yaml: definition: "
                                                 "cannot read")


def test_nested_file_problems_are_prefixed_with_the_node(tmp_path: Path) -> None:
    bad = _sub_definition()
    bad["nodes"][0]["is_exit"] = False
    (tmp_path / "inner.json").write_text(json.dumps(bad))
    outer = linear()
    outer["nodes"][1] = {"id": "b", "workflow": "inner.json", "inputs": ["nope"]}
    problems = problems_of(outer, {"a": step(), "c": step(), "classify": step()}, base_dir=tmp_path)
    assert problems == ["nodes[1].workflow: inner.json: nodes: no exit node; set \"is_exit\": "
                        "true on at least one node"]


def test_a_workflow_file_that_includes_itself_is_a_problem(tmp_path: Path) -> None:
    d = linear()
    d["nodes"][1] = {"id": "b", "workflow": "self.json"}
    (tmp_path / "self.json").write_text(json.dumps(d))
    problems = problems_of(tmp_path / "self.json")
    assert problems == ["nodes[1].workflow: 'self.json' includes itself"]


async def test_registry_workflows_are_sub_workflow_nodes_with_checked_mappings() -> None:
    inner = load_workflow(_sub_definition(), {"classify": lambda s: {"status": f"got {s.reading}"}})
    d = {"name": "outer", "state": {"level": "float", "verdict": "str"},
         "nodes": [{"id": "check", "agent_name": "inner", "is_entry": True, "is_exit": True,
                    "inputs": {"reading": "level"}, "outputs": {"verdict": "status"}}]}
    wf = load_workflow(d, {"inner": inner})
    assert (await run(wf, {"level": 2.0})).state.verdict == "got 2.0"
    d["nodes"][0].update(inputs={"nope": "level", "reading": "missing"}, outputs={"x": "status"})
    assert problems_of(d, {"inner": inner}) == [
        "nodes[0].inputs: 'nope' is not a field of 'inner'",
        "nodes[0].inputs: 'missing' is not a state field",
        "nodes[0].outputs: 'x' is not a state field"]


# -- agent specs -------------------------------------------------------------------------------


class FakeAgent:
    """Duck-typed agent spec: anything with ``node_spec(id)``."""

    def __init__(self, calls: list[Any]) -> None:
        self.calls = calls

    def node_spec(self, id: str) -> NodeSpec:
        return NodeSpec(id=id, fn=recorder(self.calls, {"answer": "42"}), kind="agent",
                        retry=RetryPolicy(max_attempts=5), meta={"agent": "fake"},
                        view=lambda state: state)


async def test_agent_specs_are_added_with_the_definitions_options() -> None:
    calls: list[Any] = []
    d = linear()
    d["nodes"][1].update(agent_name="agent", timeout=3, skip_condition="skip_b")
    d["connections"][0]["context_passed"] = ["question"]
    wf = load_workflow(d, Registry(agent=FakeAgent(calls)))
    spec = wf.nodes["b"]
    assert spec.kind == "agent" and spec.retry == RetryPolicy(max_attempts=5)
    assert spec.timeout == 3 and spec.skip_if is not None and spec.skip_if.label == "skip_b"
    assert spec.meta["agent"] == "fake" and spec.meta[META_KEY]["agent_name"] == "agent"
    result = await run(wf, {"question": "why?", "other": 1})
    assert result.state.answer == "42"
    assert isinstance(calls[0], ContextView) and calls[0].model_dump() == {"question": "why?"}


class BrokenAgent:
    def node_spec(self, id: str) -> NodeSpec:
        raise ValueError("no model configured")


class WrongAgent:
    def node_spec(self, id: str) -> str:
        return "not a spec"


def test_agent_specs_that_fail_are_problems() -> None:
    d = linear()
    d["nodes"][1]["agent_name"] = "broken"
    d["nodes"][2]["agent_name"] = "wrong"
    assert problems_of(d, Registry(broken=BrokenAgent(), wrong=WrongAgent())) == [
        "nodes[1].agent_name: agent 'broken' cannot build its node: ValueError: no model configured",
        "nodes[2].agent_name: 'wrong'.node_spec('c') did not return a NodeSpec with that id"]


async def test_the_agent_class_works_as_a_registry_entry() -> None:
    from durable_flow import Agent
    from durable_flow.testing import ScriptedModel

    d = linear()
    d["nodes"][1]["agent_name"] = "writer"
    wf = load_workflow(d, Registry(writer=Agent(ScriptedModel(["hello"]), "Say hello",
                                                 output_key="answer")))
    result = await run(wf, {"question": "hi?"})
    assert result.status is RunStatus.COMPLETED and result.state.answer == "hello"


# -- context_passed ----------------------------------------------------------------------------


async def test_context_passed_shows_the_target_only_those_keys() -> None:
    calls: list[Any] = []
    d = linear() | {"state": {"user": "str", "secret": "str", **SEEN_STATE}}
    d["connections"][0]["context_passed"] = ["user"]
    result = await run(load_workflow(d, Registry(b=recorder(calls))), {"user": "ann", "secret": "s"})
    assert result.status is RunStatus.COMPLETED
    (seen,) = calls
    assert isinstance(seen, ContextView) and seen.user == "ann"
    assert seen.model_dump() == {"user": "ann"} and not hasattr(seen, "secret")
    with pytest.raises(Exception, match="frozen"):
        seen.user = "bob"


def _views(connections: list[dict[str, Any]], **extra: Any) -> Workflow:
    d = {"name": "v", "nodes": nodes({"id": "a", "is_entry": True, "fan_out": True}, "b",
                                     {"id": "c", "is_exit": True}),
         "connections": connections, **extra}
    return load_workflow(d, REG)


def test_several_incoming_connections_see_the_union_of_their_keys() -> None:
    state = FreeBlackboard(x=1, y=2, z=3)
    conns = links("a>b", "a>c", "b>c")
    conns[1]["context_passed"], conns[2]["context_passed"] = ["x"], ["y", "x"]
    view = _views(conns).nodes["c"].view
    assert view is not None and view(state).model_dump() == {"x": 1, "y": 2}
    conns[2].pop("context_passed")  # one connection without context_passed: every key
    assert _views(conns).nodes["c"].view is None


def test_the_entry_always_sees_every_key() -> None:
    conns = links("a>b", ("b>a", "x > 1"), "b>c")
    conns[1]["context_passed"] = ["x"]
    assert _views(conns, max_supersteps=9).nodes["a"].view is None


def test_context_keys_missing_from_a_free_form_blackboard_are_absent() -> None:
    conns = links("a>b", "b>c")
    conns[0]["context_passed"] = ["x", "never_set", "messages"]
    view = _views(conns).nodes["b"].view
    assert view is not None and view(FreeBlackboard(x=1)).model_dump() == {"x": 1, "messages": []}


def test_context_keys_are_checked_against_the_state() -> None:
    d = linear() | {"state": {"user": "str"}}
    d["connections"][0]["context_passed"] = ["user", "nope", "model_dump"]
    assert problems_of(d) == ["connections[0].context_passed[1]: 'nope' is not a state field",
                              "connections[0].context_passed[2]: 'model_dump' is not a state field"]


def test_sub_workflow_inputs_must_be_in_the_context_passed(tmp_path: Path) -> None:
    (tmp_path / "inner.json").write_text(json.dumps(_sub_definition()))
    d = {"name": "o", "state": {"level": "float", "other": "str"},
         "nodes": [*nodes({"id": "a", "is_entry": True}),
                   {"id": "check", "workflow": "inner.json", "is_exit": True,
                    "inputs": {"reading": "level"}}],
         "connections": [{"source_id": "a", "target_id": "check", "context_passed": ["other"]}]}
    assert problems_of(d, Registry(classify=step()), base_dir=tmp_path) == [
        "nodes[1].inputs: 'level' is not in the context passed to 'check'"]


# -- round trip ------------------------------------------------------------------------------------


RICH = {
    "name": "rich", "version": 3, "description": "everything at once", "max_supersteps": 40,
    "state": {"x": "int", "seen": {"type": "list[str]", "reducer": "append"},
              "total": {"type": "float", "reducer": "add", "default": 1.5, "description": "t"},
              "opt": "dict[str, list[int]] | None"},
    "nodes": [
        {"id": "a", "agent_name": "a", "is_entry": True, "fan_out": True,
         "metadata": {"position": [1, 2]}},
        {"id": "b", "agent_name": "b", "skip_condition": "x > 3",
         "retry": {"max_attempts": 4, "jitter": False}, "timeout": 2.5, "description": "bee"},
        {"id": "c", "agent_name": "c"},
        {"id": "j", "agent_name": "j", "join": True},
        {"id": "z", "agent_name": "z", "is_exit": True},
    ],
    "connections": [
        {"source_id": "a", "target_id": "b", "condition": "x > 0", "context_passed": ["x"]},
        {"source_id": "a", "target_id": "c"},
        {"source_id": "b", "target_id": "j"},
        {"source_id": "c", "target_id": "j", "description": "second branch"},
        {"source_id": "j", "target_id": "a", "condition": "x < 0"},
        {"source_id": "j", "target_id": "z", "context_passed": ["seen", "total"]},
    ],
    "metadata": {"editor": "ui"},
}


@pytest.mark.parametrize("definition", [linear(), RICH], ids=["linear", "rich"])
def test_dump_writes_the_definition_back(definition: dict[str, Any]) -> None:
    wf = load_workflow(copy.deepcopy(definition), REG)
    assert dump_workflow(wf) == definition
    again = load_workflow(dump_workflow(wf), REG)
    assert again.signature == wf.signature and dump_workflow(again) == definition


def test_the_example_round_trips(tmp_path: Path) -> None:
    example = _example_module()
    wf = load_workflow(EXAMPLES / "meal_flow.json", example.REGISTRY)
    assert dump_workflow(wf) == json.loads((EXAMPLES / "meal_flow.json").read_text())
    for name in ("copy.json", "copy.yaml"):
        dump_workflow(wf, tmp_path / name)
        (tmp_path / "glucose_check.json").write_text((EXAMPLES / "glucose_check.json").read_text())
        assert load_workflow(tmp_path / name, example.REGISTRY).signature == wf.signature


async def test_builder_workflows_dump_when_the_format_can_express_them() -> None:
    class S(Blackboard):
        n: int = 0
        seen: Annotated[list[str], append] = []

    b = WorkflowBuilder("built", state=S)
    for name in ("start", "big", "small", "end"):
        fn = step()
        fn.__name__ = name
        b.add_node(name, fn)
    b.set_entry("start").set_exit("end")
    b.add_switch("start", [("n > 5", "big")], default="small")
    b.add_edge("big", "end").add_edge("small", "end")
    b.add_edge("end", "__end__")
    wf = b.build()
    d = dump_workflow(wf)
    assert d["connections"][:2] == [
        {"source_id": "start", "target_id": "big", "condition": "n > 5"},
        {"source_id": "start", "target_id": "small"}]
    assert d["nodes"][1] == {"id": "big", "agent_name": "big", "fan_out": True}
    again = load_workflow(d, REG)
    assert (await run(again, {"n": 9})).state.seen == ["start", "big", "end"]
    assert (await run(again, {"n": 1})).state.seen == ["start", "small", "end"]


def test_what_the_format_cannot_express_is_refused() -> None:
    b = WorkflowBuilder("odd")
    b.add_node("a", lambda s: Command(goto="b"), goto=["b"])
    b.add_node("b", step())
    b.set_entry("a")
    b.add_edge("a", "b", when=lambda s: True)
    with pytest.raises(WorkflowValidationError) as info:
        dump_workflow(b.build())
    assert info.value.problems == [
        "node 'a': goto targets cannot be written",
        "edge a->b: the callable condition 'test_what_the_format_cannot_express_is_refused.<locals>."
        "<lambda>' cannot be written; use an expression string"]


# -- the registry helper ---------------------------------------------------------------------------


def test_load_registry_resolves_module_and_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    registry = load_registry("meal_flow:REGISTRY")
    assert set(registry) >= {"greeter", "feedback"}
    for spec, message in (("meal_flow", "expected 'module:NAME'"),
                          ("no_such_module_xyz:R", "cannot import"),
                          ("meal_flow:NOPE", "meal_flow has no 'NOPE'"),
                          ("meal_flow:HERE", "is a PosixPath, not a mapping")):
        with pytest.raises(WorkflowValidationError, match=message):
            load_registry(spec)


# -- the example ---------------------------------------------------------------------------------


def _example_module() -> Any:
    spec = importlib.util.spec_from_file_location("meal_flow_example", EXAMPLES / "meal_flow.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_the_meal_flow_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    results = await _example_module().main()
    everything, no_meal, no_glucose = (results[k].state for k in
                                       ("everything", "skip meal", "skip glucose"))
    assert everything.log == ["greeted", "meal logged", "reading given: 9.1", "glucose high",
                              "alert: glucose is high"]
    assert everything.feedback == "Ann: oatmeal with berries; glucose high"
    assert no_meal.log == ["greeted", "sensor read: 5.4", "glucose normal"]
    assert no_meal.feedback == "Bo: no meal logged; glucose normal"
    assert no_glucose.log == ["greeted", "meal logged"]
    assert no_glucose.feedback == "Cy: oatmeal with berries; glucose not checked"
    assert "flowchart TD" in capsys.readouterr().out


# -- fuzzing: any input is a Workflow or a WorkflowValidationError ------------------------------


def _fuzz_registry() -> dict[str, Any]:
    sub = load_workflow({"name": "sub", "state": {"v": "int"},
                         "nodes": [{"id": "s", "agent_name": "f", "is_entry": True, "is_exit": True}]},
                        {"f": step()})
    return {"f": step(), "g": recorder([]), "sub": sub, "agent": FakeAgent([]),
            "broken": BrokenAgent(), "wrong": WrongAgent(), "bad": 42, "cls": dict}


FUZZ_REGISTRY = _fuzz_registry()
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20)
ids = st.sampled_from(["a", "b", "c", "d", "1x", "", "__end__", "a b"])
expressions = st.one_of(
    st.text(max_size=30),
    st.text(alphabet=string.ascii_lowercase + string.digits + " .'\"()[]<>=!_-", max_size=40),
    st.sampled_from(["x > 1", "flags.skip", "not done", "a in ['x', 'y']", "v == 1 and w",
                     "x ==", "(((", "__class__", "true", "x.0.y", "1 < 2 < 3"]),
)
type_names = st.one_of(st.sampled_from(["str", "int", "float", "list[str]", "dict[str, int]",
                                        "float | None", "any", "list[", "tuple"]),
                       st.text(max_size=15))


def _maybe(key: str, values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(st.just({}), values.map(lambda v: {key: v}))


node_dicts = st.builds(
    lambda *parts: {k: v for part in parts for k, v in part.items()},
    ids.map(lambda i: {"id": i}),
    _maybe("agent_name", st.sampled_from([*FUZZ_REGISTRY, "missing"]) | json_values),
    _maybe("is_entry", st.booleans() | json_values), _maybe("is_exit", st.booleans()),
    _maybe("skip_condition", expressions), _maybe("fan_out", st.booleans()),
    _maybe("join", st.booleans()),
    _maybe("retry", st.fixed_dictionaries({}, optional={
        "max_attempts": st.integers(-1, 5) | json_values, "initial_delay": st.floats(),
        "backoff": st.floats(), "jitter": json_values})),
    _maybe("timeout", st.floats() | st.integers() | json_values),
    _maybe("inputs", st.lists(st.sampled_from(["v", "x"])) | json_values),
    _maybe("outputs", st.dictionaries(st.sampled_from(["v", "x"]), st.sampled_from(["v", "x"]))),
    _maybe("workflow", st.sampled_from(["missing.json", "x.txt"]) | json_values),
    _maybe("junk", json_values),
)
conn_dicts = st.builds(
    lambda *parts: {k: v for part in parts for k, v in part.items()},
    _maybe("source_id", ids | json_values), _maybe("target_id", ids),
    _maybe("condition", expressions | json_values),
    _maybe("context_passed", st.lists(st.sampled_from(["x", "v", "messages", "_p", "model_x"]))
           | json_values),
)
definitions = st.builds(
    lambda *parts: {k: v for part in parts for k, v in part.items()},
    _maybe("name", st.sampled_from(["w", ""]) | json_values),
    _maybe("nodes", st.lists(node_dicts | json_values, max_size=6)),
    _maybe("connections", st.lists(conn_dicts | json_values, max_size=8)),
    _maybe("state", st.dictionaries(st.sampled_from(["x", "v", "messages", "_p", "flags"])
                                    | st.text(max_size=6),
                                    type_names | st.fixed_dictionaries(
                                        {"type": type_names},
                                        optional={"reducer": st.sampled_from(
                                            ["append", "add", "merge", "none", "x"]),
                                            "default": json_values}), max_size=4) | json_values),
    _maybe("max_supersteps", st.integers(-2, 50) | json_values),
    _maybe("version", json_values),
)
@st.composite
def near_valid(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly loadable definitions: a spanning tree from the entry plus random extras."""
    count = draw(st.integers(1, 6))
    names = [f"n{i}" for i in range(count)]
    good_conditions = st.sampled_from(["x > 1", "flags.skip", "not v", "x in [1, 2]", "v == 'a'"])
    rarely = st.sampled_from([False, False, False, True])
    node_list = [{"id": n, "agent_name": draw(st.sampled_from(["f", "g", "agent", "sub"])),
                  **({"is_entry": True} if i == 0 else {}),
                  **({"is_exit": True} if draw(rarely) or i == count - 1 else {}),
                  **draw(_maybe("skip_condition", good_conditions)),
                  "fan_out": draw(st.booleans()), "join": draw(rarely),
                  **draw(_maybe("retry", st.just({"max_attempts": 2}))),
                  **draw(_maybe("timeout", st.floats(0.1, 10)))}
                 for i, n in enumerate(names)]
    pairs = [(draw(st.integers(0, j - 1)), j) for j in range(1, count)]
    pairs += draw(st.lists(st.tuples(st.integers(0, count - 1), st.integers(0, count - 1)),
                           max_size=count))
    conns = [{"source_id": names[i], "target_id": names[j],
              **draw(_maybe("condition", good_conditions)),
              **draw(_maybe("context_passed", st.lists(st.sampled_from(["x", "v", "flags"]))))}
             for i, j in pairs]
    d: dict[str, Any] = {"name": "fuzz", "nodes": node_list, "connections": conns,
                         **draw(_maybe("max_supersteps", st.integers(1, 30))),
                         **draw(_maybe("state", st.just({"x": "int", "v": "str | None",
                                                         "flags": "dict[str, bool]"})))}
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):  # then break something, sometimes
        target = draw(st.sampled_from([d, *node_list, *conns]))
        target[draw(st.sampled_from(sorted(target)))] = draw(json_values)
    return d


FUZZ = settings(max_examples=300, deadline=timedelta(seconds=2),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def _load_or_reject(source: Any, **kw: Any) -> Workflow | None:
    try:
        wf = load_workflow(source, FUZZ_REGISTRY, **kw)
    except WorkflowValidationError as exc:
        assert exc.problems and all(isinstance(p, str) for p in exc.problems)
        return None
    # whatever loads also dumps, draws and reloads to the same graph
    assert load_workflow(dump_workflow(wf), FUZZ_REGISTRY, **kw).signature == wf.signature
    assert to_mermaid(wf) and to_dot(wf)
    return wf


@FUZZ
@given(json_values)
def test_fuzz_any_json_value_loads_or_is_rejected(value: Any) -> None:
    _load_or_reject(value)


@FUZZ
@given(definitions)
def test_fuzz_definition_shaped_input_loads_or_is_rejected(definition: dict[str, Any]) -> None:
    _load_or_reject(definition)


@FUZZ
@given(near_valid())
def test_fuzz_near_valid_definitions_load_or_are_rejected(definition: dict[str, Any]) -> None:
    _load_or_reject(definition)


@FUZZ
@given(expressions, expressions)
def test_fuzz_expressions_in_definitions_load_or_are_rejected(cond: str, skip: str) -> None:
    d = linear()
    d["connections"][0]["condition"] = cond
    d["nodes"][1]["skip_condition"] = skip
    d["nodes"][0]["agent_name"] = d["nodes"][1]["agent_name"] = d["nodes"][2]["agent_name"] = "f"
    _load_or_reject(d)


@settings(max_examples=150, deadline=timedelta(seconds=2),
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=200), st.sampled_from([".json", ".yaml"]))
def test_fuzz_file_text_loads_or_is_rejected(tmp_path: Path, text: str, suffix: str) -> None:
    path = tmp_path / f"w{suffix}"
    path.write_text(text, encoding="utf-8")
    _load_or_reject(path)


@FUZZ
@given(st.builds(lambda n: {"name": "n", "nodes": [
    {"id": f"n{i}", "agent_name": "f", "is_entry": i == 0, "is_exit": i == n - 1,
     "fan_out": i % 2 == 0} for i in range(n)],
    "connections": [{"source_id": f"n{i}", "target_id": f"n{j}", "condition": f"x > {j}"}
                    for i in range(n) for j in range(i + 1, n)]}, st.integers(1, 14)))
def test_fuzz_dense_graphs_load_quickly(definition: dict[str, Any]) -> None:
    assert _load_or_reject(definition) is not None


def test_a_file_without_a_name_takes_its_file_name(tmp_path: Path) -> None:
    path = tmp_path / "intake_flow.yaml"
    path.write_text("nodes:\n  - {id: a, agent_name: a, is_entry: true, is_exit: true}\n")
    wf = load_workflow(path, {"a": lambda state: {}})
    assert wf.name == "intake_flow"
    with pytest.raises(WorkflowValidationError, match="name: is required"):
        load_workflow({"nodes": [{"id": "a", "agent_name": "a", "is_entry": True,
                                  "is_exit": True}]}, {"a": lambda state: {}})


def test_problems_come_in_file_order_with_unreachable_nodes_and_a_close_agent_name() -> None:
    definition = {"name": "w", "nodes": [
        {"id": "a", "agent_name": "greeter", "is_entry": True, "is_exit": True},
        {"id": "b", "agent_name": "meal_loger", "skip_condition": "x =="},
        {"id": "c", "agent_name": "greeter"}],
        "connections": [{"source_id": "a", "target_id": "nowhere"},
                        {"source_id": "b", "target_id": "c"}]}
    with pytest.raises(WorkflowValidationError) as err:
        load_workflow(definition, {"greeter": lambda s: {}, "meal_logger": lambda s: {}})
    problems = err.value.problems
    assert [p.split(":")[0].split(".")[0] for p in problems] == [
        "nodes[1]", "nodes[1]", "nodes[1]", "nodes[2]", "connections[0]"], problems
    assert any("'meal_loger' is not in the registry (did you mean 'meal_logger'?)" in p
               for p in problems)
    assert sum("is unreachable" in p for p in problems) == 2


def test_unreachable_nodes_are_listed_beside_a_second_entry_node() -> None:
    definition = {"name": "w", "nodes": [
        {"id": "start", "agent_name": "a", "is_entry": True},
        {"id": "other", "agent_name": "a", "is_entry": True},
        {"id": "orphan", "agent_name": "a"},
        {"id": "end", "agent_name": "a", "is_exit": True}],
        "connections": [{"source_id": "start", "target_id": "end"},
                        {"source_id": "other", "target_id": "end"}]}
    with pytest.raises(WorkflowValidationError) as err:
        load_workflow(definition, {"a": lambda s: {}})
    problems = err.value.problems
    assert any("a second entry node" in p for p in problems), problems
    assert "nodes[2]: node 'orphan' is unreachable from any entry ('start', 'other')" in problems
    assert not any("'end' is unreachable" in p or "'other' is unreachable" in p for p in problems)
