"""Building map nodes: builder options and checks, declarative map connections, diagrams."""

from __future__ import annotations

from typing import Annotated, Any

import pytest

from durable_flow import (
    Blackboard,
    Command,
    MemoryStore,
    NodeContext,
    RunStatus,
    Runtime,
    Send,
    WorkflowBuilder,
    WorkflowValidationError,
    append,
    dump_workflow,
    load_workflow,
    to_mermaid,
)
from durable_flow.building._diagram import to_dot


class Board(Blackboard):
    items: list[str] = []
    out: Annotated[list[str], append] = []
    done: bool = False


def work(state: Board, ctx: NodeContext) -> dict[str, Any]:
    return {"out": [f"{ctx.node}={ctx.arg}"]}


def problems(b: WorkflowBuilder) -> list[str]:
    with pytest.raises(WorkflowValidationError) as info:
        b.build()
    return info.value.problems


# -- builder -------------------------------------------------------------------------------


def test_the_node_decorator_takes_arg_type_and_max_concurrency() -> None:
    b = WorkflowBuilder("deco", state=Board)

    @b.node(arg_type=int, max_concurrency=2)
    def square(state: Board, ctx: NodeContext) -> None:
        return None

    b.set_entry("square")
    spec = b.build().nodes["square"]
    assert spec.arg_type is int and spec.max_concurrency == 2


@pytest.mark.parametrize("limit", [0, -1, 1.5, True, "3"])
def test_max_concurrency_must_be_a_positive_int(limit: Any) -> None:
    b = WorkflowBuilder("bad", state=Board)
    b.add_node("work", work, max_concurrency=limit)
    b.set_entry("work")
    assert problems(b) == [f"node 'work': max_concurrency must be a positive int, got {limit!r}"]


def test_arg_type_must_be_a_type_pydantic_can_validate_into() -> None:
    b = WorkflowBuilder("bad", state=Board)
    b.add_node("work", work, arg_type=object())
    b.set_entry("work")
    [problem] = problems(b)
    assert problem.startswith("node 'work' arg_type:") and "not a type" in problem


def test_a_map_needs_a_connection_and_a_state_field() -> None:
    b = WorkflowBuilder("maps", state=Board)
    b.add_node("split", lambda s: None).add_node("work", work)
    b.set_entry("split").add_edge("split", "work")
    b.map_connection("split", "work", "nope")
    b.map_connection("work", "split", "items")
    assert problems(b) == [
        "map split -> work: items 'nope' does not start with a state field of Board",
        "map work -> split: there is no edge or switch case from 'work' to 'split' to make a map"]


async def test_a_map_connection_of_the_builder_sends_one_instance_per_item() -> None:
    b = WorkflowBuilder("maps", state=Board)
    b.add_node("split", lambda s: None).add_node("work", work)
    b.set_entry("split").add_switch("split", [("done", "split")], default="work")
    b.map_connection("split", "work", "items")
    async with Runtime(MemoryStore()) as rt:
        r = await rt.run(b.build(), {"items": ["x", "y"]})
    assert list(r.state.out) == ["work[0]=x", "work[1]=y"]


def test_maps_change_the_signature_only_where_they_are() -> None:
    def build(mapped: bool) -> Any:
        b = WorkflowBuilder("sig", state=Board)
        b.add_node("split", lambda s: None).add_node("work", work)
        b.set_entry("split").add_edge("split", "work")
        if mapped:
            b.map_connection("split", "work", "items")
        return b.build()

    assert build(True).signature != build(False).signature
    assert "maps" not in build(False).describe()


# -- declarative ---------------------------------------------------------------------------

STATE = {"items": "list[str]", "out": {"type": "list[str]", "reducer": "append"},
         "done": "bool"}


def definition(**conn: Any) -> dict[str, Any]:
    return {
        "name": "mapped", "state": STATE,
        "nodes": [{"id": "split", "agent_name": "noop", "is_entry": True},
                  {"id": "work", "agent_name": "work"},
                  {"id": "end", "agent_name": "finish", "is_exit": True}],
        "connections": [{"source_id": "split", "target_id": "work", **conn},
                        {"source_id": "work", "target_id": "end"}],
    }


