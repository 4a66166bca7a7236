"""Agent nodes: a chat model with instructions, tools and a history, as one workflow node.

An agent node renders its instructions, resolves its input, asks the model,
runs the tools the model calls, and writes the reply (text, or structured
output flattened into fields). Every model round and every tool call is a
durable ``ctx.step``: when the task runs again (a retry, an answer to a
request made by a tool, a crash) the recorded replies and tool results are
replayed, so a finished tool call never runs twice.

Templates (``instructions`` and ``input_template``) use ``{field}`` and
``{path.to.field}`` placeholders, replaced by plain text substitution: no
code runs, ``str.format`` is never used, and a missing (or null) field stays
as literal text. ``{shared.input}`` is the blackboard path ``shared.input``
when it exists, else the run's original input.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, cast

import orjson
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import to_json, to_jsonable_python

from ..engine._budget import check_budget
from ..engine._context import NodeContext, task_calls
from ..errors import ExpressionError, ModelError
from ..model._blackboard import Blackboard, schema_for
from ..model._expr import resolve_path
from ..model._graph import Command, Condition, ConditionLike, NodeSpec
from ..model._messages import Message, ToolCall
from ..model._retry import RetryPolicy
from ._approval import approved_call
from ._calls import ModelCall
from ._handoffs import Handoffs
from ._models import ChatModel, model_name
from ._pricing import priced
from ._tools import Tool, compile_tools, validation_errors
from .context import Context

__all__ = ["Agent", "HistoryMode", "template_paths", "to_text"]

HistoryMode = Literal["node", "global", "none"]
_MODES = ("node", "global", "none")
_INPUT_FIELDS = ("question", "input", "message", "query", "prompt")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\}")
_SHARED_INPUT = "shared.input"


@dataclass(frozen=True)
class Agent:
    """Everything ``WorkflowBuilder.add_agent`` takes, as one value.

    ``node_spec(id)`` turns it into a workflow node. Input: ``input_template``
    if set, else ``input_key`` (when its value is not empty), else the first
    non-empty of ``shared.input``, the fields ``question``, ``input``,
    ``message``, ``query``, ``prompt``, the path ``<node>.input``, the run's
    original input, the first non-empty string an upstream node wrote (in
    field order), and finally the empty string (no user message is then
    sent). Output: the reply text goes
    to ``output_key`` (default ``answer``); ``output=Model`` asks for JSON
    and writes its non-null fields (lowercased) plus ``result``;
    ``output=(A, B)`` also writes ``matched_type`` (the class name). History:
    the model sees the node's own history (``"node"``), the global messages
    (``"global"``) or neither (``"none"``); ``reads`` adds those fields as a
    context block to the system prompt and implies ``"none"`` unless
    ``keep_history``. ``context`` (``durable_flow.agents.context``) narrows
    that history further and adds blackboard fields to the prompt.
    ``tools`` are plain functions with type hints; a parameter annotated
    ``NodeContext`` receives the context; each call is published as
    ``tool_started``/``tool_finished``. ``handoffs`` (node ids) give the model
    one ``transfer_to_<id>`` tool each, of which it must call exactly one; the
    node routes there with the model's reason. A model that can stream is
    streamed (``model_delta`` events); a transient model error is retried up
    to ``model_retries`` times; a reply that breaks the output schema (or a
    handoff agent that does not transfer) is sent back with the problem up to
    ``output_retries`` times before the node fails.
    """

    model: ChatModel
    instructions: str = ""
    input_key: str | None = None
    input_template: str | None = None
    output_key: str | None = None
    output: type[BaseModel] | Sequence[type[BaseModel]] | None = None
    reads: Sequence[str] = ()
    history: HistoryMode = "node"
    keep_history: bool = False
    tools: Sequence[Callable[..., Any]] = ()
    max_tool_rounds: int = 8
    retry: RetryPolicy | None = None
    timeout: float | None = None
    skip_if: ConditionLike | None = None
    context: Context | None = None
    handoffs: Sequence[str] = ()
    output_retries: int = 1
    model_retries: int = 3

    def __post_init__(self) -> None:
        object.__setattr__(self, "reads", tuple(self.reads))
        object.__setattr__(self, "tools", tuple(self.tools))
        object.__setattr__(self, "handoffs", tuple(self.handoffs))
        if self.output is not None and not isinstance(self.output, type):
            object.__setattr__(self, "output", tuple(self.output))

    @property
    def history_mode(self) -> HistoryMode:
        """The history the model sees (``reads`` implies ``"none"`` unless ``keep_history``)."""
        return "none" if self.reads and not self.keep_history else self.history

    @property
    def output_types(self) -> tuple[type[BaseModel], ...]:
        """The structured output classes (empty for text output)."""
        if self.output is None:
            return ()
        return (self.output,) if isinstance(self.output, type) else tuple(self.output)

    @property
    def is_union(self) -> bool:
        """True when ``output`` is a tuple of classes (sets ``matched_type``)."""
        return self.output is not None and not isinstance(self.output, type)

    def writes(self) -> tuple[str, ...]:
        """Every field this agent may write."""
        out = ["messages"]
        if not self.output_types or self.output_key:
            out.append(self.output_key or "answer")
        for cls in self.output_types:
            out += [name.lower() for name in cls.model_fields]
        if self.output_types:
            out.append("result")
        if self.is_union:
            out.append("matched_type")
        return tuple(dict.fromkeys(out))

    def read_fields(self) -> dict[str, str]:
        """Top-level fields this agent reads, each with how it reads it."""
        found: dict[str, str] = {}
        for where, text in (("instructions template", self.instructions),
                            ("input template", self.input_template or "")):
            for path in template_paths(text):
                if path != _SHARED_INPUT:
                    found.setdefault(path.split(".")[0], where)
        for name in self.reads:
            found.setdefault(name.split(".")[0], "reads")
        for name in self.context.keys if self.context is not None else ():
            found.setdefault(name.split(".")[0], "context")
        if self.input_key and self.input_template is None:
            found.setdefault(self.input_key.split(".")[0], "input_key")
        return found

    def output_schema(self) -> dict[str, Any] | None:
        """The JSON Schema the model's reply must follow, or None for text."""
        types = self.output_types
        if not types:
            return None
        if len(types) == 1:
            return types[0].model_json_schema()
        union: Any = functools.reduce(operator.or_, types)
        return TypeAdapter(union).json_schema()

    def problems(self, id: str) -> list[str]:
        """Configuration mistakes, reported by ``build()``."""
        where = f"agent {id!r}"
        out = []
        if not callable(getattr(self.model, "complete", None)):
            out.append(f"{where}: model {self.model!r} has no async complete() method")
        if self.history not in _MODES:
            out.append(f"{where}: history must be one of {', '.join(_MODES)}, not {self.history!r}")
        if self.max_tool_rounds < 0:
            out.append(f"{where}: max_tool_rounds must be >= 0")
        for name in ("output_retries", "model_retries"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                out.append(f"{where}: {name} must be a whole number >= 0, not {value!r}")
        if self.context is not None and not isinstance(self.context, Context):
            out.append(f"{where}: context must come from durable_flow.agents.context "
                       f"(window, user_only, from_state, none), not {self.context!r:.60}")
        out += Handoffs.problems(self.handoffs, where, has_output=bool(self.output_types))
        for cls in self.output_types:
            if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
                out.append(f"{where}: output {cls!r} is not a pydantic model class")
        return out

    def node_spec(self, id: str) -> NodeSpec:
        """The workflow node for this agent, with id ``id`` (kind ``"agent"``)."""
        problems = self.problems(id)
        tools, tool_problems = compile_tools(self.tools, f"agent {id!r}")
        problems += tool_problems
        skip: Condition | None = None
        if self.skip_if is not None:
            try:
                skip = Condition.of(self.skip_if)
            except (ExpressionError, TypeError) as exc:
                problems.append(f"agent {id!r} skip_if: {exc}")
        runner = _Runner(self, id, tools, self.output_schema() if not problems else None)

        async def run_agent(state: Any, ctx: NodeContext) -> dict[str, Any] | Command:
            return await runner.run(state, ctx)

        run_agent.__qualname__ = run_agent.__name__ = f"agent_{id}"
        meta = {"agent": self, "model": model_name(self.model), "history": self.history_mode,
                "tools": (*tools, *runner.handoffs.by_tool), "reads_from": self.read_fields(),
                "problems": tuple(problems)}
        if self.context is not None and isinstance(self.context, Context):
            meta["context"] = self.context.describe()
        return NodeSpec(id=id, fn=run_agent, kind="agent", retry=self.retry, timeout=self.timeout,
                        skip_if=skip, goto=tuple(self.handoffs), produces=self.writes(),
                        consumes=tuple(self.read_fields()), meta=MappingProxyType(meta))


# ---------------------------------------------------------------------------
# running one agent task
# ---------------------------------------------------------------------------


def _refused(text: str) -> str:
    """A refused tool call's result: the refusal the model reads (the tool is not called)."""
    return text


def _step_name(call_id: str, round_no: int, position: int, used: set[str]) -> str:
    """A tool call's step name, unique in the node's run, the same on every execution.

    A call is named by its id; an id the run saw before (models number their
    calls per reply) gets its round, and one repeated within a reply (a
    provider that sends no ids) its position too.
    """
    for name in (f"tool:{call_id}", f"tool:{round_no}:{call_id}",
                 f"tool:{round_no}:{position}:{call_id}"):
        if name not in used:
            used.add(name)
            return name
    raise AssertionError("a reply's positions are unique")  # pragma: no cover


class _Runner:
    """Runs one agent task: prompt, model rounds, tools, output."""

    def __init__(self, agent: Agent, id: str, tools: Mapping[str, Tool],
                 output_schema: dict[str, Any] | None) -> None:
        self.agent = agent
        self.id = id
        self.tools = tools
        self.handoffs = Handoffs(agent.handoffs)
        self.specs = [t.spec for t in tools.values()] + self.handoffs.specs
        self.output_schema = output_schema

    async def run(self, state: Any, ctx: NodeContext) -> dict[str, Any] | Command:
        agent = self.agent
        shared = _RunInput(ctx, state)
        keys = (*agent.reads, *(agent.context.keys if agent.context is not None else ()))
        system = await render(agent.instructions, state, shared) + \
            _context_block(tuple(dict.fromkeys(keys)), state)
        text = await self.resolve_input(state, shared)
        new = [Message.user(text)] if text else []  # no input: the history speaks for itself
        mode = agent.history_mode
        prior = ctx.history if mode == "node" else \
            list(getattr(state, "messages", [])) if mode == "global" else []
        if agent.context is not None:
            prior = agent.context.select(prior)
        convo = [*([Message.system(system)] if system.strip() else []), *prior, *new]
        reply = await self.converse(convo, new, ctx)
        ctx.remember(*new[:-1])
        transfer = self.handoffs.chosen(reply)
        if transfer is not None:
            return self.handoffs.command(reply, transfer, agent.output_key or "answer")
        update = self.output_update(reply, state)
        update["messages"] = [reply]
        return update

    async def resolve_input(self, state: Any, shared: _RunInput) -> str:
        """The text of the user message (see ``Agent`` for the order)."""
        agent = self.agent
        if agent.input_template is not None:
            return await render(agent.input_template, state, shared)
        paths = (agent.input_key,) if agent.input_key else ()
        for path in (*paths, _SHARED_INPUT, *_INPUT_FIELDS, f"{self.id}.input"):
            text = to_text(resolve_path(state, path))
            if text:
                return text
        original = await shared.text()
        if original:
            return original
        return await shared.upstream_text(skip=set(agent.writes()))

    async def converse(self, convo: list[Message], new: list[Message], ctx: NodeContext) -> Message:
        """Model rounds and tool calls until the model answers without tools."""
        used: set[str] = set()
        model = ModelCall(self.agent.model, retries=self.agent.model_retries, publish=ctx.publish)
        for round_no in range(self.agent.max_tool_rounds + 1):
            reply = await self.ask(round_no, convo, new, ctx, model)
            convo.append(reply)
            new.append(reply)
            if not reply.tool_calls or self.handoffs.chosen(reply) is not None:
                return reply
            if round_no == self.agent.max_tool_rounds:
                raise ModelError(f"agent {self.id!r} still calls tools after max_tool_rounds="
                                 f"{self.agent.max_tool_rounds}", raw=reply.model_dump_json())
            for position, call in enumerate(reply.tool_calls):
                name = _step_name(call.id, round_no, position, used)
                content = await self.tool_step(name, call, ctx, round_no * 1000 + position)
                result = Message.tool(content, tool_call_id=call.id, name=call.name)
                convo.append(result)
                new.append(result)
        raise AssertionError("unreachable")  # pragma: no cover

    async def ask(self, round_no: int, convo: list[Message], new: list[Message],
                  ctx: NodeContext, call: ModelCall) -> Message:
        """One model round as durable steps, with up to ``output_retries`` repair rounds.

        A reply with a problem (see ``problem``) is recorded and sent back with
        the problem while repairs are left; the last one is not recorded (the
        node fails, and a retry of the node asks the model again).
        """
        repairs = self.agent.output_retries
        for fix in range(repairs + 1):
            label = f"{round_no}" if not fix else f"{round_no}.fix{fix}"
            data: dict[str, Any] = await ctx.step(f"model:{label}", self.call_model, list(convo),
                                                  call, label, fix == repairs, ctx,
                                                  round_no * 1000 + fix)
            reply = Message.model_validate(data)
            problem = self.problem(reply)
            if problem is None:
                return reply
            fixing = Message.user(f"Your reply could not be used: {problem}. Answer again.")
            convo += [reply, fixing]
            new += [reply, fixing]
        raise AssertionError("unreachable")  # pragma: no cover

    async def call_model(self, convo: list[Message], call: ModelCall, label: str,
                         last: bool, ctx: NodeContext, key: int) -> dict[str, Any]:
        """One model call (streamed, retried); its reply as plain data for the step record.

        Past the run's budget a person is asked first (``key`` finds the
        answer again); the call's usage is added to the run's as it returns.
        """
        agent = self.agent
        calls = task_calls(ctx)
        await check_budget(calls, key)
        response = await call(convo, tools=self.specs, output_schema=self.output_schema,
                              round=label)
        await calls.io.run.spending.charge(priced(agent.model, response.usage))
        msg = response.message
        problem = self.problem(msg) if last else None
        if problem is not None:
            raise ModelError(f"agent {self.id!r}: {problem}",
                             raw=msg.content or msg.model_dump_json())  # not recorded
        meta = {**msg.metadata, "model": model_name(agent.model), "usage": response.usage.to_dict()}
        reply = msg.model_copy(update={"role": "assistant", "name": self.id, "metadata": meta})
        return reply.model_dump(mode="json")

    def problem(self, reply: Message) -> str | None:
        """Why a reply cannot be used (schema or handoff), or None."""
        if self.handoffs:
            return self.handoffs.problem(reply)
        if reply.tool_calls or not self.agent.output_types:
            return None
        try:
            parse_output(self.agent.output_types, reply.content)
        except ModelError as exc:
            return str(exc).split("; raw reply:")[0]
        return None

    async def tool_step(self, name: str, call: ToolCall, ctx: NodeContext, key: int) -> str:
        """One tool call as a durable step; approved first when its tool asks for it."""
        tool = self.tools.get(call.name)
        if tool is None or (tool.approval is None and tool.in_doubt == "rerun"):
            return cast(str, await ctx.step(name, self.call_tool, call, ctx))
        if tool.approval is not None and not task_calls(ctx).io.has_step(name):
            try:  # a call the model got wrong is told so without asking anyone
                arguments = tool.args.model_validate(call.arguments).model_dump(mode="json")
            except ValidationError:
                arguments = None
            if arguments is not None:
                chosen = await approved_call(task_calls(ctx), tool, call, key, arguments)
                if isinstance(chosen, str):
                    return cast(str, await ctx.step(name, _refused, chosen))
                call = chosen
        return cast(str, await ctx.step(name, self.call_tool, call, ctx, in_doubt=tool.in_doubt))

    async def call_tool(self, call: ToolCall, ctx: NodeContext) -> str:
        """Run one tool call, published as ``tool_started`` and ``tool_finished``."""
        ctx.publish("tool_started", tool=call.name, call_id=call.id, arguments=dict(call.arguments))
        try:
            result = await self.run_tool(call, ctx)
        except Exception as exc:
            ctx.publish("tool_finished", tool=call.name, call_id=call.id,
                        error=f"{type(exc).__name__}: {exc}"[:2000])
            raise
        ctx.publish("tool_finished", tool=call.name, call_id=call.id, result=result[:2000])
        return result

    async def run_tool(self, call: ToolCall, ctx: NodeContext) -> str:
        """Run one tool call; a bad call is answered with an error text the model can read."""
        tool = self.tools.get(call.name)
        if tool is None:
            return f"error: there is no tool {call.name!r} (tools: {', '.join(self.tools) or 'none'})"
        try:
            args = tool.args.model_validate(call.arguments)
        except ValidationError as exc:
            return f"error: invalid arguments for {call.name!r}: {validation_errors(exc)}"
        kwargs = {name: getattr(args, name) for name in type(args).model_fields}
        if tool.ctx_param is not None:
            kwargs[tool.ctx_param] = ctx
        if inspect.iscoroutinefunction(tool.fn):
            result = await tool.fn(**kwargs)
        else:
            result = await asyncio.to_thread(tool.fn, **kwargs)
            if inspect.isawaitable(result):
                result = await result
        return to_text(result)

    def output_update(self, reply: Message, state: Any) -> dict[str, Any]:
        """The node's update from the final reply."""
        agent = self.agent
        if not agent.output_types:
            return {agent.output_key or "answer": reply.content}
        value = parse_output(agent.output_types, reply.content)
        out: dict[str, Any] = {agent.output_key: reply.content} if agent.output_key else {}
        for name, item in value.model_dump(mode="json").items():
            if item is not None:
                out[name.lower()] = item
        out["result"] = _fit_result(state, value)
        if agent.is_union:
            out["matched_type"] = type(value).__name__
        return out


class _RunInput:
    """The run's original input, read lazily (once per run) through the context."""

    def __init__(self, ctx: NodeContext, state: Any) -> None:
        self.ctx = ctx
        self.state = state

    async def values(self) -> dict[str, Any]:
        return await self.ctx.run_input()

    async def text(self) -> str:
        """The input as text: its one non-default value, or a JSON object of them."""
        given = await self.values()
        defaults = _defaults(self.state)
        meaningful = {k: v for k, v in given.items()
                      if k != "messages" and not _empty(v)
                      and (k not in defaults or to_jsonable_python(defaults[k]) != v)}
        if not meaningful:
            return ""
        if len(meaningful) == 1:
            return to_text(next(iter(meaningful.values())))
        return to_text(meaningful)

    async def upstream_text(self, skip: set[str]) -> str:
        """The first non-empty string field (in field order) that differs from the input."""
        given = await self.values()
        for name, value in _fields(self.state):
            if name in skip or name == "messages":
                continue
            if isinstance(value, str) and value.strip() and value != given.get(name):
                return value
        return ""


# ---------------------------------------------------------------------------
# templates and text
# ---------------------------------------------------------------------------


def template_paths(text: str) -> list[str]:
    """The ``{path}`` placeholders of a template, in order of appearance."""
    return list(dict.fromkeys(_PLACEHOLDER.findall(text or "")))


async def render(text: str, state: Any, shared: _RunInput | None = None) -> str:
    """Replace ``{path}`` placeholders with blackboard values; missing ones stay literal."""
    if not text or "{" not in text:
        return text or ""
    values: dict[str, str] = {}
    for path in template_paths(text):
        value = resolve_path(state, path)
        if value is not None:
            values[path] = to_text(value)
        elif path == _SHARED_INPUT and shared is not None:
            values[path] = await shared.text()
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)


