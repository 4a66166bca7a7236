"""``db prune``: a dry run that changes nothing, and a SQLite file that shrinks."""

# ruff: noqa: F811  # the fixtures db and project are test_cli's, imported by name

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from cli.test_cli import as_json, cli, db, ok, project  # noqa: F401
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
