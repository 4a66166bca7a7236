"""Structural checks of a workflow graph, reported all at once."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator

from ..model._graph import END, Condition, Workflow
from ..model._text import unstorable

__all__ = ["check_text", "check_versions", "reachable", "validate_graph"]


def validate_graph(wf: Workflow) -> list[str]:
    """Every structural problem of ``wf``, in a stable order."""
    problems: list[str] = []
    problems += _check_entry(wf)
    problems += _check_targets(wf)
    problems += _check_maps(wf)
    problems += check_text(wf)
    if wf.entry in wf.nodes:
        problems += _check_reachability(wf)
        problems += _check_fan_ins(wf)
    return problems


def check_versions(wf: Workflow) -> list[str]:
    """The problems of ``wf``'s version and of the migrations it declares."""
    problems: list[str] = []
    if not isinstance(wf.version, str) or not wf.version.strip():
        problems.append(f"version must be a non-empty string, got {wf.version!r}")
    for old, migration in wf.migrations.items():
        if old == wf.version:
            problems.append(f"migrate({old!r}): a version cannot migrate from itself")
        for source, target in migration.nodes.items():
            if target not in wf.nodes:
                problems.append(f"migrate({old!r}) nodes: {source!r} is renamed to "
                                f"{target!r}, which is not a node of this version")
    return problems


def _check_entry(wf: Workflow) -> list[str]:
    if not wf.entry:
        return ["no entry node: call set_entry(...)"]
    if wf.entry not in wf.nodes:
        return [f"entry {wf.entry!r} is not a node"]
    return []


def _check_targets(wf: Workflow) -> list[str]:
    problems = []
    known = set(wf.nodes)

    def check(where: str, name: str | None, allow_end: bool = True) -> None:
        if name is None or name in known or (allow_end and name == END):
            return
        problems.append(f"{where} refers to unknown node {name!r}")

    for source, edges in wf.edges.items():
        check(f"edge {source}->...", source, allow_end=False)
        for e in edges:
            check(f"edge {source}->{e.target}", e.target)
    for source, sw in wf.switches.items():
        check(f"switch on {source}", source, allow_end=False)
        for _, target in sw.cases:
            check(f"switch {source}->{target}", target)
        check(f"switch {source} default", sw.default)
    targets_seen: set[str] = set()
    for fan in wf.fan_ins:
        for s in fan.sources:
            check(f"fan-in into {fan.target}: source", s, allow_end=False)
        check("fan-in target", fan.target, allow_end=False)
        if not fan.sources:
            problems.append(f"fan-in into {fan.target!r} has no sources")
        if fan.target in targets_seen:
            problems.append(f"node {fan.target!r} is the target of two fan-ins")
        targets_seen.add(fan.target)
    for nid, spec in wf.nodes.items():
        for g in spec.goto:
            check(f"node {nid} goto", g)
    for x in sorted(wf.exits):
        check("exit", x, allow_end=False)
    return problems


def _check_maps(wf: Workflow) -> list[str]:
    """Each map is a connection the graph has, over a path that starts with a state field."""
    problems = []
    schema = wf.schema
    for (source, target), path in sorted(wf.maps.items()):
        where = f"map {source} -> {target}"
        sw = wf.switches.get(source)
        switched = sw is not None and (target == sw.default
                                       or any(t == target for _, t in sw.cases))
        if not switched and all(e.target != target for e in wf.edges.get(source, ())):
            problems.append(f"{where}: there is no edge or switch case from {source!r} to "
                            f"{target!r} to make a map")
        elif target == END:
            problems.append(f"{where}: END cannot be mapped over")
        field = path.split(".")[0]
        if not schema.free_form and field not in schema.fields:
            problems.append(f"{where}: items {path!r} does not start with a state field of "
                            f"{schema.cls.__name__}")
    return problems


def check_text(wf: Workflow) -> list[str]:
    """Every name and condition of ``wf`` that cannot be stored (not valid Unicode).

    The name, node ids, routing targets and condition labels go into the
    graph signature and the store; a surrogate code point would pass every
    other check and then fail the run that stores it.
    """
    return [p for where, text in _texts(wf) if (p := unstorable(text, where)) is not None]


def _label(cond: Condition | None) -> str | None:
    return cond.label if cond is not None else None


