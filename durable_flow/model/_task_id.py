"""Task ids: a node, or one ``Send`` instance of it (``summarize[3]``).

A task of a superstep runs a node. A ``Send`` starts *instances* of a node,
numbered in ``Send`` order; their ids are the node id followed by the index,
``summarize[0]``, ``summarize[1]``, ... Node ids never hold ``[``, so the text
of a task id reads back unambiguously.

The engine holds task ids as :class:`TaskId` values; the text form is what
the store keeps (next tasks, task args, task writes, request ids, history
channels) and what people read. Text is parsed once, where it comes out of
a stored row, with :meth:`TaskId.parse`, and written with ``str()``.

``TaskId`` is hashable and sorts in task order: by node id, a plain task
before the instances of its node, instances by index (``[2]`` before ``[10]``).
This module imports nothing heavy: the command line lists runs with it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["TaskId", "group_tasks"]

_INSTANCE = re.compile(r"(?P<node>[^\[\]]+)\[(?P<index>\d+)\]")


@dataclass(frozen=True, slots=True)
class TaskId:
    """One task of a superstep: ``node``, or its ``index``-th instance (``node[index]``)."""

    node: str
    index: int | None = None

    @classmethod
    def parse(cls, text: str) -> TaskId:
        """The task id ``text`` stands for: ``work[3]`` -> ``TaskId("work", 3)``.

        Text that is not an instance id (no ``[``, or a malformed suffix) is a
        plain task of that name, as it always was.
        """
        if not text.endswith("]"):
            return cls(text)
        m = _INSTANCE.fullmatch(text)
        return cls(m["node"], int(m["index"])) if m is not None else cls(text)

    def __str__(self) -> str:
        return self.node if self.index is None else f"{self.node}[{self.index}]"

    @property
    def key(self) -> tuple[str, int]:
        """The sort key: node id, then index (a plain task first)."""
        return self.node, -1 if self.index is None else self.index

    def __lt__(self, other: TaskId) -> bool:
        return self.key < other.key

    def __le__(self, other: TaskId) -> bool:
        return self.key <= other.key

    def __gt__(self, other: TaskId) -> bool:
        return self.key > other.key

    def __ge__(self, other: TaskId) -> bool:
        return self.key >= other.key

    @property
    def is_instance(self) -> bool:
        """Whether a ``Send`` started this task."""
        return self.index is not None

    def renamed(self, nodes: Mapping[str, str]) -> TaskId:
        """The task with its node renamed through ``nodes`` (an instance keeps its index)."""
        new = nodes.get(self.node, self.node)
        return self if new == self.node else TaskId(new, self.index)


def group_tasks(tasks: Iterable[str]) -> list[str]:
    """Task ids for people: runs of consecutive instances shown as ``summarize[0..39]``."""
    out: list[str] = []
    run: tuple[str, int, int] | None = None  # node, first index, last index

    def close() -> None:
        if run is not None:
            node, first, last = run
            out.append(str(TaskId(node, first)) if first == last
                       else f"{node}[{first}..{last}]")

    for text in tasks:
        task = TaskId.parse(text)
        if task.index is not None and run is not None and run[0] == task.node \
                and task.index == run[2] + 1:
            run = (run[0], run[1], task.index)
            continue
        close()
        run = (task.node, task.index, task.index) if task.index is not None else None
        if task.index is None:
            out.append(text)
    close()
    return out
