"""Naming checkpoints on the command line, and counters that agree with each other."""

# ruff: noqa: F811  # the fixtures db and project are test_cli's, imported by name

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Annotated, Any

import pytest

from cli.test_cli import MODULE, as_json, cli, db, new_db, ok, one_line_error, project, start  # noqa: F401
from durable_flow import Blackboard, MemoryStore, Runtime, WorkflowBuilder, add
from durable_flow.cli._db import resolve_checkpoint
from durable_flow.cli._support import CliError
from durable_flow.store._protocols import CheckpointMeta


def _summary(text: str) -> tuple[int, int]:
    """(superstep, checkpoints written) from a run's summary line."""
    m = re.search(r"(?:at|in) superstep (\d+) · (\d+) checkpoint\(s\) written", text)
    assert m is not None, text
    return int(m[1]), int(m[2])


def test_run_summary_counts_agree_with_show_and_history(db: Path) -> None:
    text = ok(cli(db, "run", f"{MODULE}:workflow", "--run-id", "c2")).stdout
    superstep, written = _summary(text)
    # waiting in the superstep after its head checkpoint: the one its request id names
    assert "waiting in superstep 2" in text
    assert superstep == as_json(cli(db, "show", "c2", "--json"))["snapshot"]["superstep"] + 1
    assert written == len(as_json(cli(db, "history", "c2", "--json")))
    text = ok(cli(db, "respond", "c2", "approve@2#0", "--value", "true")).stdout
    superstep, written = _summary(text)
    assert superstep == as_json(cli(db, "show", "c2", "--json"))["snapshot"]["superstep"] == 2
    assert written == 1  # the one checkpoint this resume committed


def test_checkpoints_are_named_by_superstep(db: Path) -> None:
    run_id = start(db)["run_id"]
    ok(cli(db, "respond", run_id, "approve@2#0", "--value", "true", "--json"))
    ids = {c["superstep"]: c["id"] for c in as_json(cli(db, "history", run_id, "--json"))}
    for superstep, checkpoint in ids.items():
        snap = as_json(cli(db, "show", run_id, "-c", f"@{superstep}", "--json"))["snapshot"]
        assert snap["checkpoint_id"] == checkpoint
    data = as_json(cli(db, "diff", run_id, "@0", "@2", "--json"))
    assert (data["from"], data["to"]) == (ids[0], ids[2])
    assert data["changed"]["approved"] == {"before": False, "after": True}
    one_line_error(cli(db, "show", run_id, "-c", "@7"), "no checkpoint at superstep 7",
                   "0 to 2")
    one_line_error(cli(db, "show", run_id, "-c", "@x"), "not a superstep reference")


def test_checkpoints_are_named_by_a_unique_end_of_their_id(db: Path) -> None:
    run_id = start(db)["run_id"]
    ok(cli(db, "respond", run_id, "approve@2#0", "--value", "true", "--json"))
    history = as_json(cli(db, "history", run_id, "--json"))
    first, last = history[-1]["id"], history[0]["id"]
    assert first[:8] == last[:8]  # uuid7: one run's ids share their first characters
    data = as_json(cli(db, "diff", run_id, first[-8:], last[-8:], "--json"))
    assert (data["from"], data["to"]) == (first, last)
    one_line_error(cli(db, "diff", run_id, first[:8], last[-8:]), "ambiguous", "@SUPERSTEP")
    one_line_error(cli(db, "show", run_id, "-c", "zzzz"), "has no checkpoint 'zzzz'")
    forked = as_json(cli(db, "fork", run_id, "@1", "--json"))
    assert forked["state"]["notes"] == ["about tides"]


def test_a_checkpoint_inside_a_sub_workflow_is_named_like_its_request(db: Path) -> None:
    run_id = start(db, f"{MODULE}:nested")["run_id"]
    [request] = as_json(cli(db, "inbox", "--json"))
    assert request["id"] == "legal@2/sign@1#0"  # legal ran during superstep 2
    [inner] = as_json(cli(db, "history", run_id, "--namespace", "legal", "--json"))
    snap = as_json(cli(db, "show", run_id, "-c", "@2/legal@0", "--json"))["snapshot"]
    assert snap["checkpoint_id"] == inner["id"]
    assert snap["next_tasks"] == ["sign"]
    one_line_error(cli(db, "show", run_id, "-c", "@1/legal@0"), "no sub-workflow 'legal'",
                   "superstep 1")
    one_line_error(cli(db, "show", run_id, "-c", "@2/legal@5"), "no checkpoint at superstep 5")


