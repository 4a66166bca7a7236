"""Per-key run concurrency through the runtime: submit, a worker, RunInfo, export and import."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from durable_flow import (
    END,
    Blackboard,
    InvalidInputError,
    MemoryStore,
    RunStatus,
    Runtime,
    Worker,
    WorkflowBuilder,
    WorkflowValidationError,
)


class Job(Blackboard):
    n: int = 0


def keyed(gate: asyncio.Event, started: list[str], per_key: int | None = 1) -> Any:
    b = WorkflowBuilder("keyed", state=Job, max_runs_per_key=per_key)

    @b.node()
    async def work(state: Job, ctx: Any) -> dict[str, Any]:
        started.append(ctx.run_id)
        await gate.wait()
        return {"n": state.n + 1}

    b.set_entry("work").add_edge("work", END)
    return b.build()


@asynccontextmanager
async def serving(make_store: Callable[[], Any], wf: Any) -> AsyncIterator[Worker]:
    async with Worker(make_store(), [wf], concurrency=4, poll_interval=0.05) as worker:
        task = asyncio.create_task(worker.serve())
        try:
            yield worker
        finally:
            await worker.stop()
            await asyncio.wait_for(task, 5)


async def settle(rt: Runtime, want: int) -> list[str]:
    """Wait until ``want`` runs are running; their ids, in order of creation."""
    for _ in range(200):
        running = await rt.list_runs(status=RunStatus.RUNNING)
        if len(running) >= want:
            return sorted(r.run_id for r in running)
        await asyncio.sleep(0.02)
    raise AssertionError(f"{want} runs never ran")


async def test_a_worker_runs_one_run_of_a_key_at_a_time_and_the_rest_in_order(
        store_factory: Callable[[], Any]) -> None:
    gate, started = asyncio.Event(), []
    wf = keyed(gate, started)
    async with Runtime(store_factory()) as rt:
        for run_id, key in (("a1", "acme"), ("a2", "acme"), ("b1", "bolt"), ("n1", None)):
            info = await rt.submit(wf, {}, run_id=run_id, concurrency_key=key)
            assert info.concurrency_key == key and info.status is RunStatus.QUEUED
        async with serving(store_factory, wf):
            assert await settle(rt, 3) == ["a1", "b1", "n1"]
            await asyncio.sleep(0.2)  # a free slot, and a2 still waits for acme
            assert (await rt.get_run("a2")).status is RunStatus.QUEUED
            gate.set()
            for _ in range(200):
                if all(r.status is RunStatus.COMPLETED for r in await rt.list_runs()):
                    break
                await asyncio.sleep(0.02)
        assert [r for r in started if r.startswith("a")] == ["a1", "a2"]
        assert all(r.status is RunStatus.COMPLETED for r in await rt.list_runs())


async def test_a_key_without_a_limit_on_its_workflow_limits_nothing(
        store_factory: Callable[[], Any]) -> None:
    gate, started = asyncio.Event(), []
    wf = keyed(gate, started, per_key=None)
    async with Runtime(store_factory()) as rt:
        for run_id in ("a1", "a2"):
            await rt.submit(wf, {}, run_id=run_id, concurrency_key="acme")
        async with serving(store_factory, wf):
            try:
                assert await settle(rt, 2) == ["a1", "a2"]
            finally:
                gate.set()


@pytest.mark.parametrize("key", ["", 3, b"acme"])
async def test_concurrency_key_must_be_a_non_empty_string(rt: Runtime, key: Any) -> None:
    wf = keyed(asyncio.Event(), [])
    with pytest.raises(InvalidInputError, match="concurrency_key"):
        await rt.submit(wf, {}, concurrency_key=key)
    assert await rt.list_runs() == []


@pytest.mark.parametrize("n", [0, -1, 1.5, True])
def test_max_runs_per_key_must_be_a_positive_int(n: Any) -> None:
    with pytest.raises(WorkflowValidationError, match="max_runs_per_key"):
        keyed(asyncio.Event(), [], per_key=n)


async def test_an_exported_run_keeps_its_key_when_imported(store_factory: Any) -> None:
    from durable_flow.runtime._transfer import export_run, import_run

    wf = keyed(asyncio.Event(), [])
    async with Runtime(store_factory()) as rt:
        queued = await rt.submit(wf, {}, concurrency_key="acme")
        document = await export_run(rt.store, queued.run_id)
    async with Runtime(MemoryStore()) as other:
        await import_run(other.store, document)
        assert (await other.get_run(queued.run_id)).concurrency_key == "acme"
        record = await other.store.get_run(queued.run_id)
        assert record is not None and record.max_per_key == 1


@pytest.mark.parametrize(("column", "value"), [
    ("max_per_key", 0), ("max_per_key", "one"), ("concurrency_key", ""),
    ("concurrency_key", 7)])
async def test_an_import_refuses_a_run_row_with_a_bad_key(column: str, value: Any) -> None:
    from durable_flow.runtime._transfer import export_run, import_run

    wf = keyed(asyncio.Event(), [])
    async with Runtime(MemoryStore()) as rt:
        queued = await rt.submit(wf, {}, concurrency_key="acme")
        document = await export_run(rt.store, queued.run_id, secret="")
    document["tables"]["runs"][0][column] = value
    async with Runtime(MemoryStore()) as other:
        with pytest.raises(InvalidInputError, match=column):
            await import_run(other.store, document, unsigned=True)
        assert await other.list_runs() == []


async def test_an_export_from_before_keys_imports_without_one() -> None:
    from durable_flow.runtime._transfer import export_run, import_run

    wf = keyed(asyncio.Event(), [])
    async with Runtime(MemoryStore()) as rt:
        queued = await rt.submit(wf, {})
        document = await export_run(rt.store, queued.run_id, secret="")
    for column in ("concurrency_key", "max_per_key"):
        del document["tables"]["runs"][0][column]
    async with Runtime(MemoryStore()) as other:
        await import_run(other.store, document, unsigned=True)
        assert (await other.get_run(queued.run_id)).concurrency_key is None
