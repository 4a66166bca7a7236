"""WorkflowBuilder: declare nodes and routing, then ``build()`` a validated Workflow."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel

from ..errors import WorkflowValidationError
from ..model._blackboard import Blackboard, FreeBlackboard, StateSchema, schema_for
from ..model._budget import Budget
from ..model._graph import (
    END,
    WAIT_MODES,
    ConditionLike,
    Edge,
    FanIn,
    NodeSpec,
    OnFailure,
    SubworkflowSpec,
    Switch,
    WaitMode,
    Workflow,
)
from ..model._retry import RetryPolicy
from ..model._text import printable
from ..model._versions import Migration
from ._given import Problems, bad_state, is_state

if TYPE_CHECKING:
    from ..agents._models import ChatModel
    from ..agents.context import Context
    from ..transforms import Transform

__all__ = ["WorkflowBuilder"]

F = TypeVar("F", bound=Callable[..., Any])
_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")


_NODE_OPTIONS = frozenset({"retry", "timeout", "skip_if", "goto", "produces", "consumes",
                           "arg_type", "max_concurrency", "uses"})
_TRANSFORM_OPTIONS = frozenset({"retry", "timeout", "skip_if"})


class WorkflowBuilder:
    """Collects nodes and routing; :meth:`build` validates everything at once.

    Misuse of any method (a wrong type, a bad option) does not raise where it
    happens: it is collected and reported by :meth:`build` in one
    ``WorkflowValidationError`` together with the graph's problems.
    ``on_failure="pause"`` makes a node that exhausted its retries pause its
    run with ``RunInfo.error`` set (a dead letter) instead of failing it;
    ``Runtime.unpause`` (or ``resume``) then runs the failed task again.
    ``max_runs_per_key=N``: workers execute at most N runs submitted with the
    same ``concurrency_key`` at once; the others stay ``queued``, in order.
    """

    def __init__(self, name: str, state: type[Blackboard] = Blackboard, *,
                 version: str = "1", budget: Budget | None = None,
                 waits: WaitMode = "superstep", operators: Iterable[str] = (),
                 viewers: Iterable[str] = (), on_failure: OnFailure = "fail",
                 max_runs_per_key: int | None = None) -> None:
        self.name = name
        self.state = state
        self.version = version
        self._nodes: dict[str, NodeSpec] = {}
        self._edges: list[tuple[str, str, ConditionLike | None]] = []
        self._switches: dict[str, tuple[list[tuple[ConditionLike, str]], str | None]] = {}
        self._fan_ins: list[tuple[tuple[str, ...], str]] = []
        self._maps: dict[tuple[str, str], str] = {}
        self._entry: str | None = None
        self._exits: set[str] = set()
        self._problems = Problems()
        self._migrations: dict[str, Migration] = {}
        self.max_supersteps = 100
        self.budget = budget
        if budget is not None and not isinstance(budget, Budget):
            self._problems.append(f"budget must be a Budget, got {budget!r:.60}")
            self.budget = None
        self.on_failure: OnFailure = self._problems.one_of("on_failure", on_failure,
                                                           ("fail", "pause"))
        self.waits: WaitMode = self._problems.one_of("waits", waits, WAIT_MODES)
        self.operators = self._problems.role_names("operators", operators)
        self.viewers = self._problems.role_names("viewers", viewers)
        self.max_runs_per_key = max_runs_per_key if max_runs_per_key is None or \
            self._problems.positive_int("max_runs_per_key", max_runs_per_key) else None

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
        arg_type: Any = None,
        max_concurrency: int | None = None,
        uses: Iterable[str] = (),
    ) -> WorkflowBuilder:
        """Add a function node: ``(state, ctx) -> dict | Command | None`` (sync or async).

        ``goto``, ``produces`` and ``consumes`` are lists of names (one
        string is taken as a list of one). For a node started by ``Send``
        (one instance per item): ``arg_type`` is the type ``ctx.arg`` is
        validated into, ``max_concurrency`` how many instances run at once.
        ``uses`` names the limits (``Worker(limits={name: Limit(...)})``) each
        run of the node takes a grant of first, across every worker.
        """
        if not callable(fn):
            self._problems.append(f"node {id!r}: {fn!r} is not callable")
            fn = _noop
        where = f"node {id!r}"
        targets = self._problems.names(goto, f"{where} goto", "node ids") if goto is not None else ()
        writes = self._problems.names(produces, f"{where} produces", "field names") \
            if produces is not None else None
        reads = self._problems.names(consumes, f"{where} consumes", "field names") \
            if consumes is not None else ()
        return self.add_spec(NodeSpec(
            id=id, fn=fn, retry=retry, timeout=timeout,
            skip_if=self._problems.condition(skip_if, f"{where} skip_if"),
            goto=targets or (), produces=writes, consumes=reads or (),
            arg_type=self._problems.arg_type(arg_type, where), max_concurrency=max_concurrency,
            uses=self._problems.names(uses, f"{where} uses", "limit names") or ()))

    def node(self, id: str | None = None, **options: Any) -> Callable[[F], F]:
        """Decorator form of :meth:`add_node`; the id defaults to the function name."""
        if id is not None and not isinstance(id, str):
            self._problems.append(
                f"node(): the id must be a string, got {id!r}; decorate with @builder.node() "
                "or @builder.node('id'), with parentheses")
        options = self._problems.known("node()", options, _NODE_OPTIONS)

        def register(fn: F) -> F:
            nid = id if isinstance(id, str) else getattr(fn, "__name__", None)
            if nid is None:
                self._problems.append(f"node(): {fn!r} has no __name__; pass the id explicitly")
            else:
                self.add_node(nid, fn, **options)
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
        max_concurrency: int | None = None,
    ) -> WorkflowBuilder:
        """Add a nested workflow as a node.

        ``inputs`` maps inner fields from parent fields (``{inner: parent}``),
        ``outputs`` maps parent fields from inner fields (``{parent: inner}``);
        a list means the same names on both sides. Started by ``Send``, each
        instance is a nested run of its own whose ``arg`` (a dict of inner
        fields) goes over ``inputs``; ``max_concurrency`` bounds how many run
        at once.
        """
        if not isinstance(workflow, Workflow):
            hint = (" (call .build() on the builder first)"
                    if isinstance(workflow, WorkflowBuilder) else "")
            self._problems.append(f"sub-workflow {id!r}: expected a Workflow{hint}, got "
                                  f"{type(workflow).__name__}: {workflow!r:.60}")
            # registered as a plain node so edges to it cause no follow-up noise
            return self.add_spec(NodeSpec(id=id, fn=_noop, retry=retry, timeout=timeout))
        ins = self._problems.mapping(inputs, f"sub-workflow {id!r} inputs")
        outs = self._problems.mapping(outputs, f"sub-workflow {id!r} outputs")
        inner = workflow.schema
        outer = self._schema()
        for inner_f, parent_f in ins.items():
            self._problems.field(inner, inner_f, f"sub-workflow {id!r} inputs: inner")
            self._problems.field(outer, parent_f, f"sub-workflow {id!r} inputs: parent")
        for parent_f, inner_f in outs.items():
            self._problems.field(outer, parent_f, f"sub-workflow {id!r} outputs: parent")
            self._problems.field(inner, inner_f, f"sub-workflow {id!r} outputs: inner")
        return self.add_spec(NodeSpec(
            id=id, fn=None, kind="subworkflow", retry=retry, timeout=timeout,
            skip_if=self._problems.condition(skip_if, f"node {id!r} skip_if"),
            produces=tuple(outs), consumes=tuple(ins.values()), max_concurrency=max_concurrency,
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
        context: Context | None = None,
        handoffs: Sequence[str] = (),
        output_retries: int = 1,
        model_retries: int = 3,
        uses: Iterable[str] = (),
    ) -> WorkflowBuilder:
        """Add an agent node: a chat model with instructions, tools and a history.

        See :class:`durable_flow.Agent` for how input, output, history,
        ``context`` (``durable_flow.agents.context``), ``handoffs`` and the
        retries work. ``uses`` names limits as in :meth:`add_node`; a 429
        with ``Retry-After`` from the model pauses those limits for every
        task using them.
        """
        from ..agents._agent import Agent

        try:
            agent = Agent(model, instructions, input_key=input_key, input_template=input_template,
                          output_key=output_key, output=output, reads=reads, history=history,
                          keep_history=keep_history, tools=tools,
                          max_tool_rounds=max_tool_rounds, retry=retry, timeout=timeout,
                          skip_if=skip_if, context=context, handoffs=handoffs,
                          output_retries=output_retries, model_retries=model_retries)
            spec = agent.node_spec(id)
            spec = dataclasses.replace(
                spec, uses=self._problems.names(uses, f"agent {id!r} uses", "limit names") or ())
        except (TypeError, ValueError) as exc:
            self._problems.append(f"agent {id!r}: {exc}")
            return self.add_spec(NodeSpec(id=id, fn=_noop))
        return self.add_spec(spec)

    def add_transform(self, id: str, transform: Transform, **options: Any) -> WorkflowBuilder:
        """Add a state transform node (``durable_flow.transforms``); options: retry, timeout, skip_if."""
        from ..transforms import Transform

        options = self._problems.known(f"transform {id!r}", options, _TRANSFORM_OPTIONS)
        if not isinstance(transform, Transform):
            self._problems.append(
                f"transform {id!r}: expected a transform from durable_flow.transforms (pick, "
                f"rename, ...), got {type(transform).__name__}: {transform!r:.60}")
            return self.add_spec(NodeSpec(id=id, fn=_noop))
        return self.add_spec(transform.node_spec(id, **options))

    def add_spec(self, spec: NodeSpec) -> WorkflowBuilder:
        """Add a fully described node (used by agents, transforms and loaders)."""
        spec = self._problems.node_options(spec)
        if not isinstance(spec.id, str) or not _ID.fullmatch(spec.id) or spec.id == END:
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
        bad = [f"{side} must be a node id (a string), got {value!r:.60}"
               for side, value in (("source", source), ("target", target))
               if not isinstance(value, str)]
        if bad:
            self._problems.append(f"edge {source!r:.40} -> {target!r:.40}: {'; '.join(bad)}")
            return self
        self._edges.append((source, target, when))
        return self

    def add_switch(
        self, source: str, cases: Sequence[tuple[ConditionLike, str]], default: str | None = None
    ) -> WorkflowBuilder:
        """Route from ``source`` to the first case whose condition holds, else ``default``."""
        if not isinstance(source, str):
            self._problems.append(
                f"switch: source must be a node id (a string), got {source!r:.60}")
            return self
        where = f"switch on {source!r}"
        if default is not None and not isinstance(default, str):
            self._problems.append(
                f"{where}: default must be a node id (a string) or None, got {default!r:.60}")
            default = None
        pairs: list[tuple[ConditionLike, str]] = []
        if isinstance(cases, str | Mapping) or not isinstance(cases, Iterable):
            self._problems.append(
                f"{where}: cases must be a list of (condition, target) pairs, got "
                f"{type(cases).__name__}: {cases!r:.60}")
        else:
            for i, case in enumerate(cases):
                if (isinstance(case, tuple | list) and len(case) == 2
                        and isinstance(case[1], str)):
                    pairs.append((case[0], case[1]))
                else:
                    self._problems.append(
                        f"{where}: case {i} must be a (condition, target) pair with a node id "
                        f"as target, got {case!r:.60}")
        if source in self._switches:
            self._problems.append(f"node {source!r} has two switches")
        self._switches[source] = (pairs, default)
        return self

    def route_by_type(
        self, source: str, routes: Mapping[type | str, str], default: str | None = None
    ) -> WorkflowBuilder:
        """A switch on the ``matched_type`` field (set by union-typed agent output)."""
        if not isinstance(routes, Mapping):
            self._problems.append(f"route_by_type on {source!r}: routes must be a mapping "
                                  f"{{type or type name: target}}, got {routes!r:.60}")
            routes = {}
        cases: list[tuple[ConditionLike, str]] = []
        for key, target in routes.items():
            if not isinstance(key, str | type):
                self._problems.append(f"route_by_type on {source!r}: {key!r:.60} is neither "
                                      "a class nor a class name")
                continue
            name = key if isinstance(key, str) else key.__name__
            cases.append((f"matched_type == {_quote(name)}", target))
        return self.add_switch(source, cases, default)

    def add_fan_in(self, sources: Sequence[str], target: str) -> WorkflowBuilder:
        """``target`` runs once all ``sources`` have completed."""
        names = self._problems.names(sources, f"fan-in into {target!r:.40} sources", "node ids")
        if not isinstance(target, str):
            self._problems.append(
                f"fan-in: target must be a node id (a string), got {target!r:.60}")
        elif names is not None:
            self._fan_ins.append((names, target))
        return self

    def map_connection(self, source: str, target: str, items: str) -> WorkflowBuilder:
        """Make the connection ``source`` -> ``target`` a map over the state path ``items``.

        The connection (an edge, a switch case or default, added as usual) is
        taken as before; taken, it starts one instance of ``target`` per item
        of the list at ``items`` (``target[0]``, ``target[1]``, ...), each
        item as that instance's ``ctx.arg``, like one ``Send`` per item.
        """
        if not all(isinstance(x, str) for x in (source, target, items)) or not items:
            self._problems.append(f"map {source!r:.40} -> {target!r:.40}: source, target and "
                                  f"items must be strings, got {items!r:.60} as items")
            return self
        self._maps[(source, target)] = items
        return self

    def set_entry(self, id: str) -> WorkflowBuilder:
        """Set the entry node (calling again replaces it)."""
        if not isinstance(id, str):
            self._problems.append(f"set_entry: the entry must be a node id (a string), "
                                  f"got {id!r:.60}")
            return self
        self._entry = id
        return self

    def set_exit(self, *ids: str) -> WorkflowBuilder:
        """Mark exit nodes: the superstep in which one runs ends the run."""
        for x in ids:
            if isinstance(x, str):
                self._exits.add(x)
            else:
                self._problems.append(f"set_exit: an exit must be a node id (a string), "
                                      f"got {x!r:.60}")
        return self

    def migrate(self, from_version: str, fn: Callable[[dict[str, Any]], Mapping[str, Any]], *,
                nodes: Mapping[str, str] | None = None) -> WorkflowBuilder:
        """Declare how a run started on ``from_version`` moves onto this version.

        ``Runtime.resume(workflow, run_id, migrate=True)`` applies it:
        ``fn(values)`` gets the run's blackboard values (a plain dict) and
        returns this version's values, which replace the old ones (not
        through the reducers); ``nodes`` maps renamed node ids (old -> new)
        in the run's next tasks and pending requests. An ``append`` field may
        keep or extend its items, not rewrite them.
        """
        where = f"migrate({from_version!r})"
        if not isinstance(from_version, str) or not from_version.strip():
            self._problems.append(f"{where}: from_version must be a non-empty string")
        elif from_version in self._migrations:
            self._problems.append(f"{where}: a migration from this version is already declared")
        if not callable(fn):
            self._problems.append(f"{where}: {fn!r:.60} is not callable")
        renames = self._problems.mapping(nodes or {}, f"{where} nodes")
        self._migrations[str(from_version)] = Migration(
            str(from_version), fn, MappingProxyType(renames))
        return self

    # build ------------------------------------------------------------------
    def build(self) -> Workflow:
        """Validate and freeze; raises ``WorkflowValidationError`` listing every problem."""
        problems = Problems(self._problems)  # a second build() reports the same
        state = self.state
        if not is_state(state):
            problems.append(bad_state(state))
            state = FreeBlackboard  # validate the rest as if free-form: no follow-up noise
        name = self.name
        if not isinstance(name, str) or not name.strip():
            problems.append(f"the workflow name must be a non-empty string, got {name!r:.60}")
            name = str(name)
        limit = self.max_supersteps
        if not problems.positive_int("max_supersteps", limit):
            limit = 100
        edges: dict[str, list[Edge]] = {}
        for source, target, when in self._edges:
            cond = problems.condition(when, f"edge {source}->{target}")
            edges.setdefault(source, []).append(Edge(source, target, cond))
        switches = {source: Switch(source, problems.cases(source, cases), default)
                    for source, (cases, default) in self._switches.items()}
        wf = Workflow(
            name=name, state=state, nodes=MappingProxyType(dict(self._nodes)),
            edges=MappingProxyType({k: tuple(v) for k, v in edges.items()}),
            switches=MappingProxyType(switches),
            fan_ins=tuple(FanIn(s, t) for s, t in self._fan_ins),
            entry=self._entry or "", exits=frozenset(self._exits),
            max_supersteps=limit, version=self.version, maps=MappingProxyType(dict(self._maps)),
            migrations=MappingProxyType(dict(self._migrations)), budget=self.budget,
            waits=self.waits, operators=self.operators, viewers=self.viewers,
            on_failure=self.on_failure, max_runs_per_key=self.max_runs_per_key)
        from ._validate import check_versions, validate_graph

        problems.found += validate_graph(wf)
        from ._dataflow import check_dataflow

        problems.found += check_dataflow(wf)
        problems.found += check_versions(wf)
        if problems:
            # A problem may quote text that is not valid Unicode: escape it, so the
            # error itself can be printed and logged.
            raise WorkflowValidationError([printable(p) for p in problems], workflow=name)
        return wf

    # helpers ----------------------------------------------------------------
    def _schema(self) -> StateSchema:
        """The builder's state schema; a bad ``state`` (reported by build) counts as free-form."""
        return schema_for(self.state if is_state(self.state) else FreeBlackboard)


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _noop(state: Any) -> None:
    return None
