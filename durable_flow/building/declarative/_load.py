"""Declarative workflows: nodes-and-connections definitions in JSON or YAML.

:func:`load_workflow` builds a ``Workflow`` from a definition (a file path or
a mapping) and a registry that maps each ``agent_name`` to a node function,
an agent spec (any object with ``node_spec(id) -> NodeSpec``) or a
``Workflow`` (a sub-workflow node). :func:`dump_workflow` writes it back::

    name: meal_flow                  # default: the file's name (required in a mapping)
    version: "1.0"
    max_supersteps: 50               # cycles (loops) are allowed only when set
    waits: branch                    # optional: a waiting node lets other branches go on
    state:                           # optional: without it, any key, last-write-wins
      user: str                      # str int float bool any list dict None,
      log: {type: list[str], reducer: append}      # list[T] dict[str, T] T | U
      total: {type: int, reducer: add, default: 0, description: running total}
    nodes:
      - {id: greet, agent_name: greeter, is_entry: true}
      - {id: meal, agent_name: meal, skip_condition: flags.skip_meal,
         retry: {max_attempts: 3, initial_delay: 1}, timeout: 30}
      - {id: check, workflow: check.yaml, inputs: {reading: glucose}, outputs: [status]}
      - {id: done, agent_name: done, is_exit: true}
    connections:
      - {source_id: greet, target_id: meal, condition: "user != ''", context_passed: [user]}

Routing: a node's connections are tried in order and the first whose
``condition`` holds is taken (no condition always holds, so a connection
after such a one could never be taken and is reported); with ``fan_out:
true`` every connection that holds is taken. A ``join: true`` node runs once
every source of its incoming connections has completed (those connections
carry no condition). A target whose ``skip_condition`` holds is passed over
to its own next node. ``context_passed`` limits the blackboard keys the
target sees (a :class:`ContextView`): the union over its incoming
connections, or every key when one of them sets none or the target is the
entry (the run's input reaches it directly). ``workflow:`` paths are
relative to the definition file. Nodes and connections may also carry a
``description`` and free ``metadata`` (kept for the round trip). A
connection with ``"map": "items"`` starts one instance of its target per
element of the list field ``items`` when it is taken (``target[0]``,
``target[1]``, ...), the element as each instance's ``ctx.arg``; the
target's ``max_concurrency`` bounds how many of them run at once.

What the graph cannot hold (agent names, file references, context keys,
connection order) is kept in ``NodeSpec.meta`` under :data:`META_KEY`; the
header (version, ...) in the entry node's meta under :data:`HEAD_KEY`.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

import yaml
from pydantic import BaseModel, ConfigDict

from ...errors import WorkflowValidationError
from ...model._blackboard import schema_for
from ...model._graph import END, Condition, NodeSpec, SubworkflowSpec, Workflow
from ...model._retry import RetryPolicy
from .._builder import WorkflowBuilder
from ._agents import agent_maker
from ._agents import dump_options as dump_agent_options
from ._parse import (
    Conn,
    Definition,
    Node,
    back_edges,
    check_definition,
    kind,
    parse_definition,
    read_source,
)
from ._state import dump_state, has_field

__all__ = ["HEAD_KEY", "META_KEY", "ContextView", "dump_workflow", "load_registry", "load_workflow"]

Source: TypeAlias = "str | PathLike[str] | Mapping[str, Any]"

META_KEY = "declarative"
"""``NodeSpec.meta`` key holding what a node's definition adds to the graph."""
HEAD_KEY = "declarative_workflow"
"""``NodeSpec.meta`` key (entry node only) holding the definition's header."""

_MAX_NESTING = 16
_RETRY_DEFAULTS = RetryPolicy().to_dict()


class ContextView(BaseModel):
    """What a node behind ``context_passed`` connections receives: only those keys.

    Read-only; keys read as attributes (``view.user``) and ``model_dump()``
    gives them as a dict. A key missing from a free-form blackboard is absent.
    """

    model_config = ConfigDict(frozen=True, extra="allow")


# -- public API ----------------------------------------------------------------------------


