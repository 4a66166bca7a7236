"""Diagrams of any ``Workflow``: Mermaid flowcharts and Graphviz DOT.

Both mark the same things: the entry (an arrow from a ``start`` point), the
exits (an arrow to an ``end`` point), skippable nodes (dashed, with their
skip condition), join nodes (a hexagon, reached by thick arrows from the
sources it waits for), sub-workflow nodes and map nodes (started once per
item by ``Send`` or a map connection: drawn as a stack). First-match
connections are numbered in the order they are tried; ``goto`` targets are
dotted arrows; a map connection names the items it maps over.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..model._graph import END, NodeSpec, Workflow

__all__ = ["to_dot", "to_mermaid"]

_MERMAID_SHAPES = {"plain": ('["', '"]'), "join": ('{{"', '"}}'), "subworkflow": ('[["', '"]]'),
                   "map": ('@{ shape: procs, label: "', '" }')}
_MERMAID_CLASSES = (
    "classDef entry stroke-width:3px",
    "classDef exit stroke-width:3px,stroke:#444",
    "classDef skippable stroke-dasharray:5 5",
    "classDef join fill:#eef",
    "classDef terminal fill:#444,color:#fff",
)


@dataclass(frozen=True, slots=True)
class _Link:
    """One arrow: ``style`` is plain, join (waits) or goto (dynamic)."""

    source: str
    target: str
    label: str | None
    style: str = "plain"


def _tags(wf: Workflow, spec: NodeSpec) -> list[str]:
    tags = [t for t, on in (("entry", wf.entry == spec.id), ("exit", spec.id in wf.exits),
                            ("join", _is_join(wf, spec.id))) if on]
    if spec.skip_if is not None:
        tags.append("skippable")
    return tags


def _is_join(wf: Workflow, node: str) -> bool:
    return any(f.target == node for f in wf.fan_ins)


def _is_map(wf: Workflow, spec: NodeSpec) -> bool:
    """Whether the node runs as instances (``arg_type``, ``max_concurrency``, map target)."""
    return (spec.arg_type is not None or spec.max_concurrency is not None
            or any(target == spec.id for _, target in wf.maps))


def _notes(wf: Workflow, spec: NodeSpec) -> list[str]:
    """The lines under a node's id: its marks, skip condition and sub-workflow."""
    tags = [t for t in _tags(wf, spec) if t != "skippable"]
    if _is_map(wf, spec):
        limit = spec.max_concurrency
        tags.append("map" if limit is None else f"map, at most {limit} at once")
    lines = [" · ".join(tags)] if tags else []
    if spec.skip_if is not None:
        lines.append(f"skip if {spec.skip_if.label}")
    if spec.subworkflow is not None:
        lines.append(f"workflow {spec.subworkflow.workflow.name}")
    return lines


def _links(wf: Workflow) -> Iterator[_Link]:
    for link in _graph_links(wf):
        path = wf.maps.get((link.source, link.target)) if link.style == "plain" else None
        if path is None:
            yield link
        else:
            label = f"{link.label}, map {path}" if link.label else f"map {path}"
            yield _Link(link.source, link.target, label)


def _graph_links(wf: Workflow) -> Iterator[_Link]:
    for node in wf.nodes:
        sw = wf.switches.get(node)
        if sw is not None:
            numbered = len(sw.cases) + (sw.default is not None) > 1
            for i, (cond, target) in enumerate(sw.cases, 1):
                text = None if cond.label == "true" else cond.label
                if numbered:
                    text = f"{i}. {text or 'otherwise'}"
                yield _Link(node, target, text)
            if sw.default is not None:
                yield _Link(node, sw.default, f"{len(sw.cases) + 1}. otherwise" if numbered else None)
        for edge in wf.edges.get(node, ()):
            yield _Link(node, edge.target, edge.when.label if edge.when else None)
        for target in wf.nodes[node].goto:
            yield _Link(node, target, "goto", "goto")
    for fan in wf.fan_ins:
        for source in fan.sources:
            yield _Link(source, fan.target, None, "join")


# -- Mermaid -----------------------------------------------------------------------------------


def _mermaid_text(text: str) -> str:
    # Entity codes keep quotes, brackets and pipes from ending the label early.
    for raw, code in (("#", "#35;"), ('"', "#quot;"), ("<", "#lt;"), (">", "#gt;"), ("|", "#124;")):
        text = text.replace(raw, code)
    return text


