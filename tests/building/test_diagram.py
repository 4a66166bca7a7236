"""Mermaid and DOT diagrams of workflows: marks, routing styles, escaping."""

from __future__ import annotations

from typing import Any

from durable_flow import Command, Workflow, WorkflowBuilder, load_workflow, to_mermaid
from durable_flow.building._diagram import to_dot


def fn(state: Any) -> None:
    return None


REG = {"f": fn}


def meal() -> Workflow:
    return load_workflow({
        "name": "meal",
        "nodes": [
            {"id": "greeter", "agent_name": "f", "is_entry": True},
            {"id": "meal", "agent_name": "f", "skip_condition": "flags.skip_meal"},
            {"id": "glucose", "agent_name": "f", "skip_condition": "flags.skip_glucose"},
            {"id": "feedback", "agent_name": "f", "is_exit": True},
        ],
        "connections": [{"source_id": "greeter", "target_id": "meal"},
                        {"source_id": "meal", "target_id": "glucose"},
                        {"source_id": "glucose", "target_id": "feedback"}],
    }, REG)


def branching() -> Workflow:
    inner = load_workflow({"name": "inner", "nodes": [
        {"id": "x", "agent_name": "f", "is_entry": True, "is_exit": True}]}, REG)
    return load_workflow({
        "name": "branching",
        "nodes": [
            {"id": "start", "agent_name": "f", "is_entry": True},
            {"id": "split", "agent_name": "f", "fan_out": True},
            {"id": "left", "agent_name": "f"},
            {"id": "right", "agent_name": "inner"},
            {"id": "end", "agent_name": "f", "join": True, "is_exit": True},
            {"id": "other", "agent_name": "f", "is_exit": True},
        ],
        "connections": [
            {"source_id": "start", "target_id": "split", "condition": "kind == \"a|b\" and n < 3"},
            {"source_id": "start", "target_id": "other"},
            {"source_id": "split", "target_id": "left", "condition": "n > 1"},
            {"source_id": "split", "target_id": "right"},
            {"source_id": "left", "target_id": "end"},
            {"source_id": "right", "target_id": "end"},
        ],
    }, {"f": fn, "inner": inner})


def test_mermaid_of_the_meal_flow() -> None:
    assert to_mermaid(meal()) == """\
flowchart TD
    __start__(("start")):::terminal
    n0["greeter<br/><small>entry</small>"]
    n1["meal<br/><small>skip if flags.skip_meal</small>"]
    n2["glucose<br/><small>skip if flags.skip_glucose</small>"]
    n3["feedback<br/><small>exit</small>"]
    __end__(("end")):::terminal
    __start__ --> n0
    n0 --> n1
    n1 --> n2
    n2 --> n3
    n3 --> __end__
    classDef entry stroke-width:3px
    classDef exit stroke-width:3px,stroke:#444
    classDef skippable stroke-dasharray:5 5
    classDef join fill:#eef
    classDef terminal fill:#444,color:#fff
    class n0 entry
    class n1 skippable
    class n2 skippable
    class n3 exit
"""


def test_mermaid_marks_joins_sub_workflows_and_numbers_first_match() -> None:
    text = to_mermaid(branching())
    assert '    n4{{"end<br/><small>exit · join</small>"}}' in text  # a join is a hexagon
    assert '    n3[["right<br/><small>workflow inner</small>"]]' in text
    assert "    n2 ==> n4\n    n3 ==> n4\n" in text  # thick arrows into the join
    assert '    n0 -->|"1. kind == #quot;a#124;b#quot; and n #lt; 3"| n1' in text
    assert '    n0 -->|"2. otherwise"| n5' in text
    assert '    n1 -->|"n #gt; 1"| n2\n    n1 --> n3\n' in text  # fan-out: not numbered
    assert "    class n4 exit\n    class n4 join\n" in text
    assert "n5 --> __end__" in text and "n4 --> __end__" in text


def test_mermaid_labels_never_carry_raw_quotes() -> None:
    for line in to_mermaid(branching()).splitlines():
        if '"' in line:
            inner = line[line.index('"') + 1:line.rindex('"')]
            assert '"' not in inner, line


def builder_flow() -> Workflow:
    b = WorkflowBuilder("built")
    b.add_node("a", lambda s: Command(goto="c"), goto=["c"])
    b.add_node("b", fn).add_node("c", fn)
    b.set_entry("a")
    b.add_switch("a", [("x > 1", "b")], default="c")
    b.add_edge("b", "__end__")
    return b.build()


def test_diagrams_draw_any_workflow_with_gotos_and_end() -> None:
    text = to_mermaid(builder_flow())
    assert '    n0 -->|"1. x #gt; 1"| n1\n    n0 -->|"2. otherwise"| n2\n' in text
    assert '    n0 -.->|"goto"| n2' in text and "    n1 --> __end__" in text
    dot = to_dot(builder_flow())
    assert '"a" -> "c" [style=dotted, label="goto"];' in dot and '"b" -> "__end__";' in dot


def test_dot_marks_entry_exit_skip_and_join() -> None:
    dot = to_dot(branching())
    assert dot.startswith('digraph "branching" {')
    assert '"__start__" -> "start";' in dot and '"end" -> "__end__";' in dot
    assert '"end" [label="end\\nexit · join", shape=hexagon, style="rounded", peripheries=2];' in dot
    assert '"right" [label="right\\nworkflow inner", shape=component' in dot
    assert '"left" -> "end" [style=bold, penwidth=2];' in dot
    assert '"start" -> "split" [label="1. kind == \\"a|b\\" and n < 3"];' in dot
    meal_dot = to_dot(meal())
    assert '"meal" [label="meal\\nskip if flags.skip_meal", shape=box, style="rounded,dashed"];' in meal_dot
    assert '"greeter" [label="greeter\\nentry", shape=box, style="rounded,bold"];' in meal_dot