def load_workflow(
    source: Source, registry: Mapping[str, Any] | None = None, *,
    base_dir: str | PathLike[str] | None = None, notes: list[str] | None = None,
) -> Workflow:
    """Build a ``Workflow`` from a definition file (``.json``, ``.yaml``) or a mapping.

    ``registry`` maps each ``agent_name`` to a node function, an agent spec or
    a ``Workflow``. Without one, agent names are not checked and those nodes
    fail if run; a note saying so is appended to ``notes`` when a list is
    given. ``base_dir`` anchors the ``workflow:`` paths of a mapping (default:
    the current directory). Raises ``WorkflowValidationError`` listing every
    problem with its location, e.g. ``nodes[2].skip_condition: ...``.
    """
    if registry is not None and not isinstance(registry, Mapping):
        raise WorkflowValidationError([f"registry: must be a mapping, not {kind(registry)}"])
    loader = _Loader(registry)
    wf = loader.load(source, Path(base_dir) if base_dir is not None else Path.cwd())
    if notes is not None and loader.unchecked:
        notes.append("no registry given: agent names were not checked, and their nodes "
                     "fail if the workflow is run")
    return wf


def dump_workflow(workflow: Workflow, path: str | PathLike[str] | None = None) -> dict[str, Any]:
    """The definition of ``workflow`` in the format :func:`load_workflow` reads.

    Also written to ``path`` as JSON, or YAML for ``.yaml``/``.yml``, when
    given. Workflows built in Python dump too when the format can express
    them (expression conditions, no gotos, ...); otherwise
    ``WorkflowValidationError`` says what cannot be written.
    """
    problems: list[str] = []
    out = _Dumper(workflow, problems).dump()
    if problems:
        raise WorkflowValidationError(problems, workflow=workflow.name)
    if path is not None:
        target = Path(path)
        text = (yaml.safe_dump(out, sort_keys=False, allow_unicode=True)
                if target.suffix.lower() in (".yaml", ".yml") else json.dumps(out, indent=2) + "\n")
        target.write_text(text, encoding="utf-8")
    return out


def load_registry(spec: str) -> Mapping[str, Any]:
    """Import the registry named ``"package.module:NAME"`` (``NAME`` may be dotted).

    Raises ``WorkflowValidationError`` when the module or name cannot be
    found or the object is not a mapping.
    """
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise WorkflowValidationError([f"registry {spec!r}: expected 'module:NAME'"])
    try:
        value: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            value = getattr(value, part)
    except ImportError as exc:
        raise WorkflowValidationError([f"registry {spec!r}: cannot import: {exc}"]) from None
    except AttributeError:
        raise WorkflowValidationError([f"registry {spec!r}: {module_name} has no {attr!r}"]) from None
    if not isinstance(value, Mapping):
        raise WorkflowValidationError([f"registry {spec!r}: is {kind(value)}, not a mapping"])
    return value


# -- loading ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Target:
    """What a node runs, resolved from the registry or a nested file."""

    kind: Literal["function", "agent", "subworkflow", "unbound"]
    value: Any


