"""The damaged-rows harness: a scenario, the damage done to it, and what each call did.

``build`` runs two small workflows on one store:

* run ``A`` waits: a sub-workflow waits inside, one request of ``ask`` is
  answered and its second one is open, ``ctx.step`` results are recorded at
  the input checkpoint and at the head, a finished sibling's task write is
  saved, and the blackboard has a log field and a node history;
* run ``B`` completed; run ``C`` is a fork of ``B`` (waiting);
* run ``D`` (another workflow) waits with nothing recorded, so
  ``update_state`` reaches its head.

``CALLS`` are the public reads and writes a case makes; ``Outcome`` is what
one call did: its error, if any, and the tables it changed; ``damage`` spoils
one stored value. ``judge`` checks the outcomes of one case: each call must
succeed, raise what it raises on the undamaged store (or an error the damage
makes legitimate, such as ``RunNotFoundError`` for a deleted run row), or
raise ``CheckpointCorruptedError`` naming a checkpoint of the run; and a call
that fails must change nothing at all (resume, update_state and fork read and
check what they use before they claim or create anything).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Annotated, Any

import orjson

from durable_flow import (
    END,
    Blackboard,
    CheckpointCorruptedError,
    DurableFlowError,
    Message,
    NodeContext,
    Runtime,
    Workflow,
    WorkflowBuilder,
    add,
    append,
)


class Inner(Blackboard):
    q: str = ""
    ok: bool = False


class Board(Blackboard):
    topic: str = ""
    notes: Annotated[list[str], append] = []
    count: Annotated[int, add] = 0
    score: float = 0.0
    approved: bool = False
    note: str = ""
    inner_ok: bool = False
    fetched: str = ""


class Plain(Blackboard):
    topic: str = ""
    approved: bool = False


def rich_workflow() -> Workflow:
    """research -> (ask | side | sub), ``sub`` a sub-workflow that asks too."""
    inner = WorkflowBuilder("inner", state=Inner)

    async def inner_ask(state: Inner, ctx: NodeContext) -> dict[str, Any]:
        return {"ok": await ctx.request({"inner": state.q}, response_type=bool)}

    inner.add_node("inner_ask", inner_ask).set_entry("inner_ask").add_edge("inner_ask", END)
    b = WorkflowBuilder("damaged", state=Board)

    async def research(state: Board, ctx: NodeContext) -> dict[str, Any]:
        fetched = await ctx.step("fetch", lambda: f"data on {state.topic}")
        ctx.remember(Message.user("look it up"))
        return {"notes": ["researched"], "count": 1, "fetched": fetched,
                "messages": [Message.assistant("found it")]}

    async def ask(state: Board, ctx: NodeContext) -> dict[str, Any]:
        n = await ctx.step("lookup", lambda: 41)
        ok = await ctx.request({"question": "publish?", "n": n}, response_type=bool)
        note = await ctx.request({"question": "why?"}, response_type=str)
        return {"approved": ok, "note": note, "notes": ["asked"]}

    def side(state: Board) -> dict[str, Any]:
        return {"count": 1, "score": 0.5}

    b.add_node("research", research).add_node("ask", ask).add_node("side", side)
    b.add_subworkflow("sub", inner.build(), inputs={"q": "topic"}, outputs={"inner_ok": "ok"})
    b.set_entry("research")
    for node in ("ask", "side", "sub"):
        b.add_edge("research", node).add_edge(node, END)
    return b.build()


def plain_workflow() -> Workflow:
    """draft -> approve (a request)."""
    b = WorkflowBuilder("plain", state=Plain)

    async def approve(state: Plain, ctx: NodeContext) -> dict[str, Any]:
        return {"approved": await ctx.request("approve?", response_type=bool)}

    b.add_node("draft", lambda s: {"topic": "drafted"}).add_node("approve", approve)
    b.set_entry("draft").add_edge("draft", "approve").add_edge("approve", END)
    return b.build()


ANSWERS = {"ask@2#0": True, "ask@2#1": "because", "sub@2/inner_ask@1#0": True,
           "approve@2#0": True}


@dataclass
class Facts:
    """Ids of the scenario's rows (read before anything is damaged)."""

    workflows: dict[str, Workflow]
    inputs: dict[str, str] = field(default_factory=dict)
    heads: dict[str, str] = field(default_factory=dict)
    sub_heads: dict[str, str] = field(default_factory=dict)
    open_requests: dict[str, list[str]] = field(default_factory=dict)
    checkpoints: dict[str, set[str]] = field(default_factory=dict)

    @property
    def fork(self) -> str:
        """The id of run C, the fork of B."""
        return next(r for r in self.heads if r not in ("A", "B", "D"))


