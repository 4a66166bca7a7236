"""One execution per run: races between runtimes and within one never run a node twice.

Every execution claims its run in one store transaction (status, answers,
lease), so whatever two callers do at the same moment, exactly one executes,
the chain of checkpoints never forks, and a finished run never runs again.
"""

from __future__ import annotations

import asyncio
import collections
import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from durable_flow import (
    END,
    Blackboard,
    InvalidInputError,
    MemoryStore,
    RunLockedError,
    RunNotResumableError,
    RunStatus,
    Runtime,
    StateUpdateError,
    WorkflowBuilder,
)
from durable_flow.store._protocols import CheckpointStore, Claim, Lease


class Doc(Blackboard):
    approved: bool = False
    notes: list[str] = []


def approval(calls: collections.Counter[str], *, work: float = 0.0) -> Any:
    """ask (a person) -> publish; ``calls`` counts node bodies that ran past the request."""
    b = WorkflowBuilder("approval", state=Doc)

    @b.node()
    async def ask(state: Doc, ctx: Any) -> dict[str, Any]:
        calls["ask:asked"] += 1
        ok = await ctx.request({"q": "publish?"}, response_type=bool)
        calls["ask:answered"] += 1
        await asyncio.sleep(work)
        return {"approved": ok}

    @b.node()
    async def publish(state: Doc) -> dict[str, Any]:
        calls["publish"] += 1
        await asyncio.sleep(work)
        return {"notes": [*state.notes, "published"]}

    b.set_entry("ask")
    b.add_edge("ask", "publish")
    b.add_edge("publish", END)
    return b.build()


class SlowClaims:
    """A store whose claims wait for ``gate``: the caller read the run long before it claims."""

    def __init__(self, store: CheckpointStore, gate: asyncio.Event) -> None:
        self._store = store
        self._gate = gate

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def claim(self, claim: Claim) -> Lease:
        await self._gate.wait()
        return await self._store.claim(claim)

    async def setup(self) -> None:
        await self._store.setup()

    async def close(self) -> None:
        await self._store.close()


async def assert_linear(store: CheckpointStore, run_id: str) -> None:
    """Every thread of the run is one chain: seq 0..n-1, each the parent of the next."""
    threads: dict[str, list[Any]] = collections.defaultdict(list)
    for meta in await store.list_checkpoints(run_id):
        threads[meta.thread].append(meta)
    for chain in threads.values():
        chain.sort(key=lambda m: m.seq)
        assert [m.seq for m in chain] == list(range(len(chain)))
        assert [m.parent_id for m in chain[1:]] == [m.id for m in chain[:-1]]


async def answer(rt: Runtime, wf: Any, run_id: str, rid: str) -> Any:
    """Answer ``rid`` after a random short delay; a locked run is an outcome, not a failure."""
    await asyncio.sleep(random.uniform(0, 0.004))
    try:
        return await rt.resume(wf, run_id, responses={rid: True})
    except RunLockedError as exc:
        return exc


async def test_two_runtimes_sending_one_answer_execute_it_once(
    store_factory: Callable[[], Any],
) -> None:
    for trial in range(12):
        calls: collections.Counter[str] = collections.Counter()
        wf = approval(calls, work=0.002)
        async with Runtime(store_factory()) as rt1, Runtime(store_factory()) as rt2:
            waiting = await rt1.run(wf, {})
            rid = waiting.pending_requests[0].id

            outcomes = await asyncio.gather(*(answer(rt, wf, waiting.run_id, rid)
                                              for rt in (rt1, rt2)))
            assert calls["ask:answered"] == 1 and calls["publish"] == 1, (trial, outcomes)
            done = [o for o in outcomes if not isinstance(o, RunLockedError)]
            assert done and all(o.status is RunStatus.COMPLETED for o in done)
            final = await rt1.get_run(waiting.run_id)
            assert final.status is RunStatus.COMPLETED and final.error is None
            await assert_linear(rt1.store, waiting.run_id)