class _Loader:
    """One ``load_workflow`` call: registry, files being loaded, nested files already built."""

    def __init__(self, registry: Mapping[str, Any] | None) -> None:
        self.registry = registry
        self.unchecked = False
        self.stack: list[Path] = []
        self.cache: dict[Path, Workflow] = {}

    def load(self, source: object, base: Path) -> Workflow:
        problems: list[str] = []
        raw, path = read_source(source, problems)
        d = None if problems else parse_definition(
            raw, problems, path.stem if path is not None else None)
        label = (d.name if d is not None else "") or (str(path) if path is not None else "")
        if d is None:
            raise WorkflowValidationError(problems, workflow=label)
        if path is not None:
            self.stack.append(_resolved(path))
        try:
            check_definition(d, problems)
            targets = self._resolve(d, path.parent if path is not None else base, problems)
        finally:
            if path is not None:
                self.stack.pop()
        if problems:
            raise WorkflowValidationError(in_file_order(problems), workflow=label)
        wf = _assemble(d, targets)
        return dataclasses.replace(wf, loaded_from=str(path) if path is not None else None)

    def _resolve(self, d: Definition, base: Path, problems: list[str]) -> dict[str, _Target]:
        targets: dict[str, _Target] = {}
        views = _view_keys(d)
        for n in d.nodes:
            target = self._target(n, base, problems)
            if target is not None and n.id is not None:
                targets[n.id] = target
                _check_io(n, target, d, views.get(n.id), problems)
        return targets

    def _target(self, n: Node, base: Path, problems: list[str]) -> _Target | None:
        if n.workflow is not None and n.agent_name is not None:
            problems.append(f"{n.loc}: give 'agent_name' or 'workflow', not both")
            return None
        if n.workflow is not None:
            wf = self._nested(n, n.workflow, base, problems)
            return _Target("subworkflow", wf) if wf is not None else None
        if n.agent_name is None:
            problems.append(f"{n.loc}: needs an 'agent_name' (or a 'workflow' file)")
            return None
        return self._lookup(n, n.agent_name, problems)

    def _nested(self, n: Node, ref: str, base: Path, problems: list[str]) -> Workflow | None:
        path = _resolved(base / ref)
        if path in self.stack or len(self.stack) >= _MAX_NESTING:
            why = "includes itself" if path in self.stack else "nests workflow files too deeply"
            problems.append(f"{n.loc}.workflow: {ref!r} {why}")
            return None
        if path not in self.cache:
            try:
                self.cache[path] = self.load(path, path.parent)
            except WorkflowValidationError as exc:
                problems.extend(f"{n.loc}.workflow: {ref}: {p}" for p in exc.problems)
                return None
        return self.cache[path]

    def _lookup(self, n: Node, name: str, problems: list[str]) -> _Target | None:
        if self.registry is None:
            self.unchecked = True
            return _Target("unbound", _unbound(name))
        if name not in self.registry:
            close = difflib.get_close_matches(name, [str(k) for k in self.registry], n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(f"{n.loc}.agent_name: {name!r} is not in the registry{hint}")
            return None
        value = self.registry[name]
        if isinstance(value, Workflow):
            return _Target("subworkflow", value)
        make = None if isinstance(value, type) else getattr(value, "node_spec", None)
        if callable(make):
            make = agent_maker(value, n.extras, make, n.loc, problems)
            return _agent_target(n, name, make, problems)
        if callable(value):
            return _Target("function", value)
        problems.append(f"{n.loc}.agent_name: registry entry {name!r} is {kind(value)}, not a "
                        "node function, an agent spec or a Workflow")
        return None


def _agent_target(n: Node, name: str, make: Callable[[str], Any],
                  problems: list[str]) -> _Target | None:
    try:
        spec = make(n.id or "")
    except Exception as exc:  # the agent's own error, reported as a problem of this node
        problems.append(f"{n.loc}.agent_name: agent {name!r} cannot build its node: "
                        f"{type(exc).__name__}: {exc}")
        return None
    if not isinstance(spec, NodeSpec) or spec.id != n.id:
        problems.append(f"{n.loc}.agent_name: {name!r}.node_spec({n.id!r}) did not return a "
                        "NodeSpec with that id")
        return None
    return _Target("agent", spec)


_PLACE = re.compile(r"^(nodes|connections)\[(\d+)\]")
_SECTIONS = {"nodes": 1, "connections": 2}


def in_file_order(problems: list[str]) -> list[str]:
    """Problems in the order of what they are about in the file: the header, nodes, connections."""
    def place(problem: str) -> tuple[int, int]:
        m = _PLACE.match(problem)
        return (_SECTIONS[m[1]], int(m[2])) if m else (0, 0)

    return sorted(problems, key=place)


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError, ValueError):
        return path.absolute()


def _unbound(agent: str) -> Callable[[Any], Any]:
    def unbound(state: Any) -> Any:
        raise WorkflowValidationError(
            [f"agent {agent!r} is not bound: the workflow was loaded without a registry"])

    return unbound