async def build(rt: Runtime) -> Facts:
    """Run the scenario on ``rt``'s store and return the ids of its rows."""
    rich, plain = rich_workflow(), plain_workflow()
    await rt.run(rich, {"topic": "tides"}, run_id="A")
    await rt.resume(rich, "A", responses={"ask@2#0": True})
    b = await rt.run(rich, {"topic": "moons"}, run_id="B")
    await rt.resume(rich, "B", responses={r.id: ANSWERS[r.id] for r in b.pending_requests})
    b = await rt.resume(rich, "B", responses={"ask@2#1": "because"})
    c = await rt.fork(rich, "B", (await rt.history("B"))[-1].id)
    await rt.run(plain, {}, run_id="D")
    facts = Facts(workflows={"A": rich, "B": rich, c.run_id: rich, "D": plain})
    for run in facts.workflows:
        history = await rt.history(run)
        facts.inputs[run], facts.heads[run] = history[-1].id, history[0].id
        facts.checkpoints[run] = {i.id for i in history}
        subs = await rt.history(run, namespace="sub")
        facts.checkpoints[run] |= {i.id for i in subs}
        if subs:
            facts.sub_heads[run] = subs[0].id
        facts.open_requests[run] = [p.id for p in await rt.pending_requests() if p.run_id == run]
    return facts


Call = Callable[[Runtime, Facts, str], Awaitable[Any]]


def _resume(answers: Callable[[Facts, str], Mapping[str, Any]]) -> Call:
    async def call(rt: Runtime, f: Facts, run: str) -> Any:
        return await rt.resume(f.workflows[run], run, responses=answers(f, run) or None)

    return call


async def _fork(rt: Runtime, f: Facts, run: str) -> Any:
    return await rt.fork(f.workflows[run], run, f.heads[run])


async def _fork_input(rt: Runtime, f: Facts, run: str) -> Any:
    return await rt.fork(f.workflows[run], run, f.inputs[run], update={"topic": "forked"})


async def _update(rt: Runtime, f: Facts, run: str) -> Any:
    return await rt.update_state(f.workflows[run], run, {"topic": "updated"})


READS: dict[str, Call] = {
    "get_state": lambda rt, f, run: rt.get_state(run),
    "get_state(input)": lambda rt, f, run: rt.get_state(run, f.inputs[run]),
    "get_state(sub)": lambda rt, f, run: rt.get_state(run, namespace="sub"),
    "history": lambda rt, f, run: rt.history(run),
    "history(sub)": lambda rt, f, run: rt.history(run, namespace="sub"),
    "list_runs": lambda rt, f, run: rt.list_runs(),
    "get_run": lambda rt, f, run: rt.get_run(run),
    "pending_requests": lambda rt, f, run: rt.pending_requests(),
}
WRITES: dict[str, Call] = {
    "resume": _resume(lambda f, run: {}),
    "resume(answers)": _resume(lambda f, run: {r: ANSWERS[r] for r in f.open_requests[run]}),
    "resume(repeated answer)": _resume(
        lambda f, run: {"ask@2#0": True} if run == "A" else {}),
    "fork": _fork,
    "fork(input, update)": _fork_input,
    "update_state": _update,
    "prune": lambda rt, f, run: rt.prune(keep_last=1, older_than=timedelta(0)),
}
CALLS = {**READS, **WRITES}


@dataclass
class Outcome:
    """What one call did on a damaged store."""

    call: str
    error: BaseException | None
    changed: dict[str, tuple[set[Any], set[Any]]]
    """Per table that changed: (rows gone, rows new)."""


def table_changes(before: Mapping[str, list[Any]], after: Mapping[str, list[Any]]
                  ) -> dict[str, tuple[set[Any], set[Any]]]:
    """Per table, the rows that disappeared and the rows that appeared."""
    out = {}
    for table in before:
        old, new = set(before[table]), set(after[table])
        if old != new:
            out[table] = (old - new, new - old)
    return out


