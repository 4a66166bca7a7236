"""A model-based test of ``waits="branch"``: generated graphs, answer orders, updates, forks.

Hypothesis draws small graphs: ``start`` fans out to one to three branches of
one or two nodes each (a plain node, a request, a ~0 s sleep, an event wait,
a sub-workflow with a fan-out and a request inside (its own waits either
mode), a ``Send`` to two
instances of which one asks), a fan-in ``join``, and sometimes an exit
beside them. A driver answers, sends events and lets timers pass in a drawn
order, calls ``update_state`` and forks the run at drawn points. Every run
in ``waits="branch"`` must complete; a task runs again only once its answer,
event or timer came; the final log (an ``append`` field: compared as a
multiset) and the number of times each task ran equal the default mode's for
the same answers; every namespace's history is one chain (``chainkit``).

In the suite a few derandomized examples run (profile ``waits-suite``);
``make test-model`` runs many more (``HYPOTHESIS_PROFILE=waits-model``).
"""

from __future__ import annotations

import asyncio
import collections
import os
import time
from dataclasses import dataclass, field
from typing import Annotated, Any

from chainkit import assert_one_chain
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durable_flow import (
    END,
    Blackboard,
    Command,
    InvalidInputError,
    MemoryStore,
    NodeContext,
    RunResult,
    RunStatus,
    Runtime,
    Send,
    Workflow,
    WorkflowBuilder,
    append,
)