def to_mermaid(workflow: Workflow, *, direction: str = "TD") -> str:
    """A Mermaid ``flowchart`` of ``workflow`` (paste it into Markdown).

    Entry and exits hang off ``start``/``end`` points and are styled;
    skippable nodes are dashed and show their condition; join nodes are
    hexagons; sub-workflow nodes are boxed twice; map nodes are stacks
    (Mermaid's ``procs`` shape, Mermaid 11.3 or later).
    """
    ids = {node: f"n{i}" for i, node in enumerate(workflow.nodes)}
    ids[END] = "__end__"
    lines = [f"flowchart {direction}", '    __start__(("start")):::terminal']
    for node, spec in workflow.nodes.items():
        shape = "join" if _is_join(workflow, node) else "map" if _is_map(workflow, spec) else (
            "subworkflow" if spec.subworkflow is not None else "plain")
        label = "<br/>".join([_mermaid_text(node), *(f"<small>{_mermaid_text(n)}</small>"
                                                     for n in _notes(workflow, spec))])
        lines.append(f"    {ids[node]}{_MERMAID_SHAPES[shape][0]}{label}{_MERMAID_SHAPES[shape][1]}")
    if workflow.exits or any(link.target == END for link in _links(workflow)):
        lines.append('    __end__(("end")):::terminal')
    if workflow.entry in ids:
        lines.append(f"    __start__ --> {ids[workflow.entry]}")
    arrows = {"plain": "-->", "join": "==>", "goto": "-.->"}
    for link in _links(workflow):
        label = f'|"{_mermaid_text(link.label)}"|' if link.label else ""
        lines.append(f"    {ids[link.source]} {arrows[link.style]}{label} {ids[link.target]}")
    lines.extend(f"    {ids[x]} --> __end__" for x in workflow.nodes if x in workflow.exits)
    lines.extend(f"    {line}" for line in _MERMAID_CLASSES)
    for node, spec in workflow.nodes.items():
        lines.extend(f"    class {ids[node]} {tag}" for tag in _tags(workflow, spec))
    return "\n".join(lines) + "\n"


# -- Graphviz ------------------------------------------------------------------------------------


def _dot_text(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(workflow: Workflow) -> str:
    """A Graphviz ``digraph`` of ``workflow`` (render with ``dot -Tsvg``).

    Marks as in :func:`to_mermaid`: start/end points, bold entry and double
    border exits, dashed skippable nodes, hexagon joins with bold arrows,
    sub-workflows as components, map nodes as 3-D boxes (a stack), dotted gotos.
    """
    lines = [f"digraph {_dot_text(workflow.name)} {{", "    rankdir=TB;",
             '    node [shape=box, style="rounded"];',
             '    "__start__" [label="start", shape=circle, style=filled, fillcolor="#444444", '
             'fontcolor=white];']
    for node, spec in workflow.nodes.items():
        tags = _tags(workflow, spec)
        attrs = {"label": _dot_text("\n".join([node, *_notes(workflow, spec)]))}
        attrs["shape"] = "hexagon" if "join" in tags else "box3d" if _is_map(workflow, spec) \
            else ("component" if spec.subworkflow is not None else "box")
        attrs["style"] = _dot_text(",".join(["rounded", *(["dashed"] if "skippable" in tags else []),
                                             *(["bold"] if "entry" in tags else [])]))
        if "exit" in tags:
            attrs["peripheries"] = "2"
        lines.append(f"    {_dot_text(node)} [{', '.join(f'{k}={v}' for k, v in attrs.items())}];")
    if workflow.exits or any(link.target == END for link in _links(workflow)):
        lines.append(f'    {_dot_text(END)} [label="end", shape=doublecircle, style=filled, '
                     'fillcolor="#444444", fontcolor=white];')
    if workflow.entry in workflow.nodes:
        lines.append(f'    "__start__" -> {_dot_text(workflow.entry)};')
    styles = {"plain": "", "join": "style=bold, penwidth=2", "goto": "style=dotted"}
    for link in _links(workflow):
        attrs_text = ", ".join(a for a in (styles[link.style],
                                           f"label={_dot_text(link.label)}" if link.label else "") if a)
        suffix = f" [{attrs_text}]" if attrs_text else ""
        lines.append(f"    {_dot_text(link.source)} -> {_dot_text(link.target)}{suffix};")
    lines.extend(f"    {_dot_text(x)} -> {_dot_text(END)};" for x in workflow.nodes
                 if x in workflow.exits)
    lines.append("}")
    return "\n".join(lines) + "\n"
