"""``Workflow.explain()``: per node, what it reads and writes, its model, history and routing.

Plain text from the graph's own declarations; nothing is evaluated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._graph import END

if TYPE_CHECKING:
    from ._graph import Workflow

__all__ = ["explain"]

def explain(wf: Workflow) -> str:
    """Per node: kind, what it reads and writes, its model, history mode, tools and routing."""
    lines = [f"workflow {wf.name!r} on {wf.state.__name__} (entry: {wf.entry or '-'})"]
    for nid in _order(wf):
        spec = wf.nodes[nid]
        lines.append(f"{nid} [{spec.kind}]")
        meta = spec.meta
        if spec.kind == "agent":
            tools = ", ".join(meta.get("tools", ())) or "-"
            lines.append(f"  model: {meta.get('model', '?')}  history: {meta.get('history', '?')}"
                         f"  tools: {tools}")
        if spec.kind == "transform":
            lines.append(f"  steps: {meta.get('transform')}")
        if spec.kind == "subworkflow" and spec.subworkflow is not None:
            lines.append(f"  workflow: {spec.subworkflow.workflow.name}")
        lines.append(f"  reads: {', '.join(spec.consumes) or '-'}")
        if spec.produces is None:
            writes = "any field" + (" (no produces=)" if spec.kind == "function" else "")
        else:
            writes = ", ".join(spec.produces) or "-"
        lines.append(f"  writes: {writes}")
        route = _route_text(wf, nid)
        if route:
            lines.append(f"  next: {route}")
    return "\n".join(lines)


def _order(wf: Workflow) -> list[str]:
    """Nodes in breadth-first order from the entry, then any others."""
    seen: list[str] = []
    queue = [wf.entry] if wf.entry in wf.nodes else []
    while queue:
        node = queue.pop(0)
        if node in seen:
            continue
        seen.append(node)
        queue += sorted(t for t in wf.successors(node) if t in wf.nodes)
    return seen + sorted(set(wf.nodes) - set(seen))


def _route_text(wf: Workflow, nid: str) -> str:
    def name(target: str) -> str:
        return "END" if target == END else target

    parts = [name(e.target) + (f" when {e.when.label}" if e.when else "")
             for e in wf.edges.get(nid, ())]
    sw = wf.switches.get(nid)
    if sw is not None:
        cases = [f"{c.label} -> {name(t)}" for c, t in sw.cases]
        if sw.default is not None:
            cases.append(f"default -> {name(sw.default)}")
        parts.append("switch(" + "; ".join(cases) + ")")
    if wf.nodes[nid].goto:
        parts.append("goto " + " | ".join(wf.nodes[nid].goto))
    parts += [f"join -> {f.target}" for f in wf.fan_ins if nid in f.sources]
    if nid in wf.exits:
        parts.append("exit")
    return ", ".join(parts)
