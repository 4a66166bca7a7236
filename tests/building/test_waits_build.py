"""``WorkflowBuilder(..., waits=...)``: the mode is validated, kept on the Workflow,
part of the signature only when not the default, and mirrored in declarative files."""

from __future__ import annotations

from typing import Any

import pytest

from durable_flow import (
    END,
    Blackboard,
    ParkedTask,
    Snapshot,
    WorkflowBuilder,
    WorkflowValidationError,
    dump_workflow,
    load_workflow,
)


def _wf(**kw: Any) -> Any:
    b = WorkflowBuilder("w", state=Blackboard, **kw)
    b.add_node("a", lambda s: None)
    b.set_entry("a")
    b.add_edge("a", END)
    return b.build()


def test_the_default_waits_for_the_whole_superstep() -> None:
    assert _wf().waits == "superstep"
    assert "waits" not in _wf().describe()


def test_branch_mode_is_kept_on_the_workflow_and_changes_the_signature() -> None:
    wf = _wf(waits="branch")
    assert wf.waits == "branch"
    assert wf.signature != _wf().signature


def test_an_unknown_mode_is_a_validation_error_naming_it() -> None:
    with pytest.raises(WorkflowValidationError) as err:
        _wf(waits="task")
    assert any("waits must be 'superstep' or 'branch'" in p and "'task'" in p
               for p in err.value.problems)


def test_declarative_files_read_and_write_the_mode() -> None:
    definition = {"name": "d", "waits": "branch",
                  "nodes": [{"id": "a", "agent_name": "a", "is_entry": True, "is_exit": True}]}
    wf = load_workflow(definition, {"a": lambda s: None})
    assert wf.waits == "branch"
    assert dump_workflow(wf)["waits"] == "branch"
    plain = load_workflow({**definition, "waits": "superstep"}, {"a": lambda s: None})
    assert plain.waits == "superstep" and "waits" not in dump_workflow(plain)


def test_declarative_files_refuse_an_unknown_mode() -> None:
    definition = {"name": "d", "waits": "never",
                  "nodes": [{"id": "a", "agent_name": "a", "is_entry": True, "is_exit": True}]}
    with pytest.raises(WorkflowValidationError) as err:
        load_workflow(definition, {"a": lambda s: None})
    assert any("waits" in p and "'never'" in p for p in err.value.problems)


def test_a_snapshot_without_parked_tasks_has_an_empty_tuple() -> None:
    fields = Snapshot.__dataclass_fields__
    assert fields["parked"].default == ()
    parked = ParkedTask(node="approve", kind="request", waits_for=("r1",), since_superstep=2)
    assert parked.wake_at is None
    with pytest.raises(AttributeError):
        parked.node = "x"  # type: ignore[misc]
