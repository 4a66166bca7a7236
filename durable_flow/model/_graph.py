"""The immutable workflow graph: nodes, edges, switches, joins, commands."""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import orjson

from ._blackboard import Blackboard, StateSchema, schema_for
from ._budget import Budget
from ._expr import Expression, parse_expression
from ._retry import RetryPolicy
from ._send import Send
from ._versions import Migration

__all__ = [
    "END",
    "Command",
    "Condition",
    "ConditionLike",
    "Edge",
    "FanIn",
    "NodeSpec",
    "OnFailure",
    "Switch",
    "WaitMode",
    "Workflow",
]

END = "__end__"
#: how a superstep treats a task that waits (``WorkflowBuilder(..., waits=...)``)
WaitMode = Literal["superstep", "branch"]
WAIT_MODES: tuple[WaitMode, ...] = ("superstep", "branch")
"""The terminal target: an edge to END ends that branch."""

ConditionLike: TypeAlias = "str | Callable[[Any], bool] | Condition"


@dataclass(frozen=True, slots=True)
class Command:
    """A node's return value that routes dynamically.

    ``update`` is merged like a returned dict; ``goto`` (a node id, a
    ``Send``, a list of them, or END) replaces the node's edges for this run;
    each ``Send`` starts one instance of its node; ``reason`` is kept as the
    checkpoint's routing reason.
    """

    update: Mapping[str, Any] | None = None
    goto: str | Send | Sequence[str | Send] | None = None
    reason: str | None = None

    def targets(self) -> tuple[str | Send, ...] | None:
        """The goto targets as a tuple, or None when the edges decide."""
        if self.goto is None:
            return None
        return (self.goto,) if isinstance(self.goto, str | Send) else tuple(self.goto)


class Condition:
    """A routing predicate: a safe expression string or a callable on the state."""

    __slots__ = ("_fn", "expression", "label")

    def __init__(self, cond: str | Callable[[Any], bool]) -> None:
        self.expression: Expression | None = None
        if isinstance(cond, str):
            self.expression = parse_expression(cond)
            self._fn: Callable[[Any], Any] = self.expression
            self.label = cond
        elif callable(cond):
            self._fn = cond
            self.label = getattr(cond, "__qualname__", type(cond).__name__)
        else:
            raise TypeError(f"a condition is a string or a callable, got {cond!r}")

    @classmethod
    def of(cls, cond: ConditionLike) -> Condition:
        """Wrap ``cond`` unless it already is a Condition."""
        return cond if isinstance(cond, Condition) else cls(cond)

    def __call__(self, state: Any) -> bool:
        return bool(self._fn(state))

    @property
    def paths(self) -> frozenset[str]:
        """Dotted state paths the condition reads (expressions only)."""
        return self.expression.paths if self.expression else frozenset()

    def __repr__(self) -> str:
        return f"Condition({self.label!r})"


@dataclass(frozen=True, slots=True)
class Edge:
    """A connection; it fires when its condition (if any) holds."""

    source: str
    target: str
    when: Condition | None = None


@dataclass(frozen=True, slots=True)
class Switch:
    """First matching case wins; ``default`` when none matches."""

    source: str
    cases: tuple[tuple[Condition, str], ...]
    default: str | None = None


@dataclass(frozen=True, slots=True)
class FanIn:
    """``target`` runs once every source has completed (the join)."""

    sources: tuple[str, ...]
    target: str


NodeKind = Literal["function", "subworkflow", "agent", "transform"]


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One node of a workflow."""

    id: str
    fn: Callable[..., Any] | None
    kind: NodeKind = "function"
    retry: RetryPolicy | None = None
    timeout: float | None = None
    skip_if: Condition | None = None
    goto: tuple[str, ...] = ()
    produces: tuple[str, ...] | None = None
    consumes: tuple[str, ...] = ()
    subworkflow: SubworkflowSpec | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    view: Callable[[Any], Any] | None = None
    arg_type: Any = None  # what a ``Send``'s arg is validated into (``ctx.arg``)
    max_concurrency: int | None = None  # instances of one superstep running at once
    uses: tuple[str, ...] = ()  # named limits a worker grants before each run of the node

    @property
    def takes_ctx(self) -> bool:
        """True when the function accepts ``(state, ctx)``."""
        if self.fn is None:
            return False
        try:
            params = inspect.signature(self.fn).parameters.values()
        except (TypeError, ValueError):
            return True
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        varargs = any(p.kind is p.VAR_POSITIONAL for p in params)
        return varargs or len(positional) >= 2


@dataclass(frozen=True, slots=True)
class SubworkflowSpec:
    """A nested workflow and how its fields map to the parent's."""

    workflow: Workflow
    inputs: Mapping[str, str]
    outputs: Mapping[str, str]