@dataclass
class Scenario:
    """The undamaged scenario: a database (or store) and what each call does on it."""

    facts: Facts
    template: Any
    baseline: dict[str, dict[str, type[BaseException] | None]]


def undamaged_errors(scenario: Scenario) -> dict[tuple[str, str], str]:
    """The calls that fail on the undamaged scenario, and their errors."""
    return {(run, call): err.__name__ for run, calls in scenario.baseline.items()
            for call, err in calls.items() if err is not None}


def expected_undamaged_errors(facts: Facts) -> dict[tuple[str, str], str]:
    """What :func:`undamaged_errors` must be: misuse only, on every store."""
    return {
        ("A", "update_state"): "InvalidInputError",  # the head holds recorded work
        ("B", "resume"): "RunNotResumableError", ("B", "resume(answers)"): "RunNotResumableError",
        ("B", "resume(repeated answer)"): "RunNotResumableError",
        ("B", "update_state"): "RunNotResumableError",
        (facts.fork, "update_state"): "InvalidInputError",
        ("D", "get_state(sub)"): "CheckpointNotFoundError",
    }


# -- judging outcomes ------------------------------------------------------------------------

@dataclass
class Verdict:
    """The problems of a case (an empty list: the case passed)."""

    problems: list[str] = field(default_factory=list)


def judge(outcomes: list[Outcome], run: str, facts: Facts,
          baseline: dict[str, type[BaseException] | None],
          extra: tuple[type[BaseException], ...] = ()) -> Verdict:
    """Check every outcome of a case against the rules in this module's docstring."""
    verdict = Verdict()
    for out in outcomes:
        err, name = out.error, out.call
        if err is None:
            continue
        allowed = (CheckpointCorruptedError, *extra, *([baseline[name]] if baseline[name] else []))
        if not isinstance(err, DurableFlowError):
            verdict.problems.append(f"{name} raised {type(err).__name__}: {err}")
        elif not isinstance(err, allowed):
            verdict.problems.append(f"{name} raised {type(err).__name__} (undamaged: "
                                    f"{getattr(baseline[name], '__name__', 'no error')}): {err}")
        elif isinstance(err, CheckpointCorruptedError) and not _names_a_checkpoint(err, facts, out):
            verdict.problems.append(f"{name}: {err} names no checkpoint of run {err.run_id!r}")
        if out.changed:
            tables = ", ".join(sorted(out.changed))
            verdict.problems.append(f"{name} failed ({type(err).__name__}) but changed {tables}")
    return verdict


def _names_a_checkpoint(err: CheckpointCorruptedError, facts: Facts, out: Outcome) -> bool:
    created = {str(row[1]) for _old, new in out.changed.values() for row in new if len(row) > 1}
    return err.checkpoint_id in facts.checkpoints.get(err.run_id, set()) | created


def conclude(verdict: Verdict) -> None:
    """Fail on problems."""
    assert not verdict.problems, "\n".join(verdict.problems)


# -- damage ---------------------------------------------------------------------------------

TEXT_KINDS = ("invalid JSON", "wrong JSON type", "truncated")
BLOB_KINDS = (*TEXT_KINDS, "unknown tag", "stored as text")
MISSING = "missing row"


def _wrong_type(text: str | None) -> str:
    """Valid JSON of another type than the cell holds (a number where an object was, ...)."""
    try:
        value = orjson.loads(text) if text is not None else None
    except orjson.JSONDecodeError:
        value = None
    if isinstance(value, dict):
        return "5"
    if isinstance(value, list | str):
        return '{"x": 5}'
    if value is None or isinstance(value, bool):
        return "[5]"
    return '"text"'


def _truncated(text: str) -> str:
    return text[:len(text) // 2]


def damage(kind: str, table: str, original: str | bytes | None) -> str | bytes | None:
    """The damaged value of a cell; blobs stay bytes except when ``stored as text``."""
    blob = isinstance(original, bytes) or table not in ("runs", "checkpoints")
    text = original.decode() if isinstance(original, bytes) else original
    if kind == "stored as text":
        return text
    new = {
        "invalid JSON": "{not json",
        "wrong JSON type": _wrong_type(text),
        "truncated": _truncated(text or '{"type": "ValueError", "message": "x"}'),
        "unknown tag": ('[{"__df__":"martian","v":1}]' if table == "log_chunks"
                        else '{"__df__":"martian","v":1}'),
    }[kind]
    return new.encode() if blob else new