def _check_io(n: Node, target: _Target, d: Definition, view: tuple[str, ...] | None,
              problems: list[str]) -> None:
    if (n.inputs is None and n.outputs is None) or target.kind == "unbound":
        return
    if target.kind != "subworkflow":
        problems.append(f"{n.loc}: only sub-workflow nodes take 'inputs' and 'outputs'")
        return
    inner, outer, name = target.value.schema, schema_for(d.state), target.value.name
    for inner_f, parent_f in (n.inputs or {}).items():
        if not has_field(inner, inner_f):
            problems.append(f"{n.loc}.inputs: {inner_f!r} is not a field of {name!r}")
        if not has_field(outer, parent_f):
            problems.append(f"{n.loc}.inputs: {parent_f!r} is not a state field")
        elif view is not None and parent_f not in view:
            problems.append(f"{n.loc}.inputs: {parent_f!r} is not in the context passed to {n.id!r}")
    for parent_f, inner_f in (n.outputs or {}).items():
        if not has_field(outer, parent_f):
            problems.append(f"{n.loc}.outputs: {parent_f!r} is not a state field")
        if not has_field(inner, inner_f):
            problems.append(f"{n.loc}.outputs: {inner_f!r} is not a field of {name!r}")


# -- building ------------------------------------------------------------------------------


def _view_keys(d: Definition) -> dict[str, tuple[str, ...]]:
    """Per target, the keys its incoming ``context_passed`` allow (absent = all keys)."""
    keys: dict[str, list[str] | None] = {}
    for c in d.conns:
        if c.target is None:
            continue
        if c.context is None:
            keys[c.target] = None
        elif c.target not in keys or keys[c.target] is not None:
            keys[c.target] = [*(keys.get(c.target) or []), *c.context]
    entry = d.entry.id if d.entry is not None else None
    return {t: tuple(dict.fromkeys(v)) for t, v in keys.items() if v is not None and t != entry}


def _context_view(keys: tuple[str, ...]) -> Callable[[Any], ContextView]:
    def view(state: Any) -> ContextView:
        fields = type(state).model_fields if isinstance(state, BaseModel) else {}
        extra = getattr(state, "model_extra", None) or {}
        data = {k: getattr(state, k) if k in fields else extra[k]
                for k in keys if k in fields or k in extra}
        return ContextView.model_construct(**data)

    return view


def _compose(inner: Callable[[Any], Any] | None,
             outer: Callable[[Any], Any] | None) -> Callable[[Any], Any] | None:
    if inner is None or outer is None:
        return inner or outer
    return lambda state: inner(outer(state))


def _assemble(d: Definition, targets: Mapping[str, _Target]) -> Workflow:
    b = WorkflowBuilder(d.name, state=d.state, waits="branch" if d.waits == "branch" else "superstep")
    if d.max_supersteps is not None:
        b.max_supersteps = d.max_supersteps
    views = _view_keys(d)
    joins = {n.id for n in d.nodes if n.join}
    for n in d.nodes:
        nid = n.id or ""
        b.add_spec(_node_spec(n, targets[nid], views.get(nid), _meta(d, n)))
    for n in d.nodes:
        out = [c for c in d.conns if c.source == n.id and c.target not in joins]
        if n.fan_out:
            for c in out:
                b.add_edge(c.source or "", c.target or "", c.condition[1])
        elif out:  # checked: only the last connection may lack a condition
            last = out[-1] if out[-1].condition[1] is None else None
            b.add_switch(n.id or "", [(c.condition[1], c.target or "") for c in out
                                      if c.condition[1] is not None],
                         default=last.target if last is not None else None)
    for c in d.conns:
        if c.map is not None and c.target not in joins:
            b.map_connection(c.source or "", c.target or "", c.map)
    for j in joins:
        b.add_fan_in([s or "" for s in dict.fromkeys(c.source for c in d.conns if c.target == j)],
                     j or "")
    entry = d.entry  # exactly one: checked before building
    b.set_entry(entry.id if entry is not None and entry.id is not None else "")
    b.set_exit(*(n.id or "" for n in d.nodes if n.is_exit))
    try:
        return b.build()
    except WorkflowValidationError as exc:
        raise WorkflowValidationError(exc.problems, workflow=d.name) from None