#: What a node that exhausted its retries does to its run (``WorkflowBuilder(on_failure=)``).
OnFailure = Literal["fail", "pause"]


@dataclass(frozen=True, slots=True)
class Workflow:
    """An immutable, validated graph; build it with ``WorkflowBuilder``."""

    name: str
    state: type[Blackboard]
    nodes: Mapping[str, NodeSpec]
    edges: Mapping[str, tuple[Edge, ...]]
    switches: Mapping[str, Switch]
    fan_ins: tuple[FanIn, ...]
    entry: str
    exits: frozenset[str]
    max_supersteps: int = 100
    loaded_from: str | None = None
    version: str = "1"
    # (source, target) connections that map over a state path: one instance per item
    maps: Mapping[tuple[str, str], str] = field(default_factory=dict)
    # how runs of older versions move onto this one, by the version they come from
    migrations: Mapping[str, Migration] = field(default_factory=dict)
    # the spending limit of its runs unless ``run``/``submit`` give one (not in the signature)
    budget: Budget | None = None
    # "superstep": the barrier waits for every task; "branch": a waiting task is parked
    waits: WaitMode = "superstep"
    # role names whose holders operate / read its runs (see ``model/_access.py``; not in the signature)
    operators: tuple[str, ...] = ()
    viewers: tuple[str, ...] = ()
    # "fail": a node that exhausted its retries fails the run; "pause": it pauses it (a
    # dead letter, RunInfo.error set) until unpause runs the failed task again
    on_failure: OnFailure = "fail"
    # how many runs submitted with the same ``concurrency_key`` workers execute at once
    # (None: no limit; not in the signature)
    max_runs_per_key: int | None = None

    @property
    def schema(self) -> StateSchema:
        """The reducer view of the blackboard class."""
        return schema_for(self.state)

    def successors(self, node: str) -> set[str]:
        """Every target a node may reach (edges, switch cases, gotos, joins)."""
        out = {e.target for e in self.edges.get(node, ())}
        sw = self.switches.get(node)
        if sw:
            out |= {t for _, t in sw.cases} | ({sw.default} if sw.default else set())
        out |= set(self.nodes[node].goto) if node in self.nodes else set()
        out |= {f.target for f in self.fan_ins if node in f.sources}
        return out

    @property
    def signature(self) -> str:
        """A hash of the graph's structure (nested workflows included).

        Node functions' bodies are not part of it, so a fixed node can resume
        a failed run; ids, kinds, routing, conditions and state fields are.
        """
        return hashlib.sha256(orjson.dumps(self.describe(), option=orjson.OPT_SORT_KEYS)).hexdigest()

    def explain(self) -> str:
        """Per node: what it reads and writes, its model, history mode, tools and routing."""
        from ._explain import explain

        return explain(self)

    def describe(self) -> dict[str, Any]:
        """A JSON-ready description of the structure (used by the signature)."""
        nodes: dict[str, Any] = {}
        for nid, spec in self.nodes.items():
            entry: dict[str, Any] = {"kind": spec.kind, "goto": list(spec.goto),
                                     "skip_if": spec.skip_if.label if spec.skip_if else None}
            if spec.subworkflow is not None:
                entry["workflow"] = spec.subworkflow.workflow.describe()
                entry["inputs"] = dict(spec.subworkflow.inputs)
                entry["outputs"] = dict(spec.subworkflow.outputs)
            nodes[nid] = entry
        described: dict[str, Any] = {
            "name": self.name,
            "fields": sorted(self.schema.fields),
            "nodes": nodes,
            "edges": [[e.source, e.target, e.when.label if e.when else None]
                      for es in self.edges.values() for e in es],
            "switches": [[s.source, [[c.label, t] for c, t in s.cases], s.default]
                         for s in self.switches.values()],
            "fan_ins": [[list(f.sources), f.target] for f in self.fan_ins],
            "entry": self.entry,
            "exits": sorted(self.exits),
        }
        if self.maps:  # only when present, so the signature of other graphs is unchanged
            described["maps"] = sorted([s, t, path] for (s, t), path in self.maps.items())
        if self.waits != "superstep":  # checkpoints of parked runs need the same mode
            described["waits"] = self.waits
        return described
