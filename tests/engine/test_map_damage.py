"""Damaged instance arguments in a SQLite file: CheckpointCorruptedError, nothing written."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Annotated, Any

import pytest

from durable_flow import (
    Blackboard,
    CheckpointCorruptedError,
    Command,
    NodeContext,
    RunStatus,
    Runtime,
    Send,
    SqliteStore,
    Workflow,
    WorkflowBuilder,
    append,
)
from durable_flow.store.sql._tables import METADATA


class Lines(Blackboard):
    items: list[int] = []
    approved: Annotated[list[int], append] = []


def workflow() -> Workflow:
    async def check(state: Lines, ctx: NodeContext) -> dict[str, Any]:
        await ctx.request({"amount": ctx.arg}, response_type=bool)
        return {"approved": [ctx.arg]}

    b = WorkflowBuilder("lines", state=Lines)
    b.add_node("split", lambda s: Command(goto=[Send("check", n) for n in s.items]),
               goto=["check"])
    b.add_node("check", check, arg_type=int)
    b.set_entry("split")
    return b.build()


def dump(db: Path) -> dict[str, list[Any]]:
    with sqlite3.connect(db) as conn:
        rows = {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr)
                for t in METADATA.tables}
    conn.close()
    return rows


@pytest.mark.parametrize(("damaged", "unsealed", "reason"), [
    ('{"check[0]": 1, "check[1]"', False, "column 'task_args' cannot be read"),
    ('["check[0]"]', False, "column 'task_args' cannot be read"),
    # valid JSON: the row's digest catches it; a row from before digests, the arg's type
    ('{"check[0]": 1, "check[1]": "many"}', False, "does not match its digest"),
    ('{"check[0]": 1, "check[1]": "many"}', True, "the arg of 'check[1]'"),
])
async def test_a_damaged_arg_stops_the_resume_before_anything_is_written(
        tmp_path: Path, damaged: str, unsealed: bool, reason: str) -> None:
    db, wf = tmp_path / "runs.db", workflow()
    async with Runtime(SqliteStore(db)) as rt:
        r = await rt.run(wf, {"items": [1, 2]})
        assert r.status is RunStatus.WAITING
    with sqlite3.connect(db) as conn:
        changed = conn.execute("UPDATE checkpoints SET task_args = ? WHERE checkpoint_id = ?",
                               (damaged, r.checkpoint_id))
        assert changed.rowcount == 1
        if unsealed:
            conn.execute("UPDATE checkpoints SET row_digest = NULL")
    conn.close()
    before = dump(db)
    async with Runtime(SqliteStore(db)) as rt:
        with pytest.raises(CheckpointCorruptedError) as info:
            await rt.resume(wf, r.run_id, responses={"check[0]@2#0": True})
    assert reason in str(info.value) and r.checkpoint_id in str(info.value)
    assert dump(db) == before