def _node_spec(n: Node, target: _Target, keys: tuple[str, ...] | None,
               meta: dict[str, Any]) -> NodeSpec:
    view = _context_view(keys) if keys is not None else None
    nid, skip = n.id or "", n.skip[1]
    if target.kind == "subworkflow":
        ins, outs = n.inputs or {}, n.outputs or {}
        sub = SubworkflowSpec(target.value, MappingProxyType(ins), MappingProxyType(outs))
        return NodeSpec(nid, None, kind="subworkflow", retry=n.retry, timeout=n.timeout,
                        skip_if=skip, produces=tuple(outs), consumes=tuple(ins.values()),
                        subworkflow=sub, meta=meta, view=view, max_concurrency=n.max_concurrency)
    if target.kind == "agent":
        spec: NodeSpec = target.value
        return dataclasses.replace(
            spec, retry=n.retry or spec.retry, skip_if=skip or spec.skip_if,
            timeout=n.timeout if n.timeout is not None else spec.timeout,
            view=_compose(spec.view, view), meta={**spec.meta, **meta},
            max_concurrency=n.max_concurrency or spec.max_concurrency)
    return NodeSpec(nid, target.value, retry=n.retry, timeout=n.timeout, skip_if=skip,
                    meta=meta, view=view, max_concurrency=n.max_concurrency)


def _meta(d: Definition, n: Node) -> dict[str, Any]:
    own = {"agent_name": n.agent_name, "workflow": n.workflow, "fan_out": n.fan_out,
           "inputs": n.inputs, "outputs": n.outputs, "retry_keys": n.retry_keys, **n.extras,
           "connections": [_conn_meta(c) for c in d.conns if c.source == n.id]}
    meta: dict[str, Any] = {META_KEY: own}
    if n.is_entry:
        meta[HEAD_KEY] = {**d.head, "max_supersteps_set": d.max_supersteps is not None}
    return meta


def _conn_meta(c: Conn) -> dict[str, Any]:
    return {"index": c.index, "target_id": c.target, "condition": c.condition[0],
            "context_passed": list(c.context) if c.context is not None else None, **c.extras}


# -- dumping --------------------------------------------------------------------------------