@asynccontextmanager
async def late_claim(store_factory: Callable[[], Any], wf: Any,
                     responses: bool = True
                     ) -> AsyncIterator[tuple[Runtime, Any, Callable[[], Any]]]:
    """rt1 and a waiting run; a resume by rt2 that has read the run but claims only later.

    Yields ``(rt1, waiting, finish)``: awaiting ``finish()`` lets rt2 claim and
    returns what its resume returned (or raises what it raised).
    """
    gate = asyncio.Event()
    async with Runtime(store_factory()) as rt1, \
            Runtime(SlowClaims(store_factory(), gate)) as rt2:  # type: ignore[arg-type]
        waiting = await rt1.run(wf, {})
        answers = {waiting.pending_requests[0].id: True} if responses else None
        late = asyncio.create_task(rt2.resume(wf, waiting.run_id, responses=answers))
        await asyncio.sleep(0.05)  # rt2 has read the run and checked the answer

        async def finish() -> Any:
            gate.set()
            return await late

        try:
            yield rt1, waiting, finish
        finally:
            gate.set()
            await asyncio.gather(late, return_exceptions=True)


async def test_an_answer_read_before_another_runtime_finished_is_a_no_op(
    store_factory: Callable[[], Any],
) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = approval(calls)
    async with late_claim(store_factory, wf) as (rt1, waiting, finish):
        rid = waiting.pending_requests[0].id
        done = await rt1.resume(wf, waiting.run_id, responses={rid: True})
        again = await finish()
    assert done.status is again.status is RunStatus.COMPLETED
    assert again.checkpoint_id == done.checkpoint_id
    assert calls["ask:answered"] == 1 and calls["publish"] == 1


async def test_a_run_cancelled_while_a_resume_was_on_its_way_stays_cancelled(
    store_factory: Callable[[], Any],
) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = approval(calls)
    async with late_claim(store_factory, wf) as (rt1, waiting, finish):
        await rt1.cancel(waiting.run_id)
        with pytest.raises(RunNotResumableError):
            await finish()
        assert (await rt1.get_run(waiting.run_id)).status is RunStatus.CANCELLED
    assert calls["ask:answered"] == 0 and calls["publish"] == 0


async def test_a_resume_of_a_head_that_moved_meanwhile_is_locked_out(
    store_factory: Callable[[], Any],
) -> None:
    wf = approval(collections.Counter())
    async with late_claim(store_factory, wf, responses=False) as (rt1, waiting, finish):
        await rt1.update_state(wf, waiting.run_id, {"notes": ["edited"]})
        with pytest.raises(RunLockedError):
            await finish()
        await assert_linear(rt1.store, waiting.run_id)


