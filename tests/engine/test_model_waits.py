"""A model-based test of ``waits="branch"``: generated graphs, answer orders, updates, forks.

Hypothesis draws small graphs: ``start`` fans out to one to three branches of
one or two nodes each (a plain node, a request, a ~0 s sleep, an event wait,
a sub-workflow with a fan-out and a request inside (its own waits either
mode), a ``Send`` to two
instances of which one asks), a fan-in ``join``, and sometimes an exit
beside them. A driver answers (through ``resume``, or through ``respond``,
which leaves the run queued, and then resumes it as a worker would), sends
events and lets timers pass in a drawn order, calls ``update_state`` and
forks the run at drawn points. Every run
in ``waits="branch"`` must complete; a task runs again only once its answer,
event or timer came; the final log (an ``append`` field: compared as a
multiset) and the number of times each task ran equal the default mode's for
the same answers; every namespace's history is one chain (``chainkit``).

Every example runs on memory, SQLite and PostgreSQL (``example_stores``: a
fresh database per example). The driver also kills the process running the
run at drawn durable points (:class:`Mortal`: right after the k-th write
that made progress durable returned, the runtime dies like a killed
process, its lease held, and every later call of it fails); a new runtime
on the same database resumes once the dead lease passed (a lease that ran
out under load stops the run the same way). A task then runs again only if
its answer, event or timer came, or a kill came while its superstep was not
yet committed and its finished write not yet saved. A task body that would
begin in a process already dead (a sibling scheduled, or a plain function
handed to a worker thread, just before the kill) raises ``Dead`` and is not
counted: after a real kill it never runs.

In the suite a few derandomized examples run per store (profile
``waits-suite``); ``make test-model`` runs many more
(``HYPOTHESIS_PROFILE=waits-model``).
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from chainkit import assert_one_chain
from conftest import ExampleStores
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from durable_flow import (
    END,
    Blackboard,
    Command,
    InvalidInputError,
    LeaseLostError,
    NodeContext,
    RunLockedError,
    RunNotResumableError,
    RunResult,
    RunStatus,
    Runtime,
    Send,
    Workflow,
    WorkflowBuilder,
    append,
)
from durable_flow.store._protocols import CheckpointStore, Commit

settings.register_profile("waits-suite", max_examples=6, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("waits-model", max_examples=500, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "waits-suite")
if PROFILE not in ("waits-suite", "waits-model"):
    PROFILE = "waits-suite"

KINDS = ("plain", "ask", "sleep", "event", "sub", "send")
WAITS = {"ask", "sleep", "event"}  # a node of these kinds waits once, so runs twice
#: the lease of every process: a dead one's passes this soon after it died
TTL = 0.3
#: the writes after which a process may die: each made progress durable
DURABLE = frozenset({"create_run", "claim", "commit", "put_task_writes", "put_step",
                     "wait_event", "settle", "answer_by_policy"})


class Log(Blackboard):
    log: Annotated[list[str], append] = []


class Killed(BaseException):
    """The process dies here, like a SIGKILL: nothing may catch it."""


class Dead(Exception):
    """A call of a process that died: nothing it does reaches the database any more."""


@dataclass
class Execution:
    """One execution of a task body: whose recorder, which task, in which run and namespace."""

    rec: Recorder
    key: str
    run_id: str
    namespace: str
    task: str


@dataclass
class Journal:
    """The executions of one example not yet settled, the durable writes, the kills drawn.

    An execution is settled once its namespace (of its run) committed a
    checkpoint or a status mark after it began (its superstep's barrier),
    or its finished write was saved. A kill (or a lost lease) gives every
    execution not settled one more allowed run.
    """

    kills: frozenset[int] = frozenset()
    armed: bool = False
    points: list[str] = field(default_factory=list)
    open: list[Execution] = field(default_factory=list)
    namespaces: dict[str, str] = field(default_factory=dict)  # checkpoint id -> namespace

    def began(self, execution: Execution) -> None:
        self.open.append(execution)

    def settle(self, run_id: str, namespace: str, task: str | None = None) -> None:
        self.open = [e for e in self.open if (e.run_id, e.namespace) != (run_id, namespace)
                     or (task is not None and e.task != task)]

    def die(self) -> None:
        for e in self.open:
            e.rec.killed[e.key] += 1
        self.open.clear()


#: the process a task body runs in (asyncio tasks inherit it from the call that made them)
PROCESS: contextvars.ContextVar[Mortal | None] = contextvars.ContextVar("PROCESS", default=None)


class Mortal:
    """The store of one process: it dies right after the drawn durable writes returned.

    Every write in ``DURABLE`` made while the journal is armed is a point;
    at a drawn one the process dies (``Killed``), its lease held; from then
    on its calls raise ``Dead`` (a renewal hangs), so nothing it does lands.
    """

    def __init__(self, inner: CheckpointStore, journal: Journal) -> None:
        self.inner = inner
        self.journal = journal
        self.dead = False

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not asyncio.iscoroutinefunction(attr) or name == "close":
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            if self.dead:
                if name == "renew_lease":
                    await asyncio.Event().wait()  # cancelled with the dead execution
                raise Dead(name)
            out = await attr(*args, **kwargs)
            if name in DURABLE:
                await self._durable(name, args)
            return out
        return call

    async def _namespace(self, run_id: str, checkpoint_id: str) -> str:
        ns = self.journal.namespaces.get(checkpoint_id)
        if ns is None:
            meta = await self.inner.get_checkpoint(run_id, checkpoint_id)
            ns = self.journal.namespaces[checkpoint_id] = "?" if meta is None else meta.namespace
        return ns

    async def _durable(self, name: str, args: Sequence[Any]) -> None:
        journal = self.journal
        what = name
        if name == "create_run":
            for w in args[1]:
                journal.namespaces[w.meta.id] = w.meta.namespace
        elif name == "commit":
            c: Commit = args[0]
            run_id = c.lease.run_id
            for w in [*([c.checkpoint] if c.checkpoint else []), *(w for w, _ in c.nested)]:
                journal.namespaces[w.meta.id] = w.meta.namespace
                journal.settle(run_id, w.meta.namespace)
                what += f" {w.meta.namespace or 'top'}@{w.meta.superstep} {w.meta.status.value}"
            for tw in c.task_writes:
                journal.settle(run_id, await self._namespace(run_id, tw.checkpoint_id), tw.node)
            if c.mark is not None:
                journal.settle(run_id, await self._namespace(run_id, c.mark.checkpoint_id))
                what += f" mark {c.mark.status.value}"
            if c.requests:
                what += f" asks {sorted(r.id for r in c.requests)}"
        elif name == "put_task_writes":
            for tw in args[1]:
                ns = await self._namespace(tw.run_id, tw.checkpoint_id)
                journal.settle(tw.run_id, ns, tw.node)
                what += f" {ns}.{tw.node}"
        if not journal.armed:
            return
        journal.points.append(what)
        if len(journal.points) - 1 in journal.kills:
            self.dead = True
            journal.die()
            raise Killed(what)


class World:
    """The processes that run one example's runs on one database, one after another."""

    def __init__(self, make: Callable[[], CheckpointStore], journal: Journal) -> None:
        self.make = make
        self.journal = journal
        self.deaths = 0

    async def __aenter__(self) -> World:
        await self._start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.rt.__aexit__(None, None, None)

    async def _start(self) -> None:
        self.store = Mortal(self.make(), self.journal)
        self.rt = Runtime(self.store, lease_ttl=TTL)  # type: ignore[arg-type]
        await self.rt.__aenter__()

    async def go(self, wf: Workflow, run_id: str, op: Callable[[Runtime], Awaitable[RunResult]],
                 *, kills: bool = True) -> RunResult:
        """``op`` on this process; should it die, a new process resumes the run once it may."""
        self.journal.armed = kills
        try:
            while True:
                token = PROCESS.set(self.store)
                try:
                    return await op(self.rt)
                except BaseException as exc:
                    if not (self.store.dead or isinstance(exc, LeaseLostError)):
                        raise
                    if not self.store.dead:  # the lease ran out under load: stopped like a kill
                        self.journal.die()
                finally:
                    PROCESS.reset(token)
                self.deaths += 1
                await self.rt.__aexit__(None, None, None)
                await self._start()
                op = lambda rt: resume_when_free(rt, wf, run_id)  # noqa: E731
        finally:
            self.journal.armed = False


async def resume_when_free(rt: Runtime, wf: Workflow, run_id: str) -> RunResult:
    """Resume, waiting out a dead process' lease; a run that ended before it died: its result."""
    deadline = time.monotonic() + 20 * TTL + 10
    while True:
        try:
            return await rt.resume(wf, run_id)
        except RunNotResumableError:  # it completed, and then its process died
            return await rt.run(wf, {}, run_id=run_id)  # the same input: its result
        except RunLockedError:
            event("waited out a dead process' lease")
            assert time.monotonic() < deadline, "the dead process' lease never passed"
            await asyncio.sleep(TTL / 10)


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
    """What one run's tasks did: calls by task, waits begun, waits met, runs a kill allowed."""

    journal: Journal = field(default_factory=Journal)
    calls: collections.Counter[str] = field(default_factory=collections.Counter)
    waiting: set[str] = field(default_factory=set)  # keys whose event/timer wait began
    met: set[str] = field(default_factory=set)  # keys whose answer, event or timer came
    due: dict[str, float] = field(default_factory=dict)  # a sleep's wake time (monotonic)
    through: set[str] = field(default_factory=set)  # sleeps already over when first checked
    #: runs again allowed by kills: one per kill that came before the run was settled
    killed: collections.Counter[str] = field(default_factory=collections.Counter)

    def begin(self, key: str, ctx: NodeContext) -> None:
        """A task body starts: count it (a body of a dead process never gets this far)."""
        process = PROCESS.get()
        if process is not None and process.dead:
            raise Dead(key)
        self.calls[key] += 1
        namespace, _, task = ctx.node.rpartition(".")
        self.journal.began(Execution(self, key, ctx.run_id, namespace, task))

    def check_runs_again_only_when_met(self) -> None:
        now = time.monotonic()
        for key, n in self.calls.items():
            if key in self.waiting or n > 1:
                came = key in self.met or self.due.get(key, now + 1) <= now
                limit = (2 if came else 1) + self.killed[key]
                assert n <= limit, (f"{key} ran {n} times, its wait met: {key in self.met}, "
                                    f"kills before it was settled: {self.killed[key]}")

    def check_calls(self, expected: collections.Counter[str]) -> None:
        """Each task ran as often as expected, or more by the runs kills allowed."""
        over = {k: (n, expected[k], self.killed[k]) for k, n in self.calls.items()
                if not expected[k] <= n <= expected[k] + self.killed[k]}
        short = {k: n for k, n in expected.items() if self.calls[k] < n}
        assert not over and not short, (over, short)


def _note(rec: Recorder, key: str) -> Any:
    def note(s: Log, ctx: NodeContext) -> dict[str, Any]:
        rec.begin(key, ctx)
        return {"log": [key]}
    return note


def _waiter(rec: Recorder, key: str, kind: str) -> Any:
    async def wait(s: Log, ctx: NodeContext) -> dict[str, Any]:
        rec.begin(key, ctx)
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
    def fan(s: Log, ctx: NodeContext) -> Command:
        rec.begin(key, ctx)
        return Command(update={"log": [key]}, goto=[Send(f"{key}_each", 0),
                                                    Send(f"{key}_each", 1)])
    return fan


def _each(rec: Recorder, key: str) -> Any:
    async def one(s: Log, ctx: NodeContext) -> dict[str, Any]:
        name = f"{key}.each[{ctx.arg}]"
        rec.begin(name, ctx)
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

    def pick(self, n: int, label: str) -> tuple[int, bool]:
        """Which of ``n`` choices, and whether an answer goes through ``respond``."""
        if self.data is None:
            return 0, False
        # the same draws whatever ``n`` and the choice: how many waits are open may depend
        # on timing (a ~0 s timer due at a barrier), and hypothesis replays a case draw by draw
        index = self.data.draw(st.integers(0, 63), label=label) % n
        return index, self.data.draw(st.booleans(), label=f"{label}: through respond")


async def drive(world: World, wf: Workflow, rec: Recorder, run_id: str, plan: Plan,
                make: Any, *, kills: bool = True) -> tuple[RunResult, list[str]]:
    """Run to completion: answer, send events and let timers pass one at a time.

    With ``kills``, the process running the run dies at the drawn durable
    points and another takes over. Returns the result and the ids of the
    forks it made (each driven too).
    """
    r = await world.go(wf, run_id, lambda rt: rt.run(wf, {}, run_id=run_id), kills=kills)
    forks: list[str] = []
    for point in range(60):
        rec.check_runs_again_only_when_met()
        if r.status is RunStatus.QUEUED:  # its waiting commit took a kept event: go on, as a worker
            event(f"{run_id}: queued")
            r = await world.go(wf, run_id, lambda rt: rt.resume(wf, run_id), kills=kills)
            continue
        if r.status is not RunStatus.WAITING:
            break
        await assert_one_chain(world.rt.store, run_id)
        if plan.update_at >= 0 and point >= plan.update_at and not plan.updated:
            try:
                await world.rt.update_state(wf, run_id, {"log": ["upd"]})
                plan.updated = True
            except InvalidInputError:  # the default mode: finished siblings are at the head
                assert plan.data is None, "a branch-mode run waits with nothing unmerged"
        if point == plan.fork_at:
            head = (await world.rt.get_run(run_id)).head_checkpoint_id
            assert head is not None
            frec = Recorder(rec.journal, waiting=set(rec.waiting))
            fid = f"{run_id}-fork{point}"
            fr = await drive_fork(world, make(frec), frec, run_id, head, fid)
            assert fr.status is RunStatus.COMPLETED, (fid, fr.error)
            forks.append(fid)
        open_ids = sorted(q.id for q in r.pending_requests)
        keys = {q.id: q.payload["key"] for q in r.pending_requests}
        events = sorted(k for k in rec.waiting - rec.met if not k.endswith(".ask")
                        and k not in keys.values() and "each" not in k)
        choices = [("answer", i) for i in open_ids] + [("event", k) for k in events]
        if not choices:  # only timers left: let the earliest pass
            await _timers(world.rt, run_id, rec)
            r = await world.go(wf, run_id, lambda rt: rt.resume(wf, run_id), kills=kills)
            continue
        index, through_respond = plan.pick(len(choices), f"step {point}")
        what, item = choices[index]
        if what == "answer":
            rec.met.add(keys[item])
            answer = {item: f"a:{keys[item]}"}
            if through_respond:  # answered from the inbox, then a worker goes on
                event("answered through respond")
                info = await world.rt.respond(run_id, answer)
                # its task waits on nothing more: the run is queued for a worker
                assert info.status is RunStatus.QUEUED, (item, info.status)
                r = await world.go(wf, run_id, lambda rt: rt.resume(wf, run_id), kills=kills)
                continue
            r = await world.go(wf, run_id, lambda rt, a=answer: rt.resume(wf, run_id, responses=a),
                               kills=kills)
        else:
            await _met_event_or_timer(world.rt, run_id, rec, item)
            r = await world.go(wf, run_id, lambda rt: rt.resume(wf, run_id), kills=kills)
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


async def drive_fork(world: World, wf: Workflow, rec: Recorder, source: str, head: str,
                     fid: str) -> RunResult:
    """Fork ``source`` at ``head`` and drive the fork to completion in a fixed order."""
    r = await world.go(wf, fid, lambda rt: rt.fork(wf, source, head, new_run_id=fid),
                       kills=False)
    for _ in range(60):
        if r.status is RunStatus.QUEUED:  # an event sent before its wait began was taken
            event("fork: queued")
            r = await world.go(wf, fid, lambda rt: rt.resume(wf, fid), kills=False)
            continue
        if r.status is not RunStatus.WAITING:
            break
        if r.pending_requests:
            q = r.pending_requests[0]
            answer = {q.id: f"a:{q.payload['key']}"}
            r = await world.go(wf, fid, lambda rt, a=answer: rt.resume(wf, fid, responses=a),
                               kills=False)
            continue
        for k in sorted(rec.waiting):
            await world.rt.send_event(fid, f"ev:{k}", f"e:{k}")
        await asyncio.sleep(0.01)
        r = await world.go(wf, fid, lambda rt: rt.resume(wf, fid), kills=False)
    await assert_one_chain(world.rt.store, fid)
    return r


async def scenario(stores: ExampleStores, spec: Spec, plan: Plan, kills: frozenset[int]) -> None:
    journal = Journal(kills)
    async with World(await stores.fresh(), journal) as world:
        try:
            await _scenario(world, spec, plan)
        finally:
            note(f"{stores.kind}: {world.deaths} deaths; durable points: {journal.points}")
        event(f"deaths: {world.deaths}")


async def _scenario(world: World, spec: Spec, plan: Plan) -> None:
    rec = Recorder(world.journal)
    forked: list[Recorder] = []

    def make(frec: Recorder) -> Workflow:
        forked.append(frec)
        return build(spec, frec, "branch")

    r, forks = await drive(world, build(spec, rec, "branch"), rec, "branch", plan, make)
    assert r.status is RunStatus.COMPLETED, (spec, r.status, r.error)
    await assert_one_chain(world.rt.store, "branch")
    assert (await world.rt.get_state("branch")).parked == ()
    assert len(forks) == len(forked) <= 1
    for frec in forked:  # a fork runs what was left at its checkpoint, each task once more
        over = {k: n for k, n in frec.calls.items()
                if n > spec.expected_calls(frec.through)[k] + frec.killed[k]}
        assert spec.exit or not over, (spec, over)
    if spec.exit:
        assert 1 <= rec.calls["fin"] <= 1 + rec.killed["fin"]
        assert rec.calls["join"] <= 1 + rec.killed["join"]
        return
    rec.check_calls(spec.expected_calls(rec.through))
    # the default mode, answered in a fixed order, with the same update (no kills)
    drec = Recorder(world.journal)
    fixed = Plan(None, update_at=0 if plan.updated else -1)
    d, _ = await drive(world, build(spec, drec, "superstep"), drec, "default", fixed,
                       lambda frec: build(spec, frec, "superstep"), kills=False)
    assert d.status is RunStatus.COMPLETED, (spec, d.error)
    await assert_one_chain(world.rt.store, "default")
    # the default mode refuses an update while finished siblings wait at its head
    assert r.state.log.count("upd") == plan.updated
    assert d.state.log.count("upd") == fixed.updated
    logs = [[x for x in run.state.log if x != "upd"] for run in (r, d)]
    assert collections.Counter(logs[0]) == collections.Counter(logs[1]), spec
    drec.check_calls(spec.expected_calls(drec.through))  # exact unless its lease ran out under load


@settings(settings.get_profile(PROFILE))
@given(spec=specs(), data=st.data())
def test_branch_waits_complete_like_the_default_mode(example_stores: ExampleStores, spec: Spec,
                                                     data: st.DataObject) -> None:
    update_at = data.draw(st.integers(-1, 3), label="update_state at")
    fork_at = data.draw(st.integers(-1, 3), label="fork at")
    kills = data.draw(st.frozensets(st.integers(0, 30), max_size=2), label="die after points")
    asyncio.run(scenario(example_stores, spec, Plan(data, update_at=update_at, fork_at=fork_at),
                         kills))