settings.register_profile("waits-suite", max_examples=12, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("waits-model", max_examples=1000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "waits-suite")
if PROFILE not in ("waits-suite", "waits-model"):
    PROFILE = "waits-suite"

KINDS = ("plain", "ask", "sleep", "event", "sub", "send")
WAITS = {"ask", "sleep", "event"}  # a node of these kinds waits once, so runs twice


class Log(Blackboard):
    log: Annotated[list[str], append] = []


@dataclass(frozen=True)
class Spec:
    """A generated graph: each branch's node kinds in order, and whether an exit is beside."""

    branches: tuple[tuple[str, ...], ...]
    exit: bool = False
    #: the sub-workflows' own waits in the branch-mode run (the default run: "superstep")
    inner: str = "branch"

    def expected_calls(self, through: set[str] | None = None) -> collections.Counter[str]:
        """How many times each task body runs when every wait is met once.

        A sleep whose ~0 s had passed by the time it was checked returns at
        once (``through``: a loaded machine can take that long between two
        lines), so its task runs once.
        """
        out: collections.Counter[str] = collections.Counter(start=1, join=1)
        for i, kinds in enumerate(self.branches):
            for j, kind in enumerate(kinds):
                key = f"b{i}n{j}"
                if kind == "sub":
                    out.update({f"{key}.split": 1, f"{key}.ask": 2, f"{key}.work": 1})
                elif kind == "send":
                    out.update({key: 1, f"{key}.each[0]": 1, f"{key}.each[1]": 2})
                    break  # the instances end the branch
                else:
                    out[key] = 2 if kind in WAITS and key not in (through or ()) else 1
        return out


@dataclass
class Recorder:
    """What one run's tasks did: calls by task, waits begun, waits met."""

    calls: collections.Counter[str] = field(default_factory=collections.Counter)
    waiting: set[str] = field(default_factory=set)  # keys whose event/timer wait began
    met: set[str] = field(default_factory=set)  # keys whose answer, event or timer came
    due: dict[str, float] = field(default_factory=dict)  # a sleep's wake time (monotonic)
    through: set[str] = field(default_factory=set)  # sleeps already over when first checked

    def check_runs_again_only_when_met(self) -> None:
        now = time.monotonic()
        for key, n in self.calls.items():
            if key in self.waiting or n > 1:
                came = key in self.met or self.due.get(key, now + 1) <= now
                limit = 2 if came else 1
                assert n <= limit, f"{key} ran {n} times, its wait met: {key in self.met}"


def _note(rec: Recorder, key: str) -> Any:
    def note(s: Log) -> dict[str, Any]:
        rec.calls[key] += 1
        return {"log": [key]}
    return note


def _waiter(rec: Recorder, key: str, kind: str) -> Any:
    async def wait(s: Log, ctx: NodeContext) -> dict[str, Any]:
        rec.calls[key] += 1
        rec.waiting.add(key)
        if kind == "ask":
            got = await ctx.request({"key": key}, response_type=str)
        elif kind == "event":
            got = await ctx.wait_event(f"ev:{key}", response_type=str)
        else:
            rec.due.setdefault(key, time.monotonic() + 0.005)
            await ctx.sleep(0.005)
            if rec.calls[key] == 1:
                rec.through.add(key)
            got = "slept"
        return {"log": [f"{key}={got}"]}
    return wait


def _fan(rec: Recorder, key: str) -> Any:
    def fan(s: Log) -> Command:
        rec.calls[key] += 1
        return Command(update={"log": [key]}, goto=[Send(f"{key}_each", 0),
                                                    Send(f"{key}_each", 1)])
    return fan


def _each(rec: Recorder, key: str) -> Any:
    async def one(s: Log, ctx: NodeContext) -> dict[str, Any]:
        name = f"{key}.each[{ctx.arg}]"
        rec.calls[name] += 1
        if ctx.arg == 1:  # one instance asks, the other finishes at once
            rec.waiting.add(name)
            return {"log": [f"{name}={await ctx.request({'key': name}, response_type=str)}"]}
        return {"log": [name]}
    return one


def _inner(rec: Recorder, key: str, waits: str) -> Workflow:
    b = WorkflowBuilder(f"inner_{key}", state=Log, waits=waits)  # type: ignore[arg-type]
    b.add_node("split", _note(rec, f"{key}.split"))
    b.add_node("ask", _waiter(rec, f"{key}.ask", "ask"))
    b.add_node("work", _note(rec, f"{key}.work"))
    b.set_entry("split").add_edge("split", "ask").add_edge("split", "work")
    b.add_edge("ask", END).add_edge("work", END)
    return b.build()


def build(spec: Spec, rec: Recorder, waits: str) -> Workflow:
    """The workflow ``spec`` describes, its tasks reporting to ``rec``."""
    b = WorkflowBuilder("model", state=Log, waits=waits)  # type: ignore[arg-type]
    b.add_node("start", _note(rec, "start")).set_entry("start")
    ends: list[str] = []
    for i, kinds in enumerate(spec.branches):
        prev = "start"
        for j, kind in enumerate(kinds):
            key = f"b{i}n{j}"
            if kind == "plain":
                b.add_node(key, _note(rec, key))
            elif kind == "sub":
                inner = spec.inner if waits == "branch" else "superstep"
                b.add_subworkflow(key, _inner(rec, key, inner), inputs=[], outputs=["log"])
            elif kind == "send":
                b.add_node(key, _fan(rec, key), goto=[f"{key}_each"])
                b.add_node(f"{key}_each", _each(rec, key), arg_type=int)
            else:
                b.add_node(key, _waiter(rec, key, kind))
            b.add_edge(prev, key)
            prev = f"{key}_each" if kind == "send" else key
            if kind == "send":
                break  # the instances end the branch
        ends.append(prev)
    b.add_node("join", _note(rec, "join")).add_fan_in(ends, "join").add_edge("join", END)
    if spec.exit:
        b.add_node("fin", _note(rec, "fin")).add_edge("start", "fin").set_exit("fin")
    return b.build()


@st.composite
def specs(draw: st.DrawFn) -> Spec:
    branch = st.lists(st.sampled_from(KINDS), min_size=1, max_size=2).map(tuple)
    branches = tuple(draw(st.lists(branch, min_size=1, max_size=3)))
    return Spec(branches, exit=draw(st.integers(0, 5)) == 0,
                inner=draw(st.sampled_from(["branch", "superstep"])))


@dataclass
class Plan:
    """The driver's choices, drawn as it goes (``data``), or a fixed order (None)."""

    data: st.DataObject | None
    update_at: int = -1  # the waiting point at which update_state runs
    fork_at: int = -1  # the waiting point whose head is forked
    updated: bool = False

    def pick(self, n: int, label: str) -> int:
        if self.data is None:
            return 0
        # the same draw whatever ``n``: how many waits are open may depend on timing
        # (a ~0 s timer due at a barrier), and hypothesis replays a case draw by draw
        return self.data.draw(st.integers(0, 63), label=label) % n


async def drive(rt: Runtime, wf: Workflow, rec: Recorder, run_id: str, plan: Plan,
                make: Any) -> tuple[RunResult, list[str]]:
    """Run to completion: answer, send events and let timers pass one at a time.

    Returns the result and the ids of the forks it made (each driven too).
    """
    r = await rt.run(wf, {}, run_id=run_id)
    forks: list[str] = []
    for point in range(60):
        rec.check_runs_again_only_when_met()
        if r.status is not RunStatus.WAITING:
            break
        await assert_one_chain(rt.store, run_id)
        if plan.update_at >= 0 and point >= plan.update_at and not plan.updated:
            try:
                await rt.update_state(wf, run_id, {"log": ["upd"]})
                plan.updated = True
            except InvalidInputError:  # the default mode: finished siblings are at the head
                assert plan.data is None, "a branch-mode run waits with nothing unmerged"
        if point == plan.fork_at:
            head = (await rt.get_run(run_id)).head_checkpoint_id
            assert head is not None
            frec = Recorder(waiting=set(rec.waiting))
            fid = f"{run_id}-fork{point}"
            fr = await drive_fork(rt, make(frec), frec, run_id, head, fid)
            assert fr.status is RunStatus.COMPLETED, (fid, fr.error)
            forks.append(fid)
        open_ids = sorted(q.id for q in r.pending_requests)
        keys = {q.id: q.payload["key"] for q in r.pending_requests}
        events = sorted(k for k in rec.waiting - rec.met if not k.endswith(".ask")
                        and k not in keys.values() and "each" not in k)
        choices = [("answer", i) for i in open_ids] + [("event", k) for k in events]
        if not choices:  # only timers left: let the earliest pass
            await _timers(rt, run_id, rec)
            r = await rt.resume(wf, run_id)
            continue
        what, item = choices[plan.pick(len(choices), f"step {point}")]
        if what == "answer":
            rec.met.add(keys[item])
            r = await rt.resume(wf, run_id, responses={item: f"a:{keys[item]}"})
        else:
            await _met_event_or_timer(rt, run_id, rec, item)
            r = await rt.resume(wf, run_id)
    rec.check_runs_again_only_when_met()
    return r, forks


async def _timers(rt: Runtime, run_id: str, rec: Recorder) -> None:
    info = await rt.get_run(run_id)
    assert info.wake_at is not None, f"{run_id} waits on nothing: {info}"
    rec.met.update(k for k in rec.waiting if k not in rec.met)  # a timer of ~0 s is due
    await asyncio.sleep(0.01)


async def _met_event_or_timer(rt: Runtime, run_id: str, rec: Recorder, key: str) -> None:
    rec.met.add(key)
    await rt.send_event(run_id, f"ev:{key}", f"e:{key}")  # a sleep ignores it
    await asyncio.sleep(0.01)  # and a sleep's ~0 s have passed


async def drive_fork(rt: Runtime, wf: Workflow, rec: Recorder, source: str, head: str,
                     fid: str) -> RunResult:
    """Fork ``source`` at ``head`` and drive the fork to completion in a fixed order."""
    r = await rt.fork(wf, source, head, new_run_id=fid)
    for _ in range(60):
        if r.status is not RunStatus.WAITING:
            break
        if r.pending_requests:
            q = r.pending_requests[0]
            r = await rt.resume(wf, fid, responses={q.id: f"a:{q.payload['key']}"})
            continue
        for k in sorted(rec.waiting):
            await rt.send_event(fid, f"ev:{k}", f"e:{k}")
        await asyncio.sleep(0.01)
        r = await rt.resume(wf, fid)
    await assert_one_chain(rt.store, fid)
    return r


async def scenario(spec: Spec, plan: Plan) -> None:
    store = MemoryStore()
    async with Runtime(store) as rt:
        rec = Recorder()
        forked: list[Recorder] = []

        def make(frec: Recorder) -> Workflow:
            forked.append(frec)
            return build(spec, frec, "branch")

        r, forks = await drive(rt, build(spec, rec, "branch"), rec, "branch", plan, make)
        assert r.status is RunStatus.COMPLETED, (spec, r.status, r.error)
        await assert_one_chain(store, "branch")
        assert (await rt.get_state("branch")).parked == ()
        assert len(forks) == len(forked) <= 1
        for frec in forked:  # a fork runs what was left at its checkpoint, each task once more
            over = {k: n for k, n in frec.calls.items()
                    if n > spec.expected_calls(frec.through)[k]}
            assert spec.exit or not over, (spec, over)
        if spec.exit:
            assert rec.calls["fin"] == 1 and rec.calls["join"] <= 1
            return
        assert rec.calls == spec.expected_calls(rec.through), (spec, dict(rec.calls))
        # the default mode, answered in a fixed order, with the same update
        drec = Recorder()
        fixed = Plan(None, update_at=0 if plan.updated else -1)
        d, _ = await drive(rt, build(spec, drec, "superstep"), drec, "default", fixed,
                           lambda frec: build(spec, frec, "superstep"))
        assert d.status is RunStatus.COMPLETED, (spec, d.error)
        await assert_one_chain(store, "default")
        # the default mode refuses an update while finished siblings wait at its head
        assert r.state.log.count("upd") == plan.updated
        assert d.state.log.count("upd") == fixed.updated
        logs = [[x for x in run.state.log if x != "upd"] for run in (r, d)]
        assert collections.Counter(logs[0]) == collections.Counter(logs[1]), spec
        assert drec.calls == spec.expected_calls(drec.through), (spec, dict(drec.calls))


@settings(settings.get_profile(PROFILE))
@given(spec=specs(), data=st.data())
def test_branch_waits_complete_like_the_default_mode(spec: Spec, data: st.DataObject) -> None:
    update_at = data.draw(st.integers(-1, 3), label="update_state at")
    fork_at = data.draw(st.integers(-1, 3), label="fork at")
    asyncio.run(scenario(spec, Plan(data, update_at=update_at, fork_at=fork_at)))
