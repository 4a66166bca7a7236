"""Reading and checking a declarative definition, before anything is built.

Every problem is collected with its location (``nodes[2].skip_condition:
...``, ``connections[0].target_id: unknown node 'x'``) so one
``WorkflowValidationError`` can name them all. Nothing here raises on bad
input: a misfit of any type or shape becomes a problem.
"""

from __future__ import annotations

import json
import math
import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from ...errors import ExpressionError
from ...model._blackboard import Blackboard, schema_for
from ...model._graph import END, Condition
from ...model._retry import RetryPolicy
from ...model._text import printable, unstorable
from ._agents import KEYS as AGENT_KEYS
from ._agents import read_options as read_agent_options
from ._state import has_field, parse_state

__all__ = ["Conn", "Definition", "Node", "back_edges", "check_definition", "kind",
           "parse_definition", "read_source"]

_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")
_TOP = frozenset({"name", "version", "description", "state", "max_supersteps", "waits", "nodes",
                  "connections", "metadata"})
_NODE = frozenset({"id", "agent_name", "workflow", "is_entry", "is_exit", "skip_condition",
                   "retry", "timeout", "fan_out", "join", "inputs", "outputs", "description",
                   "metadata", "max_concurrency", *AGENT_KEYS})
_CONN = frozenset({"source_id", "target_id", "condition", "context_passed", "map",
                   "description", "metadata"})
_RETRY = frozenset({"max_attempts", "initial_delay", "backoff", "max_delay", "jitter"})