class _Dumper:
    """Writes a workflow's graph back as a definition, with what the meta adds."""

    def __init__(self, wf: Workflow, problems: list[str]) -> None:
        self.wf, self.problems = wf, problems

    def dump(self) -> dict[str, Any]:
        wf = self.wf
        entry = wf.nodes.get(wf.entry)
        head: Mapping[str, Any] = entry.meta.get(HEAD_KEY, {}) if entry is not None else {}
        out: dict[str, Any] = {"name": wf.name}
        out.update({k: head[k] for k in ("version", "description") if k in head})
        if head.get("max_supersteps_set") or wf.max_supersteps != 100 or self._cyclic():
            out["max_supersteps"] = wf.max_supersteps
        if wf.waits != "superstep":
            out["waits"] = wf.waits
        state = dump_state(wf.state, self.problems)
        if state is not None:
            out["state"] = state
        out["nodes"] = [self._node(spec) for spec in wf.nodes.values()]
        out["connections"] = self._connections()
        if "metadata" in head:
            out["metadata"] = head["metadata"]
        return out

    def _cyclic(self) -> bool:
        adjacency = {n: [(0, t) for t in sorted(self.wf.successors(n))] for n in self.wf.nodes}
        return bool(back_edges(adjacency, self.wf.nodes))

    def _expr(self, cond: Condition, where: str) -> str:
        if cond.expression is None:
            self.problems.append(f"{where}: the callable condition {cond.label!r} cannot be "
                                 "written; use an expression string")
        return cond.label

    def _node(self, spec: NodeSpec) -> dict[str, Any]:
        wf, m = self.wf, spec.meta.get(META_KEY, {})
        node: dict[str, Any] = {"id": spec.id}
        if m.get("workflow"):
            node["workflow"] = m["workflow"]
        else:
            node["agent_name"] = m.get("agent_name") or _agent_name(spec)
        flags = {"is_entry": wf.entry == spec.id, "is_exit": spec.id in wf.exits}
        node.update({k: True for k, v in flags.items() if v})
        if spec.skip_if is not None:
            node["skip_condition"] = self._expr(spec.skip_if, f"node {spec.id!r} skip_if")
        if spec.retry is not None:
            node["retry"] = self._retry(spec.id, spec.retry, m.get("retry_keys", ()))
        if spec.timeout is not None:
            node["timeout"] = spec.timeout
        if spec.max_concurrency is not None:
            node["max_concurrency"] = spec.max_concurrency
        flags = {"fan_out": bool(m.get("fan_out")) or spec.id in wf.edges,
                 "join": any(f.target == spec.id for f in wf.fan_ins)}
        node.update({k: True for k, v in flags.items() if v})
        sub = spec.subworkflow
        for key, mapping in (("inputs", sub.inputs if sub else m.get("inputs")),
                             ("outputs", sub.outputs if sub else m.get("outputs"))):
            if mapping:
                same = all(k == v for k, v in mapping.items())
                node[key] = list(mapping) if same else dict(mapping)
        options = dump_agent_options(spec, m)
        if spec.goto and list(spec.goto) != options.get("handoffs"):
            self.problems.append(f"node {spec.id!r}: goto targets cannot be written")
        node.update(options)
        node.update({k: m[k] for k in ("description", "metadata") if k in m})
        return node

    def _retry(self, nid: str, policy: RetryPolicy, given: tuple[str, ...]) -> dict[str, Any]:
        if policy.retry_on != (Exception,):
            self.problems.append(f"node {nid!r} retry: retry_on cannot be written")
        return {k: v for k, v in policy.to_dict().items() if v != _RETRY_DEFAULTS[k] or k in given}

    def _connections(self) -> list[dict[str, Any]]:
        rows: list[tuple[float, int, dict[str, Any]]] = []
        for nid, spec in self.wf.nodes.items():
            metas = list(spec.meta.get(META_KEY, {}).get("connections", ()))
            for target, label in self._graph_connections(nid):
                m = _pop_match(metas, target, label)
                conn: dict[str, Any] = {"source_id": nid, "target_id": target}
                cond = m["condition"] if m else (None if label == "true" else label)
                if cond is not None:
                    conn["condition"] = cond
                if m:
                    conn.update({k: m[k] for k in ("context_passed", "description", "metadata")
                                 if m.get(k) is not None})
                if (nid, target) in self.wf.maps:
                    conn["map"] = self.wf.maps[(nid, target)]
                rows.append((m["index"] if m else math.inf, len(rows), conn))
        return [conn for _, _, conn in sorted(rows, key=lambda r: (r[0], r[1]))]

    def _graph_connections(self, nid: str) -> list[tuple[str, str | None]]:
        wf, out = self.wf, list[tuple[str, str | None]]()
        sw, edges = wf.switches.get(nid), wf.edges.get(nid, ())
        if sw is not None and edges:
            self.problems.append(f"node {nid!r}: has both a switch and edges; a definition "
                                 "routes each node one way (first match, or fan_out)")
        if sw is not None:
            out += [(t, self._expr(c, f"switch {nid}->{t}")) for c, t in sw.cases]
            out += [(sw.default, None)] if sw.default is not None else []
        out += [(e.target, self._expr(e.when, f"edge {nid}->{e.target}") if e.when else None)
                for e in edges]
        out += [(f.target, None) for f in wf.fan_ins if nid in f.sources]
        if all(t == END for t, _ in out):
            return []  # the branch ends either way, as it does without connections
        self.problems.extend(f"node {nid!r}: a connection to END cannot be written; mark the "
                             "node is_exit or leave it without connections"
                             for t, _ in out if t == END)
        return out


def _agent_name(spec: NodeSpec) -> str:
    if spec.subworkflow is not None:
        return spec.subworkflow.workflow.name
    name = getattr(spec.fn, "__name__", None) if spec.kind == "function" else None
    return name if isinstance(name, str) and name.isidentifier() else spec.id


def _pop_match(metas: list[dict[str, Any]], target: str, label: str | None) -> dict[str, Any] | None:
    """The stored connection matching a graph connection (``"true"`` = no condition)."""
    def norm(cond: Any) -> Any:
        return None if cond in (None, "true") else cond

    for i, m in enumerate(metas):
        if m.get("target_id") == target and norm(m.get("condition")) == norm(label):
            return metas.pop(i)
    return None
