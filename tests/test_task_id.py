"""Task ids: parsed once from their stored text, written back exactly, sorted in task order."""

from __future__ import annotations

import pytest

from durable_flow.model._task_id import TaskId, group_tasks


@pytest.mark.parametrize(("text", "task"), [
    ("work", TaskId("work")),
    ("work[3]", TaskId("work", 3)),
    ("work[10]", TaskId("work", 10)),
    ("a-b.c", TaskId("a-b.c")),
])
def test_stored_text_parses_once_and_writes_back_exactly(text: str, task: TaskId) -> None:
    assert TaskId.parse(text) == task
    assert str(task) == text
    assert task.is_instance is (task.index is not None)


@pytest.mark.parametrize("text", ["work[]", "work[x]", "work[-1]", "[3]", "w[1][2]"])
def test_text_that_is_no_instance_id_is_a_plain_task_of_that_name(text: str) -> None:
    assert TaskId.parse(text) == TaskId(text)
    assert str(TaskId.parse(text)) == text


def test_task_ids_sort_by_node_then_index_a_plain_task_first() -> None:
    tasks = [TaskId("work", 10), TaskId("b"), TaskId("work", 2), TaskId("work"), TaskId("a")]
    assert [str(t) for t in sorted(tasks)] == ["a", "b", "work", "work[2]", "work[10]"]
    assert TaskId("work", 2) < TaskId("work", 10) <= TaskId("work", 10)
    assert TaskId("x") > TaskId("work", 99) >= TaskId("work", 99)


def test_task_ids_are_hashable_values() -> None:
    seen = {TaskId("work", 1): "a", TaskId.parse("work[1]"): "b"}
    assert seen == {TaskId("work", 1): "b"}
    with pytest.raises(AttributeError):
        TaskId("work").index = 2  # type: ignore[misc]


def test_renaming_keeps_an_instance_index() -> None:
    assert TaskId("work", 2).renamed({"work": "job"}) == TaskId("job", 2)
    assert TaskId("work").renamed({"other": "x"}) == TaskId("work")


def test_group_tasks_joins_consecutive_instances_for_people() -> None:
    assert group_tasks(["a", "work[0]", "work[1]", "work[2]", "work[4]", "z"]) == [
        "a", "work[0..2]", "work[4]", "z"]