def kind(value: object) -> str:
    """A short description of a value's JSON kind, for problem messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float) and not math.isfinite(value):
        return "a non-finite number"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    return "an object" if isinstance(value, Mapping) else f"a {type(value).__name__}"


def read_source(source: object, problems: list[str]) -> tuple[Any, Path | None]:
    """The raw definition and the file it came from (None for a mapping)."""
    if isinstance(source, Mapping):
        return source, None
    if not isinstance(source, str | PathLike):
        problems.append(f"definition: expected a file path or a mapping, not {kind(source)}")
        return None, None
    path = Path(source)
    suffix = path.suffix.lower()
    if suffix not in (".json", ".yaml", ".yml"):
        problems.append(f"definition: {str(path)!r} is not a .json, .yaml or .yml file")
        return None, path
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        problems.append(f"definition: cannot read {str(path)!r}: {exc}")
        return None, path
    try:
        return (json.loads(text) if suffix == ".json" else _load_yaml(text)), path
    except (ValueError, yaml.YAMLError, RecursionError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        problems.append(f"definition: {path.name} is not valid {suffix[1:].upper()}: {first}")
        return None, path


def _load_yaml(text: str) -> Any:
    # An alias can blow a small file up into a huge or self-referencing structure.
    if any(isinstance(e, yaml.AliasEvent) for e in yaml.parse(text, Loader=yaml.SafeLoader)):
        raise ValueError("aliases (*name) are not supported")
    return yaml.safe_load(text)


def _unstorable_text(raw: Mapping[Any, Any]) -> list[str]:
    r"""Every key and string of a definition that is not valid Unicode, with its location.

    A JSON ``\ud800`` escape (or a mapping built in Python) can carry a
    surrogate code point; names, conditions and metadata holding one could not
    be stored by a run.
    """
    problems: list[str] = []
    stack: list[tuple[str, object]] = [("", raw)]
    while stack:  # no recursion: a mapping given directly may nest deeply
        loc, value = stack.pop()
        if isinstance(value, Mapping):
            for key, item in value.items():
                where = printable(f"{loc}.{key}" if loc else str(key))
                problem = unstorable(key, f"{loc or 'definition'}: key")
                if problem is not None:
                    problems.append(problem)
                stack.append((where, item))
        elif isinstance(value, list | tuple):
            stack.extend((f"{loc}[{i}]", item) for i, item in enumerate(value))
        elif (problem := unstorable(value, loc)) is not None:
            problems.append(problem)
    return sorted(problems)


def _number(value: object, integer: bool = False) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return isinstance(value, int) or (not integer and math.isfinite(value))


_KINDS: dict[str, Callable[[Any], bool]] = {
    "a string": lambda v: isinstance(v, str),
    "true or false": lambda v: isinstance(v, bool),
    "a number": _number,
    "an integer": lambda v: _number(v, integer=True),
    "a list": lambda v: isinstance(v, list | tuple),
    "an object": lambda v: isinstance(v, Mapping),
}


class _Reader:
    """Typed reads from one mapping of a definition; each misfit is a located problem."""

    def __init__(self, raw: Mapping[Any, Any], loc: str, problems: list[str],
                 known: frozenset[str]) -> None:
        self.raw, self.loc, self.problems = raw, loc, problems
        problems.extend(f"{loc or 'definition'}: unknown key {k!r:.60}" for k in raw
                        if k not in known)

    def bad(self, key: str, message: str) -> None:
        self.problems.append(f"{self.loc}.{key}: {message}" if self.loc else f"{key}: {message}")

    def get(self, key: str, what: str, required: bool = False) -> Any:
        value = self.raw.get(key)
        if value is None:
            if required:
                self.bad(key, "is required")
        elif _KINDS[what](value):
            return value
        else:
            self.bad(key, f"must be {what}, not {kind(value)}")
        return None

    def flag(self, key: str) -> bool:
        return self.get(key, "true or false") is True

    def number(self, key: str, minimum: float, integer: bool = False, above: bool = False) -> Any:
        value = self.get(key, "an integer" if integer else "a number")
        if value is not None and (value <= minimum if above else value < minimum):
            self.bad(key, f"must be {'above' if above else 'at least'} {minimum}, not {value}")
            return None
        return value

    def names(self, key: str) -> tuple[str, ...] | None:
        value = self.get(key, "a list")
        if value is not None and not all(isinstance(v, str) for v in value):
            self.bad(key, "must be a list of strings")
            return None
        return tuple(value) if value is not None else None

    def mapping(self, key: str) -> dict[str, str] | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            return {v: v for v in value}
        if isinstance(value, Mapping) and all(isinstance(k, str) and isinstance(v, str)
                                              for k, v in value.items()):
            return dict(value)
        self.bad(key, "must be a list of field names or an object of field name to field name")
        return None

    def extras(self) -> dict[str, Any]:
        """Free text and metadata kept verbatim for the round trip."""
        out = {k: self.raw[k] for k in ("description", "metadata") if self.raw.get(k) is not None}
        if not isinstance(out.get("description", ""), str):
            self.bad("description", "must be a string")
        return out

    def condition(self, key: str) -> tuple[str | None, Condition | None]:
        text = self.get(key, "a string")
        if text is None:
            return None, None
        try:
            return text, Condition(text)
        except ExpressionError as exc:
            self.bad(key, exc.problems[0])
        return text, None


@dataclass
class Node:
    """One parsed entry of ``nodes`` (fields None where the definition was unusable)."""

    index: int
    id: str | None
    agent_name: str | None
    workflow: str | None
    is_entry: bool
    is_exit: bool
    skip: tuple[str | None, Condition | None]
    retry: RetryPolicy | None
    timeout: float | None
    fan_out: bool
    join: bool
    inputs: dict[str, str] | None
    outputs: dict[str, str] | None
    extras: dict[str, Any]
    retry_keys: tuple[str, ...] = ()
    max_concurrency: int | None = None  # instances of a map target running at once

    @property
    def loc(self) -> str:
        """Where the node is in the definition."""
        return f"nodes[{self.index}]"


@dataclass
class Conn:
    """One parsed entry of ``connections``."""

    index: int
    source: str | None
    target: str | None
    condition: tuple[str | None, Condition | None]
    context: tuple[str, ...] | None
    extras: dict[str, Any]
    map: str | None = None  # the state field whose items each start one target instance

    @property
    def loc(self) -> str:
        """Where the connection is in the definition."""
        return f"connections[{self.index}]"


@dataclass
class Definition:
    """A parsed definition: header, blackboard class, nodes and connections."""

    name: str
    state: type[Blackboard]
    max_supersteps: int | None
    nodes: list[Node]
    conns: list[Conn]
    head: dict[str, Any] = field(default_factory=dict)
    waits: str = "superstep"

    @property
    def entry(self) -> Node | None:
        """The entry node when there is exactly one."""
        entries = [n for n in self.nodes if n.is_entry]
        return entries[0] if len(entries) == 1 else None


def _check_reachable(d: Definition, ids: dict[str, Node],
                     adjacency: dict[str, list[tuple[int, str]]], problems: list[str]) -> None:
    """Nodes no connection (or handoff) reaches from any entry node.

    Checked from every entry node given, so a second entry, itself a problem,
    does not hide the unreachable nodes beside it.
    """
    entries = [n.id for n in d.nodes if n.is_entry and n.id in ids and ids[n.id] is n]
    if not entries:
        return
    handoffs = {nid: [(-1, t) for t in n.extras.get("handoffs", ()) if t in ids]
                for nid, n in ids.items()}  # an agent node's transfers reach their targets
    graph = {nid: [*out, *handoffs[nid]] for nid, out in adjacency.items()}
    live = set().union(*(_reachable(graph, e) for e in entries))
    where = f"the entry {entries[0]!r}" if len(entries) == 1 else \
        "any entry (" + ", ".join(map(repr, entries)) + ")"
    problems.extend(f"{n.loc}: node {nid!r} is unreachable from {where}"
                    for nid, n in ids.items() if nid not in live)


def parse_definition(raw: Any, problems: list[str],
                     default_name: str | None = None) -> Definition | None:
    """Parse the shape and types of a raw definition; None when it is not a mapping.

    ``default_name`` (a file's stem) names a definition that gives no ``name``;
    without it ``name`` is required.
    """
    if not isinstance(raw, Mapping):
        problems.append(f"definition: must be an object, not {kind(raw)}")
        return None
    unstorable = _unstorable_text(raw)
    if unstorable:  # like text that is not JSON: nothing else is worth reading
        problems.extend(unstorable)
        return None
    r = _Reader(raw, "", problems, _TOP)
    name = r.get("name", "a string", required=default_name is None)
    if name is None and "name" not in raw:
        name = default_name
    elif name is not None and not name.strip():
        r.bad("name", "must not be empty")
    version = raw.get("version")
    if version is not None and not (isinstance(version, str) or _number(version)):
        r.bad("version", f"must be a string or a number, not {kind(version)}")
    state = parse_state(raw.get("state"), name or "", problems)
    nodes = [_parse_node(i, x, problems) for i, x in enumerate(r.get("nodes", "a list", True) or ())]
    conns = [_parse_conn(i, x, problems) for i, x in enumerate(r.get("connections", "a list") or ())]
    head = {"version": version} if version is not None else {}
    waits = r.get("waits", "a string") or "superstep"
    if waits not in ("superstep", "branch"):
        r.bad("waits", f"must be 'superstep' or 'branch', not {waits!r:.60}")
    return Definition(
        name=name or "", state=state, max_supersteps=r.number("max_supersteps", 1, integer=True),
        nodes=[n for n in nodes if n is not None], conns=[c for c in conns if c is not None],
        head=head | r.extras(), waits=waits)


def _parse_node(i: int, raw: Any, problems: list[str]) -> Node | None:
    if not isinstance(raw, Mapping):
        problems.append(f"nodes[{i}]: must be an object, not {kind(raw)}")
        return None
    r = _Reader(raw, f"nodes[{i}]", problems, _NODE)
    retry = raw.get("retry")
    return Node(
        index=i, id=r.get("id", "a string", required=True), agent_name=r.get("agent_name", "a string"),
        workflow=r.get("workflow", "a string"), is_entry=r.flag("is_entry"),
        is_exit=r.flag("is_exit"), skip=r.condition("skip_condition"), retry=_parse_retry(r),
        timeout=r.number("timeout", 0, above=True), fan_out=r.flag("fan_out"), join=r.flag("join"),
        inputs=r.mapping("inputs"), outputs=r.mapping("outputs"),
        max_concurrency=r.number("max_concurrency", 1, integer=True),
        extras={**r.extras(), **read_agent_options(raw, f"nodes[{i}]", problems)},
        retry_keys=tuple(k for k in retry if k in _RETRY) if isinstance(retry, Mapping) else ())


def _parse_retry(node: _Reader) -> RetryPolicy | None:
    raw = node.get("retry", "an object")
    if raw is None:
        return None
    r = _Reader(raw, f"{node.loc}.retry", node.problems, _RETRY)
    values = {"max_attempts": r.number("max_attempts", 1, integer=True),
              "initial_delay": r.number("initial_delay", 0), "backoff": r.number("backoff", 1),
              "max_delay": r.number("max_delay", 0), "jitter": r.get("jitter", "true or false")}
    try:
        return RetryPolicy(**{k: v for k, v in values.items() if v is not None})
    except (ValueError, TypeError, OverflowError) as exc:
        node.bad("retry", str(exc))
        return None


def _parse_conn(i: int, raw: Any, problems: list[str]) -> Conn | None:
    if not isinstance(raw, Mapping):
        problems.append(f"connections[{i}]: must be an object, not {kind(raw)}")
        return None
    r = _Reader(raw, f"connections[{i}]", problems, _CONN)
    return Conn(index=i, source=r.get("source_id", "a string", required=True),
                target=r.get("target_id", "a string", required=True),
                condition=r.condition("condition"), context=r.names("context_passed"),
                map=r.get("map", "a string"), extras=r.extras())


# -- semantic checks -------------------------------------------------------------------------


def check_definition(d: Definition, problems: list[str]) -> None:
    """Graph-level checks of a parsed definition, each problem with its location.

    Ids, entry and exits, references, joins, state keys, reachability and
    (unless ``max_supersteps`` allows loops) cycles.
    """
    ids = _check_ids(d, problems)
    _check_entry_exit(d, problems)
    conns = _check_refs(d, ids, problems)
    _check_joins(ids, conns, problems)
    _check_dead(ids, conns, problems)
    _check_state_refs(d, problems)
    adjacency: dict[str, list[tuple[int, str]]] = {nid: [] for nid in ids}
    for c in conns:
        adjacency[c.source or ""].append((c.index, c.target or ""))
    entry = d.entry
    _check_reachable(d, ids, adjacency, problems)
    if d.max_supersteps is None:
        order = [entry.id] if entry is not None and entry.id in ids else []
        for index in back_edges(adjacency, [*order, *ids]):
            c = next(c for c in conns if c.index == index)
            problems.append(f"{c.loc}: {c.source!r} -> {c.target!r} closes a cycle; loops are "
                            "allowed only when the definition sets 'max_supersteps'")


def _check_ids(d: Definition, problems: list[str]) -> dict[str, Node]:
    seen: dict[str, Node] = {}
    for n in d.nodes:
        if n.id is None:
            continue
        if not _ID.fullmatch(n.id) or n.id == END:
            problems.append(f"{n.loc}.id: {n.id!r:.60} is not a valid node id (letters, digits, "
                            "'_' and '-', not starting with a digit or '-')")
        elif n.id in seen:
            problems.append(f"{n.loc}.id: duplicate id {n.id!r} (also {seen[n.id].loc})")
        else:
            seen[n.id] = n
    return seen


def _check_entry_exit(d: Definition, problems: list[str]) -> None:
    entries = [n for n in d.nodes if n.is_entry]
    if not entries:
        problems.append('nodes: no entry node; set "is_entry": true on exactly one node')
    problems.extend(f"{n.loc}.is_entry: a second entry node ({n.id!r}; {entries[0].id!r} at "
                    f"{entries[0].loc} is one already), a workflow has exactly one"
                    for n in entries[1:])
    if not any(n.is_exit for n in d.nodes):
        problems.append('nodes: no exit node; set "is_exit": true on at least one node')


def _check_refs(d: Definition, ids: Mapping[str, Node], problems: list[str]) -> list[Conn]:
    good = []
    for c in d.conns:
        bad = [(key, v) for key, v in (("source_id", c.source), ("target_id", c.target))
               if v is not None and v not in ids]
        problems.extend(f"{c.loc}.{key}: unknown node {v!r:.60}" for key, v in bad)
        if not bad and c.source is not None and c.target is not None:
            good.append(c)
    return good


def _check_joins(ids: Mapping[str, Node], conns: list[Conn], problems: list[str]) -> None:
    into = {c.target for c in conns}
    problems.extend(f"{n.loc}.join: node {nid!r} has no incoming connections to wait for"
                    for nid, n in ids.items() if n.join and nid not in into)
    out_count: dict[str, int] = {}
    for c in conns:
        out_count[c.source or ""] = out_count.get(c.source or "", 0) + 1
    for c in conns:
        if not ids[c.target or ""].join:
            continue
        if c.condition[0] is not None:
            problems.append(f"{c.loc}.condition: a connection into join node {c.target!r} cannot "
                            "have a condition (the join waits for every incoming connection)")
        if c.map is not None:
            problems.append(f"{c.loc}.map: a connection into join node {c.target!r} cannot map "
                            "(the join runs once, when every source has completed)")
        if not ids[c.source or ""].fan_out and out_count[c.source or ""] > 1:
            problems.append(f"{c.loc}: {c.source!r} takes only its first matching connection, so "
                            f"its connection into join node {c.target!r} must be its only one "
                            f"(or set \"fan_out\": true on {c.source!r})")


def _check_dead(ids: Mapping[str, Node], conns: list[Conn], problems: list[str]) -> None:
    """First match: a connection after one without a condition can never be taken."""
    catch_all: dict[str, Conn] = {}
    for c in conns:
        source = ids[c.source or ""]
        if source.fan_out or ids[c.target or ""].join:
            continue
        if source.id in catch_all:
            problems.append(f"{c.loc}: never taken: {catch_all[source.id].loc} from {source.id!r} "
                            "has no condition and is tried first")
        elif c.condition[0] is None:
            catch_all[source.id or ""] = c


def _check_state_refs(d: Definition, problems: list[str]) -> None:
    schema = schema_for(d.state)
    for n in d.nodes:
        _check_paths(n.skip[1], f"{n.loc}.skip_condition", schema.free_form, schema.fields, problems)
    for c in d.conns:
        _check_paths(c.condition[1], f"{c.loc}.condition", schema.free_form, schema.fields, problems)
        for i, key in enumerate(c.context or ()):
            if not has_field(schema, key) or hasattr(BaseModel, key):
                problems.append(f"{c.loc}.context_passed[{i}]: {key!r:.60} is not a state field")
        if c.map is not None and (not has_field(schema, c.map) or hasattr(BaseModel, c.map)):
            problems.append(f"{c.loc}.map: {c.map!r:.60} is not a state field (a map sends one "
                            f"instance of {c.target!r} per item of a list field)")


def _check_paths(cond: Condition | None, loc: str, free: bool, fields: Iterable[str],
                 problems: list[str]) -> None:
    if cond is None or free:
        return
    problems.extend(f"{loc}: {path!r} does not start with a state field"
                    for path in sorted(cond.paths) if path.split(".")[0] not in fields)


def _reachable(adjacency: Mapping[str, list[tuple[int, str]]], start: str) -> set[str]:
    seen, queue = {start}, deque([start])
    while queue:
        for _, nxt in adjacency.get(queue.popleft(), ()):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return seen


def back_edges(adjacency: Mapping[str, Iterable[tuple[int, str]]], roots: Iterable[str]) -> list[int]:
    """Indices of the edges that close a cycle in a depth-first walk from ``roots``."""
    state: dict[str, bool] = {}  # False while on the walk's stack, True when finished
    found: list[int] = []
    for root in roots:
        if root in state:
            continue
        state[root] = False
        stack = [(root, iter(adjacency.get(root, ())))]
        while stack:
            node, edges = stack[-1]
            for index, nxt in edges:
                if nxt not in state:
                    state[nxt] = False
                    stack.append((nxt, iter(adjacency.get(nxt, ()))))
                    break
                if state[nxt] is False:
                    found.append(index)
            else:
                state[node] = True
                stack.pop()
    return found
