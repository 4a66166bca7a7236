"""Choosing the next superstep's tasks: edges, switches, gotos, skips and joins."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._graph import END, Workflow

__all__ = ["Completed", "Routed", "route", "route_entry"]


@dataclass(frozen=True, slots=True)
class Completed:
    """A node that finished this superstep, with its dynamic routing if any."""

    node: str
    goto: tuple[str, ...] | None = None
    reason: str | None = None


@dataclass
class Routed:
    """The outcome of routing: next tasks, join buffers, reasons and skips."""

    next_tasks: tuple[str, ...]
    joins: dict[str, tuple[str, ...]]
    reason: str | None
    skipped: list[str] = field(default_factory=list)


class _Router:
    def __init__(self, wf: Workflow, state: Any, joins: Mapping[str, Sequence[str]]) -> None:
        self.wf = wf
        self.state = state
        self.joins = {t: set(v) for t, v in joins.items()}
        self.next: set[str] = set()
        self.reasons: list[str] = []
        self.skipped: list[str] = []

    def complete(self, node: str, goto: tuple[str, ...] | None, visited: frozenset[str]) -> None:
        for fan in self.wf.fan_ins:
            if node in fan.sources:
                buf = self.joins.setdefault(fan.target, set())
                buf.add(node)
                if buf >= set(fan.sources):
                    del self.joins[fan.target]
                    self.schedule(fan.target, visited)
        for target in goto if goto is not None else self.targets(node):
            self.schedule(target, visited)

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
        if target == END or target in self.next:
            return
        spec = self.wf.nodes[target]
        if spec.skip_if is not None and target not in visited and spec.skip_if(self.state):
            self.skipped.append(target)
            self.reasons.append(f"skipped {target}")
            self.complete(target, None, visited | {target})
            return
        self.next.add(target)

    def result(self) -> Routed:
        return Routed(
            next_tasks=tuple(sorted(self.next)),
            joins={t: tuple(sorted(v)) for t, v in sorted(self.joins.items()) if v},
            reason="; ".join(self.reasons) or None,
            skipped=self.skipped)


def route(
    wf: Workflow, state: Any, completed: Sequence[Completed], joins: Mapping[str, Sequence[str]]
) -> Routed:
    """Next tasks after ``completed`` nodes finished (sorted by node id)."""
    router = _Router(wf, state, joins)
    for done in sorted(completed, key=lambda c: c.node):
        if done.reason:
            router.reasons.append(done.reason)  # the node's own words, verbatim
        router.complete(done.node, done.goto, frozenset({done.node}))
    if any(done.node in wf.exits for done in completed):
        return Routed(next_tasks=(), joins={}, reason=router.result().reason,
                      skipped=router.skipped)
    return router.result()


def route_entry(wf: Workflow, state: Any) -> Routed:
    """The first superstep's tasks: the entry, or past it when it is skipped."""
    router = _Router(wf, state, {})
    router.schedule(wf.entry, frozenset())
    return router.result()