def _texts(wf: Workflow) -> Iterator[tuple[str, str | None]]:
    """Each stored string of ``wf`` with where it is."""
    yield "the workflow name", wf.name
    yield "the entry", wf.entry
    for nid, spec in wf.nodes.items():
        yield "a node id", nid
        yield f"node {nid!r} skip_if", _label(spec.skip_if)
        yield from ((f"node {nid!r} goto", g) for g in spec.goto)
        yield from ((f"node {nid!r} produces", f) for f in spec.produces or ())
        yield from ((f"node {nid!r} consumes", f) for f in spec.consumes)
        if spec.subworkflow is not None:
            for inner, outer in spec.subworkflow.inputs.items():
                yield from ((f"sub-workflow {nid!r} inputs", name) for name in (inner, outer))
            for outer, inner in spec.subworkflow.outputs.items():
                yield from ((f"sub-workflow {nid!r} outputs", name) for name in (outer, inner))
    for source, edges in wf.edges.items():
        for e in edges:
            yield f"edge {source!r} -> {e.target!r}", e.target
            yield f"edge {source!r} -> {e.target!r} condition", _label(e.when)
    for source, sw in wf.switches.items():
        for cond, target in sw.cases:
            yield f"switch on {source!r} -> {target!r}", target
            yield f"switch on {source!r} -> {target!r} condition", cond.label
        yield f"switch on {source!r} default", sw.default
    for fan in wf.fan_ins:
        yield from ((f"fan-in into {fan.target!r}", name) for name in (*fan.sources, fan.target))
    yield from (("an exit", x) for x in sorted(wf.exits))
    for (source, target), path in wf.maps.items():
        yield f"map {source!r} -> {target!r}", path


def reachable(wf: Workflow, start: str, *, avoid: Iterable[str] = ()) -> set[str]:
    """Nodes reachable from ``start`` (inclusive) without passing ``avoid``.

    ``start`` itself is always followed, even when it is in ``avoid``.
    """
    blocked = set(avoid)
    seen = {start}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in wf.successors(node):
            if nxt in wf.nodes and nxt not in seen and nxt not in blocked:
                seen.add(nxt)
                queue.append(nxt)
    return seen


def _check_reachability(wf: Workflow) -> list[str]:
    problems = []
    live = reachable(wf, wf.entry)
    for nid in wf.nodes:
        if nid not in live:
            problems.append(f"node {nid!r} is unreachable from the entry {wf.entry!r}")
    finishing = _can_finish(wf)
    for nid in sorted(live - finishing):
        problems.append(f"node {nid!r} has no way to finish: every path from it loops forever")
    return problems


def _may_stop(wf: Workflow, nid: str) -> bool:
    """True when the node's routing may pick no target, which ends its branch.

    That is the case when every edge has a condition and no switch default
    catches the rest, or when the node may ``Command(goto=END)``.
    """
    if wf.nodes[nid].goto:
        return True
    edges = wf.edges.get(nid, ())
    sw = wf.switches.get(nid)
    if not edges and sw is None:
        return False  # only fan-in targets (or nothing, handled by the caller)
    if any(e.when is None for e in edges):
        return False
    return sw is None or sw.default is None


def _can_finish(wf: Workflow) -> set[str]:
    """Nodes from which some path reaches END, an exit or a node with no way on."""
    preds: dict[str, set[str]] = {n: set() for n in wf.nodes}
    done: set[str] = set()
    for nid in wf.nodes:
        succ = wf.successors(nid)
        if not succ or END in succ or nid in wf.exits or _may_stop(wf, nid):
            done.add(nid)
        for s in succ:
            if s in preds:
                preds[s].add(nid)
    queue = deque(done)
    while queue:
        node = queue.popleft()
        for p in preds[node]:
            if p not in done:
                done.add(p)
                queue.append(p)
    return done


def _check_fan_ins(wf: Workflow) -> list[str]:
    """Every join source must be able to run before its join does.

    A join into the entry is fine: the entry runs first without waiting for
    it (a map-reduce loop), so its sources need only be reachable from there.
    """
    problems = []
    for fan in wf.fan_ins:
        if fan.target not in wf.nodes:
            continue
        live = reachable(wf, wf.entry, avoid=[fan.target])
        for s in fan.sources:
            if s in wf.nodes and s not in live:
                problems.append(
                    f"fan-in into {fan.target!r}: source {s!r} can never complete "
                    "(it is not reachable from the entry without the join itself)")
    return problems