async def test_two_resumes_in_one_runtime_execute_once(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = approval(calls, work=0.01)
    waiting = await rt.run(wf, {})
    rid = waiting.pending_requests[0].id
    outcomes = await asyncio.gather(
        *(rt.resume(wf, waiting.run_id, responses={rid: True}) for _ in range(3)),
        return_exceptions=True)
    assert calls["ask:answered"] == 1 and calls["publish"] == 1
    assert sum(isinstance(o, RunLockedError) for o in outcomes) >= 1
    assert not [o for o in outcomes if isinstance(o, BaseException)
                and not isinstance(o, RunLockedError)]
    await assert_linear(rt.store, waiting.run_id)


async def test_concurrent_update_states_write_one_head(rt: Runtime) -> None:
    wf = approval(collections.Counter())
    waiting = await rt.run(wf, {})
    outcomes = await asyncio.gather(
        *(rt.update_state(wf, waiting.run_id, {"notes": [f"n{i}"]}) for i in range(4)),
        return_exceptions=True)
    written = [o for o in outcomes if isinstance(o, str)]
    assert len(written) >= 1
    assert all(isinstance(o, RunLockedError) for o in outcomes if not isinstance(o, str))
    await assert_linear(rt.store, waiting.run_id)
    history = await rt.history(waiting.run_id)
    assert len([cp for cp in history if cp.source == "update"]) == len(written)


async def test_memory_store_chain_never_forks_under_racing_runtimes() -> None:
    store = MemoryStore()
    calls: collections.Counter[str] = collections.Counter()
    wf = approval(calls, work=0.001)
    async with Runtime(store) as rt1, Runtime(store) as rt2:
        for _ in range(10):
            waiting = await rt1.run(wf, {})
            rid = waiting.pending_requests[0].id
            await asyncio.gather(
                *(rt.resume(wf, waiting.run_id, responses={rid: True}) for rt in (rt1, rt2)),
                return_exceptions=True)
            await assert_linear(store, waiting.run_id)
    assert calls["publish"] == 10


async def test_starting_one_run_id_again_is_idempotent(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = approval(calls)
    first = await rt.run(wf, {"notes": ["a"]}, run_id="job-1")
    again = await rt.run(wf, {"notes": ["a"]}, run_id="job-1")
    assert again.run_id == "job-1" and again.status is RunStatus.WAITING
    assert again.checkpoint_id == first.checkpoint_id and calls["ask:asked"] == 1
    with pytest.raises(InvalidInputError, match="another input"):
        await rt.run(wf, {"notes": ["b"]}, run_id="job-1")
    rid = first.pending_requests[0].id
    done = await rt.resume(wf, "job-1", responses={rid: True})
    after = await rt.run(wf, {"notes": ["a"]}, run_id="job-1")
    assert after.status is RunStatus.COMPLETED and after.state == done.state
    assert calls["publish"] == 1


async def test_two_runtimes_starting_one_run_id_run_it_once(
    store_factory: Callable[[], Any],
) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = approval(calls, work=0.01)
    async with Runtime(store_factory()) as rt1, Runtime(store_factory()) as rt2:
        outcomes = await asyncio.gather(
            rt1.run(wf, {}, run_id="same"), rt2.run(wf, {}, run_id="same"),
            return_exceptions=True)
        assert calls["ask:asked"] == 1
        assert all(isinstance(o, RunLockedError) or o.status is RunStatus.WAITING
                   for o in outcomes), outcomes
        await assert_linear(rt1.store, "same")


class CrashOnCommit:
    """A store whose commits fail, as if the process died right before each one."""

    def __init__(self, store: CheckpointStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def commit(self, commit: Any) -> None:
        raise ConnectionError("the process died here")

    async def setup(self) -> None:
        await self._store.setup()

    async def close(self) -> None:
        await self._store.close()


async def test_a_run_with_nothing_to_do_is_created_completed_in_one_write(
    store: Any,
) -> None:
    b = WorkflowBuilder("nothing", state=Doc)
    b.add_node("only", lambda s: {"approved": True}, skip_if=lambda s: True)
    b.set_entry("only")
    b.add_edge("only", END)
    wf = b.build()
    async with Runtime(CrashOnCommit(store)) as rt:  # type: ignore[arg-type]
        result = await rt.run(wf, {})
        info = await rt.get_run(result.run_id)
    assert result.status is info.status is RunStatus.COMPLETED


async def test_update_state_with_a_bad_value_changes_nothing(rt: Runtime) -> None:
    wf = approval(collections.Counter())
    waiting = await rt.run(wf, {})
    before = await rt.store.get_run(waiting.run_id)
    with pytest.raises(StateUpdateError):
        await rt.update_state(wf, waiting.run_id, {"approved": "not a bool at all"})
    with pytest.raises(StateUpdateError):
        await rt.update_state(wf, waiting.run_id, {"nope": 1})
    assert await rt.store.get_run(waiting.run_id) == before


@pytest.mark.parametrize("ttl", [float("nan"), float("inf"), -1.0, 0])
def test_lease_ttl_must_be_a_positive_finite_number(ttl: float) -> None:
    with pytest.raises(InvalidInputError, match="lease_ttl"):
        Runtime(MemoryStore(), lease_ttl=ttl)


async def test_prune_refuses_a_negative_age(rt: Runtime) -> None:
    with pytest.raises(InvalidInputError, match="older_than"):
        await rt.prune(older_than=timedelta(days=-1))


async def test_history_pages_and_checks_its_arguments(rt: Runtime) -> None:
    wf = approval(collections.Counter())
    waiting = await rt.run(wf, {})
    rid = waiting.pending_requests[0].id
    await rt.resume(wf, waiting.run_id, responses={rid: True})
    everything = await rt.history(waiting.run_id)
    assert len(everything) == 3
    first = await rt.history(waiting.run_id, limit=2)
    rest = await rt.history(waiting.run_id, limit=2, before=first[-1].id)
    assert [c.id for c in first + rest] == [c.id for c in everything]
    for bad in ({"limit": 0}, {"limit": True}, {"before": 3}, {"namespace": None}):
        with pytest.raises(InvalidInputError):
            await rt.history(waiting.run_id, **bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        await rt.list_runs(status="nope")
    with pytest.raises(InvalidInputError):
        await rt.list_runs(workflow_name=3)  # type: ignore[arg-type]


async def test_a_run_left_running_with_nothing_to_do_is_completed_by_resume_and_recover(
    store: Any,
) -> None:
    """A run whose status never reached the store (a crash) is repaired, not stranded."""
    from durable_flow.engine._loop import RunContext, ThreadRunner
    from durable_flow.model._routing import Routed
    from durable_flow.store._protocols import RunRecord

    wf = approval(collections.Counter())
    async with Runtime(store, lease_ttl=5) as rt:
        for run_id in ("via-resume", "via-recover"):
            lease = Lease(run_id, "dead", 1, datetime.now(UTC) - timedelta(seconds=1))
            runner = ThreadRunner(RunContext(rt.store, lease, wf.name, None), wf)
            write, _ = runner.first_checkpoint({"approved": True, "notes": []},
                                               Routed((), {}, None))
            now = datetime.now(UTC)
            await rt.store.create_run(RunRecord(
                run_id, wf.name, RunStatus.RUNNING, now, now, write.meta.id, wf.signature),
                [write], lease)
        resumed = await rt.resume(wf, "via-resume")
        recovered = await rt.recover(wf)
        assert resumed.status is RunStatus.COMPLETED
        assert [r.run_id for r in recovered] == ["via-recover"]
        assert recovered[0].status is RunStatus.COMPLETED
        for run_id in ("via-resume", "via-recover"):
            info = await rt.get_run(run_id)
            assert info.status is RunStatus.COMPLETED


class _StaleListing:
    """A store whose run listing is out of date by the time the caller acts on it."""

    def __init__(self, store: CheckpointStore, meanwhile: Callable[[], Any]) -> None:
        self._store = store
        self._meanwhile = meanwhile

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def list_runs(self, **filters: Any) -> Any:
        listed = await self._store.list_runs(**filters)
        await self._meanwhile()
        return listed


async def test_recover_skips_runs_another_process_moved_on_since_its_listing(store: Any) -> None:
    """A stale recovery attempt executes only what it claims, and fails on nothing it skips."""
    ran: collections.Counter[str] = collections.Counter()
    b = WorkflowBuilder("slow", state=Doc)

    @b.node()
    async def work(state: Doc, ctx: Any) -> dict[str, Any]:
        ran[ctx.run_id] += 1
        await asyncio.sleep(30 if ran[ctx.run_id] == 1 else 0)
        return {"approved": True}

    b.set_entry("work").add_edge("work", END)
    wf = b.build()
    names = ("cancelled-meanwhile", "claimed-meanwhile", "still-abandoned")
    async with Runtime(store, lease_ttl=5) as rt:
        for run_id in names:
            task = asyncio.create_task(rt.run(wf, run_id=run_id))
            while not ran[run_id]:
                await asyncio.sleep(0.01)
            task.cancel()  # the caller went away: the run stays running, its lease released
            with pytest.raises(asyncio.CancelledError):
                await task
        taken: list[Lease] = []

        async def meanwhile() -> None:
            await rt.store.cancel_run("cancelled-meanwhile")
            taken.append(await rt.store.claim(Claim("claimed-meanwhile", "elsewhere", 60)))

        stale = Runtime(_StaleListing(store, meanwhile))  # type: ignore[arg-type]
        recovered = await stale.recover(wf)
        assert [r.run_id for r in recovered] == ["still-abandoned"]
        assert recovered[0].status is RunStatus.COMPLETED
        assert [(await rt.get_run(r)).status for r in names] == [
            RunStatus.CANCELLED, RunStatus.RUNNING, RunStatus.COMPLETED]
        assert ran == {name: 1 for name in names[:2]} | {"still-abandoned": 2}
