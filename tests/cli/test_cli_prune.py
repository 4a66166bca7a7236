"""``db prune``: a dry run that changes nothing, and a SQLite file that shrinks."""

# ruff: noqa: F811  # the fixtures db and project are test_cli's, imported by name

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from cli.test_cli import as_json, cli, db, new_db, ok, project  # noqa: F401
from durable_flow import Blackboard, Runtime, SqliteStore, WorkflowBuilder


class Big(Blackboard):
    n: int = 0
    blob: str = ""


def _grow(path: Path, runs: int = 3, steps: int = 20, prefix: str = "big") -> list[str]:
    """Runs whose every checkpoint rewrites a 20 kB value."""
    b = WorkflowBuilder("big", state=Big)

    @b.node()
    def step(state: Big) -> dict[str, Any]:
        return {"n": state.n + 1, "blob": f"{state.n:06d}" * 3400}

    b.set_entry("step")
    b.add_edge("step", "step", when=f"n < {steps}")
    workflow = b.build()

    async def go() -> list[str]:
        async with Runtime(SqliteStore(path)) as rt:
            return [(await rt.run(workflow, {}, run_id=f"{prefix}{i}")).run_id for i in range(runs)]

    return asyncio.run(go())


def test_dry_run_counts_what_prune_removes_and_changes_nothing(db: Path) -> None:
    runs = _grow(db, runs=2, steps=5)
    histories = {r: as_json(cli(db, "history", r, "--json")) for r in runs}
    planned = as_json(cli(db, "db", "prune", "--keep-last", "2", "--dry-run", "--json"))
    assert planned["dry_run"] is True and planned["removed"] == 2 * (6 - 2)
    assert "would remove 8 checkpoint(s)" in ok(
        cli(db, "db", "prune", "--keep-last", "2", "--dry-run")).stdout
    assert {r: as_json(cli(db, "history", r, "--json")) for r in runs} == histories
    done = as_json(cli(db, "db", "prune", "--keep-last", "2", "--json"))
    assert done["removed"] == planned["removed"]
    one_run = as_json(cli(db, "db", "prune", "--keep-last", "1", "--run", runs[0], "--dry-run",
                          "--json"))
    assert one_run["removed"] == 1


def test_prune_gives_the_space_back_to_the_file_system(db: Path) -> None:
    _grow(db, prefix="a")
    grown = db.stat().st_size
    kept = as_json(cli(db, "db", "prune", "--keep-last", "1", "--no-vacuum", "--json"))
    assert kept["removed"] == 3 * 20 and "bytes_after" not in kept
    assert db.stat().st_size >= grown * 0.9  # deleted rows only free pages inside the file
    _grow(db, prefix="b")
    data = as_json(cli(db, "db", "prune", "--keep-last", "1", "--json"))
    assert data["removed"] == 3 * 20
    assert data["bytes_after"] < data["bytes_before"] / 4
    assert db.stat().st_size <= data["bytes_after"]
    text = ok(cli(db, "db", "prune", "--keep-last", "1")).stdout
    assert "removed 0 checkpoint(s)" in text


async def _three_notices(rt: Runtime) -> tuple[str, str, str]:
    """Runs whose notification is: delivered and answered, delivered and open, unsent and answered."""
    from notifykit import Recorder
    from runtime.test_outbox import flow

    from durable_flow.runtime.notifications._outbox import Outbox

    gone, still_open = [await rt.run(flow(), {}) for _ in range(2)]
    assert await Outbox(rt.store, [Recorder()]).deliver_due() == 2
    unsent = await rt.run(flow(), {})
    for answered in (gone, unsent):
        await rt.respond(answered.run_id, {answered.pending_requests[0].id: True},
                         by="alice@example.com")
    return gone.run_id, still_open.run_id, unsent.run_id


async def test_delivered_notifications_of_closed_requests_go_and_the_dry_run_counts_them(
        rt: Runtime) -> None:
    from datetime import timedelta

    from durable_flow.cli._prune import prune_notices

    gone, still_open, unsent = await _three_notices(rt)
    assert await prune_notices(rt, timedelta(days=1)) == 0  # delivered too recently
    assert await prune_notices(rt, timedelta(0), dry_run=True) == 1
    assert len(await rt.store.notifications(gone)) == 1  # the dry run changed nothing
    assert await prune_notices(rt, timedelta(0)) == 1
    assert await rt.store.notifications(gone) == []
    (kept,) = await rt.store.notifications(still_open)
    assert kept.delivered_at is not None
    (waiting,) = await rt.store.notifications(unsent)
    assert waiting.delivered_at is None
    assert await prune_notices(rt, timedelta(0), dry_run=True) == 0


def test_db_prune_removes_delivered_notifications_older_than_its_cut_off(db: Path) -> None:
    async def setup() -> tuple[str, str, str]:
        async with Runtime(SqliteStore(db)) as rt:
            return await _three_notices(rt)

    async def notices(run_id: str) -> list[Any]:
        async with Runtime(SqliteStore(db)) as rt:
            return await rt.store.notifications(run_id)

    gone, still_open, unsent = asyncio.run(setup())
    assert "notifications" not in as_json(cli(db, "db", "prune", "--keep-last", "1", "--json"))
    recent = as_json(cli(db, "db", "prune", "--older-than-days", "1", "--json"))
    assert recent["notifications"] == 0
    dry = as_json(cli(db, "db", "prune", "--older-than-days", "0", "--dry-run", "--json"))
    assert (dry["dry_run"], dry["notifications"]) == (True, 1)
    one_run = as_json(cli(db, "db", "prune", "--older-than-days", "0", "--run", gone, "--json"))
    assert "notifications" not in one_run  # they are the whole store's, not one run's
    assert len(asyncio.run(notices(gone))) == 1
    text = ok(cli(db, "db", "prune", "--older-than-days", "0")).stdout
    assert "and 1 delivered notification(s)" in text
    assert asyncio.run(notices(gone)) == []
    assert [n.delivered_at is not None for n in asyncio.run(notices(still_open))] == [True]
    assert [n.delivered_at is not None for n in asyncio.run(notices(unsent))] == [False]
    help_text = ok(cli(db, "db", "prune", "--help")).stdout
    assert "delivered" in help_text and "notification" in help_text