def to_text(value: Any) -> str:
    """A value as prompt text: strings as they are, other values as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, Message):
        return value.content
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    if isinstance(value, bool | int | float):
        return str(value)
    return to_json(value, fallback=str).decode()


def _context_block(reads: Sequence[str], state: Any) -> str:
    if not reads:
        return ""
    lines = [f"- {name}: {to_text(resolve_path(state, name)) or '(empty)'}" for name in reads]
    return "\n\nContext:\n" + "\n".join(lines)


def _fields(state: Any) -> list[tuple[str, Any]]:
    if not isinstance(state, BaseModel):
        return list(state.items()) if isinstance(state, Mapping) else []
    out = [(name, getattr(state, name)) for name in type(state).model_fields]
    return out + list((state.model_extra or {}).items())


def _defaults(state: Any) -> dict[str, Any]:
    if isinstance(state, Blackboard):
        return schema_for(type(state)).default_values()
    return {}


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, str | list | dict | tuple) and not value)


# ---------------------------------------------------------------------------
# structured output
# ---------------------------------------------------------------------------


def parse_output(types: Sequence[type[BaseModel]], raw: str) -> BaseModel:
    """Parse a JSON reply into the best matching class; ModelError (with the raw reply) if none."""
    data = _json_object(raw)
    names = " | ".join(t.__name__ for t in types)
    best: tuple[tuple[int, int, int], BaseModel] | None = None
    first_error = ""
    for index, cls in enumerate(types):
        try:
            value = cls.model_validate(data)
        except ValidationError as exc:
            first_error = first_error or validation_errors(exc)
            continue
        keys = set(data)
        known = set(cls.model_fields)
        # fewest unknown keys, then fewest fields left at their default, then declaration order
        score = (len(keys - known), len(known - keys), index)
        if best is None or score < best[0]:
            best = (score, value)
    if best is None:
        raise ModelError(f"the reply does not match {names}: {first_error}", raw=raw)
    return best[1]


def _json_object(raw: str) -> dict[str, Any]:
    text = raw.strip()
    fenced = re.fullmatch(r"```[A-Za-z]*\s*(.*?)\s*```", text, re.DOTALL)
    if fenced:
        text = fenced.group(1)
    for candidate in (text, text[text.find("{"): text.rfind("}") + 1]):
        try:
            data = orjson.loads(candidate)
        except orjson.JSONDecodeError:
            continue
        if isinstance(data, dict):
            return data
    raise ModelError("the reply is not a JSON object", raw=raw)


def _fit_result(state: Any, value: BaseModel) -> Any:
    """``result`` as the model instance when the field's type takes it, else as plain data."""
    if isinstance(state, Blackboard):
        spec = schema_for(type(state)).fields.get("result")
        if spec is not None:
            try:
                spec.adapter.validate_python(value)
                return value
            except ValidationError:
                pass
    return value.model_dump(mode="json")
