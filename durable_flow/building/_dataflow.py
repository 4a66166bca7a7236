"""The build-time data-flow check.

The check uses only what is declared: ``produces=`` / ``consumes=`` on any
node, and what agents and transforms derive from their configuration (an
agent's ``reads``, templates, ``input_key``, ``output_key`` and structured
output fields). A function node without ``produces=`` may write anything, so
it never causes an error. It reports:

- configuration problems of agents and transforms (bad tools, bad output
  classes, bad ``skip_if``);
- a write of a field the blackboard does not declare;
- a read of a field that no upstream node writes and the input does not
  provide. Every field declared on the blackboard counts as provided by the
  input (a field without a default must be in the input; a field with one
  has its default), so on a typed blackboard this is a read of an undeclared
  field. A free-form blackboard takes any key from the input, so its reads
  are not checked;
- two nodes that can run in the same superstep both writing one
  last-write-wins field. Routing conditions are not evaluated, so two
  targets that are both conditional (two ``when=`` edges, switch cases,
  ``Command`` gotos) are assumed to be alternatives, and a join is assumed
  to fire only when its sources finish together: the check never reports a
  pair that cannot run together, and a conflict it cannot see is still
  caught at run time (``ConflictingUpdateError``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import combinations
from typing import TYPE_CHECKING

from ..model._graph import END, NodeSpec

if TYPE_CHECKING:
    from ..model._graph import Workflow

__all__ = ["check_dataflow", "parallel_pairs"]

Target = tuple[str, bool]  # (node id, reached only under a condition)


def check_dataflow(wf: Workflow) -> list[str]:
    """Every data-flow problem of ``wf``, in a stable order."""
    problems: list[str] = []
    for spec in wf.nodes.values():
        problems += [str(p) for p in spec.meta.get("problems", ())]
    problems += _undeclared(wf)
    problems += _conflicts(wf)
    return problems


def _undeclared(wf: Workflow) -> list[str]:
    schema = wf.schema
    if schema.free_form:
        return []
    state = schema.cls.__name__
    problems = []
    for nid, spec in wf.nodes.items():
        if spec.kind != "subworkflow":
            for name in spec.produces or ():
                if name not in schema.fields:
                    problems.append(f"node {nid!r} writes {name!r}{_why_write(spec)}, but "
                                    f"{state} does not declare it")
        how = spec.meta.get("reads_from", {})
        for name in spec.consumes:
            if name not in schema.fields and spec.kind != "subworkflow":
                problems.append(
                    f"node {nid!r} reads {name!r} ({how.get(name, 'consumes=')}), but no upstream "
                    f"node writes it and the input does not provide it ({state} does not declare it)")
    return problems


def _why_write(spec: NodeSpec) -> str:
    if spec.kind == "agent":
        return " (agent output)"
    if spec.kind == "transform":
        return " (transform)"
    return " (produces=)"


def _conflicts(wf: Workflow) -> list[str]:
    schema = wf.schema
    problems = []
    for a, b in sorted(parallel_pairs(wf)):
        wa, wb = wf.nodes[a].produces, wf.nodes[b].produces
        if wa is None or wb is None:
            continue
        for name in sorted(set(wa) & set(wb)):
            spec = schema.fields.get(name)
            if spec is None and not schema.free_form:
                continue  # reported as undeclared
            if spec is None or spec.is_lww:
                problems.append(
                    f"nodes {a!r} and {b!r} can run in the same superstep and both write the "
                    f"last-write-wins field {name!r}; give it a reducer (e.g. Annotated[..., "
                    "append]) or let only one of them write it")
    return problems


# ---------------------------------------------------------------------------
# which nodes can run in the same superstep
# ---------------------------------------------------------------------------


class _Graph:
    """Successors with a flag saying whether reaching them depends on a condition."""

    def __init__(self, wf: Workflow) -> None:
        self.wf = wf
        self.joins = [f for f in wf.fan_ins if len(set(f.sources)) > 1 and f.target in wf.nodes]

    def routed(self, node: str) -> list[Target]:
        """Targets scheduled together when ``node`` completes without a goto."""
        wf = self.wf
        if node in wf.exits:
            return []
        out: list[Target] = [(e.target, e.when is not None) for e in wf.edges.get(node, ())]
        sw = wf.switches.get(node)
        if sw is not None:
            out += [(t, True) for _, t in sw.cases]
            if sw.default is not None:
                out.append((sw.default, bool(sw.cases)))
        out += [(f.target, False) for f in wf.fan_ins
                if set(f.sources) == {node}]
        return self.expand(out)

    def successors(self, node: str) -> list[Target]:
        """Every target ``node`` may schedule (edges, switch, gotos)."""
        if node in self.wf.exits:
            return []
        spec = self.wf.nodes.get(node)
        gotos = [(t, True) for t in spec.goto] if spec is not None else []
        return self.routed(node) + self.expand(gotos)

    def expand(self, targets: Iterable[Target]) -> list[Target]:
        """Known targets, plus what a ``skip_if`` target routes to when it is skipped."""
        out: dict[str, bool] = {}
        stack = list(targets)
        while stack:
            node, cond = stack.pop()
            if node == END or node not in self.wf.nodes:
                continue
            if node in out:
                out[node] = out[node] and cond
                continue
            out[node] = cond
            if self.wf.nodes[node].skip_if is not None:
                stack += [(t, True) for t, _ in self.routed_raw(node)]
        return list(out.items())

    def routed_raw(self, node: str) -> list[Target]:
        wf = self.wf
        out: list[Target] = [(e.target, True) for e in wf.edges.get(node, ())]
        sw = wf.switches.get(node)
        if sw is not None:
            out += [(t, True) for _, t in sw.cases] + ([(sw.default, True)] if sw.default else [])
        return out


def parallel_pairs(wf: Workflow) -> set[tuple[str, str]]:
    """Pairs of nodes (sorted) that can be due in the same superstep."""
    g = _Graph(wf)
    pairs: set[tuple[str, str]] = set()
    queue: list[tuple[str, str]] = []

    def add(a: str, b: str) -> None:
        pair = (a, b) if a < b else (b, a)
        if a != b and pair not in pairs:
            pairs.add(pair)
            queue.append(pair)

    def together(xs: list[Target], ys: list[Target]) -> None:
        for (x, cx), (y, cy) in ((p, q) for p in xs for q in ys):
            if not (cx and cy):
                add(x, y)

    for node in wf.nodes:
        for (x, cx), (y, cy) in combinations(g.routed(node), 2):
            if not (cx and cy):
                add(x, y)
    changed = True
    while changed:
        while queue:
            a, b = queue.pop()
            together(g.successors(a), g.successors(b))
        changed = _joins(g, pairs, add)
    return pairs


def _joins(g: _Graph, pairs: set[tuple[str, str]], add: Callable[[str, str], None]) -> bool:
    """Pair each join target with what is scheduled when its sources finish together."""
    before = len(pairs)
    for fan in g.joins:
        sources = sorted(set(fan.sources))
        if any((a, b) not in pairs for a, b in combinations(sources, 2)):
            continue
        j = fan.target
        mates = {y for s in sources for pair in pairs if s in pair for y in pair if y != s}
        for node in {*sources, *mates}:
            for t, _ in g.routed(node):
                if t != j:
                    add(j, t)
    return len(pairs) != before
