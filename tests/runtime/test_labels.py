"""Run labels: given to run/submit, in RunInfo, and found by list_runs/select_runs filters."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from durable_flow import (
    END,
    Blackboard,
    InvalidInputError,
    MemoryStore,
    RunStatus,
    Runtime,
    WorkflowBuilder,
)
from durable_flow.model._clock import utcnow


class Doc(Blackboard):
    text: str = ""


def echo(name: str = "echo") -> Any:
    b = WorkflowBuilder(name, state=Doc)

    @b.node()
    async def say(state: Doc) -> dict[str, Any]:
        return {"text": state.text.upper()}

    b.set_entry("say").add_edge("say", END)
    return b.build()


async def test_labels_are_kept_with_the_run_and_filter_the_run_list(rt: Runtime) -> None:
    wf, other = echo(), echo("other")
    acme = await rt.submit(wf, {"text": "a"}, labels={"customer": "acme", "tier": "gold"})
    await asyncio.sleep(0.002)
    ran = await rt.run(wf, {"text": "b"}, labels={"customer": "acme"})
    await asyncio.sleep(0.002)
    await rt.submit(wf, {"text": "c"}, labels={"customer": "globex"})
    await rt.submit(other, {"text": "d"}, labels={"customer": "acme"})
    await rt.submit(wf, {"text": "e"})
    assert (await rt.get_run(acme.run_id)).labels == {"customer": "acme", "tier": "gold"}
    assert acme.labels == {"customer": "acme", "tier": "gold"}
    mine = await rt.list_runs(workflow_name="echo", labels={"customer": "acme"})
    assert [r.run_id for r in mine] == [ran.run_id, acme.run_id]  # newest first
    gold = await rt.list_runs(labels={"customer": "acme", "tier": "gold"})
    assert [r.run_id for r in gold] == [acme.run_id]
    assert await rt.select_runs(labels={"customer": "acme"}, status="completed") == [ran.run_id]
    assert await rt.list_runs(labels={"customer": "nobody"}) == []
    assert len(await rt.list_runs(limit=2)) == 2
    assert len(await rt.list_runs()) == 5


async def test_since_and_until_filter_on_creation_time(rt: Runtime) -> None:
    wf = echo()
    old = await rt.submit(wf, {"text": "old"})
    await asyncio.sleep(0.02)
    cut = utcnow()
    await asyncio.sleep(0.02)
    new = await rt.submit(wf, {"text": "new"})
    assert await rt.select_runs(since=cut) == [new.run_id]
    assert await rt.select_runs(until=cut) == [old.run_id]
    assert await rt.select_runs(since=cut - timedelta(days=1), status=RunStatus.QUEUED) == [
        new.run_id, old.run_id]


@pytest.mark.parametrize("labels", [{"k": 1}, {"": "v"}, ["k"], {1: "v"}])
async def test_labels_must_be_strings(rt: Runtime, labels: Any) -> None:
    with pytest.raises(InvalidInputError, match="labels"):
        await rt.submit(echo(), {"text": "a"}, labels=labels)
    assert await rt.list_runs() == []


async def test_an_exported_run_keeps_its_labels_when_imported(
        store_factory: Any) -> None:
    from durable_flow.runtime._transfer import export_run, import_run

    async with Runtime(store_factory()) as rt:
        done = await rt.run(echo(), {"text": "a"}, labels={"customer": "acme"})
        document = await export_run(rt.store, done.run_id)

    async with Runtime(MemoryStore()) as other:
        await import_run(other.store, document)
        assert (await other.get_run(done.run_id)).labels == {"customer": "acme"}
        assert await other.select_runs(labels={"customer": "acme"}) == [done.run_id]


async def test_a_fork_keeps_the_source_runs_labels_and_concurrency_key(rt: Runtime) -> None:
    wf = echo()
    source = await rt.submit(wf, {"text": "a"}, labels={"customer": "acme", "ticket": "T-9"},
                             concurrency_key="acme")
    [first] = await rt.history(source.run_id)
    forked = await rt.fork(wf, source.run_id, first.id, update={"text": "b"})
    info = await rt.get_run(forked.run_id)
    assert info.labels == {"customer": "acme", "ticket": "T-9"}
    assert info.concurrency_key == "acme"
    assert info.forked_from is not None and info.forked_from.run_id == source.run_id
    assert sorted(await rt.select_runs(labels={"ticket": "T-9"})) == sorted(
        [source.run_id, forked.run_id])