REGISTRY = {"noop": lambda s: None, "work": work, "finish": lambda s: {"done": True}}


async def test_a_map_connection_sends_one_instance_per_element_of_the_field() -> None:
    wf = load_workflow(definition(map="items"), REGISTRY)
    async with Runtime(MemoryStore()) as rt:
        r = await rt.run(wf, {"items": ["a", "b", "c"]})
        assert r.status is RunStatus.COMPLETED, r.error
        assert list(r.state.out) == ["work[0]=a", "work[1]=b", "work[2]=c"]
        assert r.state.done
        [merged] = [c for c in await rt.history(r.run_id) if c.nodes and "[" in c.nodes[0]]
        assert merged.nodes == ("work[0]", "work[1]", "work[2]")
        assert merged.routing_reason == "work: default -> end"  # said once, not per instance


def test_the_loader_checks_the_mapped_field_exists() -> None:
    with pytest.raises(WorkflowValidationError) as info:
        load_workflow(definition(map="itemz"), REGISTRY)
    assert info.value.problems == [
        "connections[0].map: 'itemz' is not a state field (a map sends one instance of "
        "'work' per item of a list field)"]


def test_map_must_be_a_string_and_cannot_lead_into_a_join() -> None:
    with pytest.raises(WorkflowValidationError) as info:
        load_workflow(definition(map=3), REGISTRY)
    assert info.value.problems == ["connections[0].map: must be a string, not a number"]
    joined = definition(map="items")
    joined["nodes"][1]["join"] = True
    with pytest.raises(WorkflowValidationError) as info:
        load_workflow(joined, REGISTRY)
    assert any(p.startswith("connections[0].map: a connection into join node 'work'")
               for p in info.value.problems)


async def test_a_map_over_a_field_that_is_not_a_list_fails_the_run() -> None:
    d = definition(map="done")
    wf = load_workflow(d, REGISTRY)
    async with Runtime(MemoryStore()) as rt:
        r = await rt.run(wf, {})
    assert r.status is RunStatus.FAILED and r.error is not None
    assert "maps over 'done', which holds bool, not a list" in r.error.message


def test_a_map_connection_is_written_back_by_dump() -> None:
    wf = load_workflow(definition(map="items"), REGISTRY)
    dumped = dump_workflow(wf)
    assert dumped["connections"][0] == {"source_id": "split", "target_id": "work",
                                        "map": "items"}
    assert load_workflow(dumped, REGISTRY).signature == wf.signature


# -- diagrams ------------------------------------------------------------------------------


def sending_workflow() -> Any:
    b = WorkflowBuilder("sends", state=Board)
    b.add_node("split", lambda s: Command(goto=[Send("work", i) for i in s.items]),
               goto=["work"])
    b.add_node("work", work, arg_type=str, max_concurrency=4)
    b.set_entry("split")
    return b.build()


def test_mermaid_draws_a_map_node_as_a_stack() -> None:
    text = to_mermaid(sending_workflow())
    assert ('n1@{ shape: procs, label: "work<br/><small>map, at most 4 at once</small>" }'
            in text)
    mapped = to_mermaid(load_workflow(definition(map="items"), REGISTRY))
    assert 'n1@{ shape: procs, label: "work<br/><small>map</small>" }' in mapped
    assert 'n0 -->|"map items"| n1' in mapped


def test_dot_draws_a_map_node_as_a_3d_box() -> None:
    text = to_dot(sending_workflow())
    assert '"work" [label="work\\nmap, at most 4 at once", shape=box3d' in text


def test_a_definition_bounds_the_instances_with_max_concurrency() -> None:
    d = definition(map="items")
    d["nodes"][1]["max_concurrency"] = 4
    wf = load_workflow(d, REGISTRY)
    assert wf.nodes["work"].max_concurrency == 4
    assert dump_workflow(wf)["nodes"][1]["max_concurrency"] == 4
    d["nodes"][1]["max_concurrency"] = 0
    with pytest.raises(WorkflowValidationError) as info:
        load_workflow(d, REGISTRY)
    assert info.value.problems == ["nodes[1].max_concurrency: must be at least 1, not 0"]