def test_history_shows_superstep_refs_sizes_with_units_and_pages(db: Path) -> None:
    run_id = start(db)["run_id"]
    table = ok(cli(db, "history", run_id)).stdout
    assert "@0" in table and "@1" in table
    assert re.search(r"\d+ B\b|\d+\.\d kB\b", table), table
    newest, older = as_json(cli(db, "history", run_id, "--json"))
    assert as_json(cli(db, "history", run_id, "--limit", "1", "--json")) == [newest]
    assert as_json(cli(db, "history", run_id, "--before", "@1", "--json")) == [older]


class _CountingStore(MemoryStore):
    """A MemoryStore that counts the checkpoints ``list_checkpoints`` returns."""

    listed = 0

    async def list_checkpoints(self, run_id: str, **kwargs: Any) -> list[CheckpointMeta]:
        page = await super().list_checkpoints(run_id, **kwargs)
        self.listed += len(page)
        return page


class _Count(Blackboard):
    count: Annotated[int, add] = 0


def test_a_recent_superstep_of_a_long_run_is_found_without_reading_every_checkpoint() -> None:
    b = WorkflowBuilder("long", state=_Count)
    b.add_node("step", lambda s: {"count": 1})
    b.set_entry("step")
    b.add_edge("step", "step", when=lambda s: s.count < 1000)

    async def scenario() -> None:
        store = _CountingStore()
        async with Runtime(store) as rt:
            await rt.run(b.build(), run_id="long", max_supersteps=2000)
            ids = {m.superstep: m.id for m in await store.list_checkpoints("long")}
            assert len(ids) == 1001
            for superstep, most in [(1000, 200), (950, 200), (700, 400), (0, 1001)]:
                store.listed = 0
                assert await resolve_checkpoint(rt, "long", f"@{superstep}") == ids[superstep]
                assert store.listed <= most, (superstep, store.listed)
            with pytest.raises(CliError, match=r"no checkpoint at superstep 1001 .*0 to 1000"):
                await resolve_checkpoint(rt, "long", "@1001")

    asyncio.run(scenario())


class _ReadCountingStore(_CountingStore):
    """Also counts the checkpoints read one by one."""

    async def get_checkpoint(self, run_id: str, checkpoint_id: str) -> CheckpointMeta | None:
        self.listed += 1
        return await super().get_checkpoint(run_id, checkpoint_id)


def test_an_end_of_an_id_in_a_long_run_is_found_without_reading_every_checkpoint() -> None:
    b = WorkflowBuilder("long", state=_Count)
    b.add_node("step", lambda s: {"count": 1})
    b.set_entry("step")
    b.add_edge("step", "step", when=lambda s: s.count < 300)

    async def scenario() -> None:
        store = _ReadCountingStore()
        async with Runtime(store) as rt:
            await rt.run(b.build(), run_id="long", max_supersteps=400)
            ids = [m.id for m in await store.list_checkpoints("long")]
            assert len(ids) == 301
            for wanted in (ids[0], ids[150], ids[-1]):
                for ref in (wanted, wanted[-12:], wanted[:-1]):
                    store.listed = 0
                    assert await resolve_checkpoint(rt, "long", ref) == wanted
                    assert store.listed <= 1, (ref, store.listed)  # at most the exact id
            store.listed = 0
            with pytest.raises(CliError, match="ambiguous"):
                await resolve_checkpoint(rt, "long", ids[0][:8])
            with pytest.raises(CliError, match="has no checkpoint '%_'"):
                await resolve_checkpoint(rt, "long", "%_")
            assert store.listed <= 2

    asyncio.run(scenario())


def test_every_inner_superstep_is_named_after_a_resume_inside_the_sub_workflow() -> None:
    import collections

    from engine.test_nested_forks import two_inner_questions

    async def go() -> None:
        wf = two_inner_questions(collections.Counter())
        async with Runtime(MemoryStore()) as rt:
            first = await rt.run(wf, {"x": 1})
            await rt.resume(wf, first.run_id, responses={first.pending_requests[0].id: 10})
            # the resume went on in a copy of the paused thread: @1/sub@0 is in the first one
            inner = {c.superstep: c.id for c in reversed(
                await rt.history(first.run_id, namespace="sub"))}
            for superstep in (0, 1, 2):
                assert await resolve_checkpoint(rt, first.run_id, f"@1/sub@{superstep}") == \
                    inner[superstep]
            with pytest.raises(CliError, match="no checkpoint at superstep 3"):
                await resolve_checkpoint(rt, first.run_id, "@1/sub@3")

    asyncio.run(go())
