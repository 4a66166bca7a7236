"""WorkflowBuilder: declare nodes and routing, then ``build()`` a validated Workflow."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ._blackboard import Blackboard, schema_for
from ._graph import (
    END,
    Condition,
    ConditionLike,
    Edge,
    FanIn,
    NodeSpec,
    SubworkflowSpec,
    Switch,
    Workflow,
)
from ._retry import RetryPolicy
from .errors import ExpressionError, WorkflowValidationError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ._models import ChatModel
    from .transforms import Transform

__all__ = ["WorkflowBuilder"]

F = TypeVar("F", bound=Callable[..., Any])
_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


class WorkflowBuilder:
    """Collects nodes and routing; :meth:`build` validates everything at once."""

    def __init__(self, name: str, state: type[Blackboard] = Blackboard) -> None:
        self.name = name
        self.state = state
        self._nodes: dict[str, NodeSpec] = {}
        self._edges: list[tuple[str, str, ConditionLike | None]] = []
        self._switches: dict[str, tuple[list[tuple[ConditionLike, str]], str | None]] = {}
        self._fan_ins: list[tuple[tuple[str, ...], str]] = []
        self._entry: str | None = None
        self._exits: set[str] = set()
        self._problems: list[str] = []
        self.max_supersteps = 100

    # nodes ----------------------------------------------------------------
    def add_node(
        self,
        id: str,
        fn: Callable[..., Any],
        *,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
        skip_if: ConditionLike | None = None,
        goto: Iterable[str] = (),
        produces: Iterable[str] | None = None,
        consumes: Iterable[str] = (),
    ) -> WorkflowBuilder:
        """Add a function node: ``(state, ctx) -> dict | Command | None`` (sync or async)."""
        if not callable(fn):
            self._problems.append(f"node {id!r}: {fn!r} is not callable")
            fn = _noop
        return self.add_spec(NodeSpec(
            id=id, fn=fn, retry=retry, timeout=timeout,
            skip_if=self._condition(skip_if, f"node {id!r} skip_if"), goto=tuple(goto),
            produces=tuple(produces) if produces is not None else None,
            consumes=tuple(consumes)))

    def node(self, id: str | None = None, **options: Any) -> Callable[[F], F]:
        """Decorator form of :meth:`add_node`; the id defaults to the function name."""

        def register(fn: F) -> F:
            self.add_node(id or fn.__name__, fn, **options)
            return fn

        return register

    def add_subworkflow(
        self,
        id: str,
        workflow: Workflow,
        *,
        inputs: Mapping[str, str] | Sequence[str] = (),
        outputs: Mapping[str, str] | Sequence[str] = (),
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
        skip_if: ConditionLike | None = None,
    ) -> WorkflowBuilder:
        """Add a nested workflow as a node.

        ``inputs`` maps inner fields from parent fields (``{inner: parent}``),
        ``outputs`` maps parent fields from inner fields (``{parent: inner}``);
        a list means the same names on both sides.
        """
        ins = _mapping(inputs)
        outs = _mapping(outputs)
        inner = workflow.schema
        outer = schema_for(self.state)
        for inner_f, parent_f in ins.items():
            self._check_field(inner, inner_f, f"sub-workflow {id!r} inputs: inner")
            self._check_field(outer, parent_f, f"sub-workflow {id!r} inputs: parent")
        for parent_f, inner_f in outs.items():
            self._check_field(outer, parent_f, f"sub-workflow {id!r} outputs: parent")
            self._check_field(inner, inner_f, f"sub-workflow {id!r} outputs: inner")
        return self.add_spec(NodeSpec(
            id=id, fn=None, kind="subworkflow", retry=retry, timeout=timeout,
            skip_if=self._condition(skip_if, f"node {id!r} skip_if"),
            produces=tuple(outs), consumes=tuple(ins.values()),
            subworkflow=SubworkflowSpec(workflow, MappingProxyType(ins), MappingProxyType(outs))))

    def add_agent(
        self,
        id: str,
        model: ChatModel,
        *,
        instructions: str,
        input_key: str | None = None,
        input_template: str | None = None,
        output_key: str | None = None,
        output: type[BaseModel] | Sequence[type[BaseModel]] | None = None,
        reads: Sequence[str] = (),
        history: Literal["node", "global", "none"] = "node",
        keep_history: bool = False,
        tools: Sequence[Callable[..., Any]] = (),
        max_tool_rounds: int = 8,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
        skip_if: ConditionLike | None = None,
    ) -> WorkflowBuilder:
        """Add an agent node: a chat model with instructions, tools and a history.

        See :class:`durable_flow.Agent` for how input, output and history work.
        """
        from ._agent import Agent

        agent = Agent(model, instructions, input_key=input_key, input_template=input_template,
                      output_key=output_key, output=output, reads=reads, history=history,
                      keep_history=keep_history, tools=tools, max_tool_rounds=max_tool_rounds,
                      retry=retry, timeout=timeout, skip_if=skip_if)
        return self.add_spec(agent.node_spec(id))

    def add_transform(self, id: str, transform: Transform, **options: Any) -> WorkflowBuilder:
        """Add a state transform node (``durable_flow.transforms``); options: retry, timeout, skip_if."""
        return self.add_spec(transform.node_spec(id, **options))

    def add_spec(self, spec: NodeSpec) -> WorkflowBuilder:
        """Add a fully described node (used by agents, transforms and loaders)."""
        if not isinstance(spec.id, str) or not _ID.match(spec.id) or spec.id == END:
            # not registered: an invalid id would only cause follow-up noise
            # (unreachable, unknown targets) or shadow END
            self._problems.append(
                f"node id {spec.id!r} is invalid: use letters, digits, '_' or '-'")
            return self
        if spec.id in self._nodes:
            self._problems.append(f"node {spec.id!r} is defined twice")
        self._nodes[spec.id] = spec
        return self

    # routing ----------------------------------------------------------------
    def add_edge(self, source: str, target: str, when: ConditionLike | None = None) -> WorkflowBuilder:
        """Connect ``source`` to ``target``; every edge whose condition holds fires."""
        self._edges.append((source, target, when))
        return self

    def add_switch(
        self, source: str, cases: Sequence[tuple[ConditionLike, str]], default: str | None = None
    ) -> WorkflowBuilder:
        """Route from ``source`` to the first case whose condition holds, else ``default``."""
        if source in self._switches:
            self._problems.append(f"node {source!r} has two switches")
        self._switches[source] = (list(cases), default)
        return self

    def route_by_type(
        self, source: str, routes: Mapping[type | str, str], default: str | None = None
    ) -> WorkflowBuilder:
        """A switch on the ``matched_type`` field (set by union-typed agent output)."""
        cases: list[tuple[ConditionLike, str]] = []
        for key, target in routes.items():
            name = key if isinstance(key, str) else key.__name__
            cases.append((f"matched_type == {_quote(name)}", target))
        return self.add_switch(source, cases, default)

    def add_fan_in(self, sources: Sequence[str], target: str) -> WorkflowBuilder:
        """``target`` runs once all ``sources`` have completed."""
        self._fan_ins.append((tuple(sources), target))
        return self

    def set_entry(self, id: str) -> WorkflowBuilder:
        """Set the entry node (calling again replaces it)."""
        self._entry = id
        return self

    def set_exit(self, *ids: str) -> WorkflowBuilder:
        """Mark exit nodes: the superstep in which one runs ends the run."""
        self._exits.update(ids)
        return self

    # build ------------------------------------------------------------------
    def build(self) -> Workflow:
        """Validate and freeze; raises ``WorkflowValidationError`` listing every problem."""
        problems = list(self._problems)
        edges: dict[str, list[Edge]] = {}
        for source, target, when in self._edges:
            cond = self._condition(when, f"edge {source}->{target}", problems)
            edges.setdefault(source, []).append(Edge(source, target, cond))
        switches = {}
        for source, (cases, default) in self._switches.items():
            built = []
            for case, target in cases:
                c = self._condition(case, f"switch {source}->{target}", problems)
                if c is not None:
                    built.append((c, target))
            switches[source] = Switch(source, tuple(built), default)
        wf = Workflow(
            name=self.name, state=self.state, nodes=MappingProxyType(dict(self._nodes)),
            edges=MappingProxyType({k: tuple(v) for k, v in edges.items()}),
            switches=MappingProxyType(switches),
            fan_ins=tuple(FanIn(s, t) for s, t in self._fan_ins),
            entry=self._entry or "", exits=frozenset(self._exits),
            max_supersteps=self.max_supersteps)
        from ._validate import validate_graph

        problems += validate_graph(wf)
        from ._dataflow import check_dataflow

        problems += check_dataflow(wf)
        if problems:
            raise WorkflowValidationError(problems, workflow=self.name)
        return wf

    # helpers ----------------------------------------------------------------
    def _condition(
        self, cond: ConditionLike | None, where: str, problems: list[str] | None = None
    ) -> Condition | None:
        if cond is None:
            return None
        try:
            return Condition.of(cond)
        except ExpressionError as exc:
            (self._problems if problems is None else problems).append(
                f"{where}: {exc.problems[0]}")
        except TypeError as exc:
            (self._problems if problems is None else problems).append(f"{where}: {exc}")
        return None

    def _check_field(self, schema: Any, name: str, where: str) -> None:
        if name not in schema.fields and not schema.free_form:
            self._problems.append(f"{where} field {name!r} does not exist on "
                                  f"{schema.cls.__name__}")


def _mapping(value: Mapping[str, str] | Sequence[str]) -> dict[str, str]:
    if isinstance(value, Mapping):
        return dict(value)
    return {name: name for name in value}


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _noop(state: Any) -> None:
    return None
