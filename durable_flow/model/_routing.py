"""Choosing the next superstep's tasks: edges, switches, gotos, skips and joins."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._graph import END, Workflow
from ._paths import resolve_path
from ._send import Send, encode_arg
from ._task_id import TaskId

__all__ = ["Completed", "Routed", "route", "route_entry"]


@dataclass(frozen=True, slots=True)
class Completed:
    """A task that finished this superstep, with its dynamic routing if any.

    ``node`` is the task (``summarize[3]`` for an instance); ``sends`` are
    the ``Send`` targets of its ``Command`` (``goto`` holds the plain ones).
    """

    node: TaskId
    goto: tuple[str, ...] | None = None
    reason: str | None = None
    sends: tuple[Send, ...] = ()


@dataclass
class Routed:
    """The outcome of routing: next tasks, join buffers, reasons and skips.

    ``args`` holds the encoded argument of every instance in ``next_tasks``.
    """

    next_tasks: tuple[TaskId, ...]
    joins: dict[str, tuple[str, ...]]
    reason: str | None
    skipped: list[str] = field(default_factory=list)
    args: dict[TaskId, bytes] = field(default_factory=dict)


class _Router:
    def __init__(self, wf: Workflow, state: Any, joins: Mapping[str, Sequence[str]]) -> None:
        self.wf = wf
        self.state = state
        self.joins = {t: set(v) for t, v in joins.items()}
        self.next: set[TaskId] = set()
        self.reasons: list[str] = []
        self.skipped: list[str] = []
        self.args: dict[TaskId, bytes] = {}
        self.counts: dict[str, int] = {}  # instances started per node
        self.joined: set[str] = set()  # nodes whose completion reached the join buffers
        self.held: frozenset[str] = frozenset()  # nodes with a parked task: not complete yet
        self.routed: set[str] = set()  # nodes whose own edges were followed

    def complete(self, task: TaskId, goto: tuple[str, ...] | None, visited: frozenset[str],
                 sends: tuple[Send, ...] = ()) -> None:
        """Route one finished task; a node's instances complete it once per superstep.

        The join buffers and the node's own edges (and maps) see the node once,
        however many instances ran; each instance's ``goto`` and ``Send``s are
        its own.
        """
        node = task.node
        if node not in self.joined and node not in self.held:
            self.joined.add(node)
            self.join(node, visited)
        if goto is None:
            if node in self.routed:
                goto = ()
            self.routed.add(node)
        for target in goto if goto is not None else self.targets(node):
            path = self.wf.maps.get((node, target)) if goto is None else None
            if path is None:
                self.schedule(target, visited)
            else:
                self.map(node, target, path, visited)
        for send in sends:
            self.send(send.node, send.arg, visited)

    def join(self, node: str, visited: frozenset[str]) -> None:
        """Add ``node`` to the buffers of the fan-ins it feeds; start those now complete."""
        for fan in self.wf.fan_ins:
            if node in fan.sources:
                buf = self.joins.setdefault(fan.target, set())
                buf.add(node)
                if buf >= set(fan.sources):
                    del self.joins[fan.target]
                    self.schedule(fan.target, visited)

    def targets(self, node: str) -> list[str]:
        out = []
        for edge in self.wf.edges.get(node, ()):
            if edge.when is None:
                out.append(edge.target)
            elif edge.when(self.state):
                out.append(edge.target)
                self.reasons.append(f"{node}: {edge.when.label} -> {edge.target}")
        sw = self.wf.switches.get(node)
        if sw is not None:
            for cond, target in sw.cases:
                if cond(self.state):
                    out.append(target)
                    self.reasons.append(f"{node}: {cond.label} -> {target}")
                    break
            else:
                if sw.default is not None:
                    out.append(sw.default)
                    self.reasons.append(f"{node}: default -> {sw.default}")
        return out

    def schedule(self, target: str, visited: frozenset[str]) -> None:
        if target == END or TaskId(target) in self.next:
            return
        spec = self.wf.nodes[target]
        if spec.skip_if is not None and target not in visited and spec.skip_if(self.state):
            self.skipped.append(target)
            self.reasons.append(f"skipped {target}")
            self.complete(TaskId(target), None, visited | {target})
            return
        self.next.add(TaskId(target))

    def send(self, target: str, arg: Any, visited: frozenset[str]) -> None:
        """Start the next instance of ``target`` (skipped as a whole when it is skippable)."""
        spec = self.wf.nodes[target]
        if spec.skip_if is not None and target not in visited and spec.skip_if(self.state):
            if target not in self.skipped:
                self.schedule(target, visited)
            return
        index = self.counts.get(target, 0)
        self.counts[target] = index + 1
        task = TaskId(target, index)
        self.args[task] = encode_arg(spec, task, arg)
        self.next.add(task)

    def map(self, source: str, target: str, path: str, visited: frozenset[str]) -> None:
        """One instance of ``target`` per item of the list at ``path`` in the state."""
        items = resolve_path(self.state, path)
        if items is None:
            items = ()
        if isinstance(items, str | bytes) or not isinstance(items, Sequence):
            raise TypeError(f"the connection {source} -> {target} maps over {path!r}, "
                            f"which holds {type(items).__name__}, not a list")
        self.reasons.append(f"{source}: map {path} -> {target} ({len(items)})")
        for item in items:
            self.send(target, item, visited)

    def result(self) -> Routed:
        return Routed(
            next_tasks=tuple(sorted(self.next)),
            joins={t: tuple(sorted(v)) for t, v in sorted(self.joins.items()) if v},
            # the instances of one node route alike: their reasons are said once
            reason="; ".join(dict.fromkeys(self.reasons)) or None,
            skipped=self.skipped, args=self.args)


def route(
    wf: Workflow, state: Any, completed: Sequence[Completed], joins: Mapping[str, Sequence[str]],
    *, held: frozenset[str] = frozenset(),
) -> Routed:
    """Next tasks after ``completed`` tasks finished (in task order: node id, instance).

    An instance's argument that does not fit raises ``InvalidInputError``
    naming the instance (see :func:`encode_arg`). ``held`` names nodes with a
    parked task (``waits="branch"``): their edges fire, but a fan-in waits.
    """
    router = _Router(wf, state, joins)
    router.held = held
    for done in sorted(completed, key=lambda c: c.node):
        if done.reason:
            router.reasons.append(done.reason)  # the node's own words, verbatim
        router.complete(done.node, done.goto, frozenset({done.node.node}), done.sends)
    if any(done.node.node in wf.exits for done in completed):
        return Routed(next_tasks=(), joins={}, reason=router.result().reason,
                      skipped=router.skipped)
    return router.result()


def route_entry(wf: Workflow, state: Any) -> Routed:
    """The first superstep's tasks: the entry, or past it when it is skipped."""
    router = _Router(wf, state, {})
    router.schedule(wf.entry, frozenset())
    return router.result()
