"""The command line of schedules: add, list, pause, resume, remove, and refusals in one line."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import croniter  # noqa: F401  # imported at collection: its import runs `file` once
import pytest
from clikit import cli, project_db
from typer.testing import CliRunner

from durable_flow.cli import app

MODULE = "tickflows"

FLOWS = textwrap.dedent('''
    from durable_flow import END, Blackboard, WorkflowBuilder

    class Report(Blackboard):
        day: str = ""

    b = WorkflowBuilder("report", state=Report)
    b.add_node("write", lambda state: {"day": state.day or "today"})
    b.set_entry("write").add_edge("write", END)
    report = b.build()
''')


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sqlite_at_head: Path) -> Iterator[Path]:
    yield from project_db(tmp_path, monkeypatch, MODULE, FLOWS, sqlite_at_head)


def test_add_list_pause_resume_remove(db: Path) -> None:
    added = cli(db, "schedules", "add", "nightly", f"{MODULE}:report", "--cron", "0 2 * * *",
                "--tz", "Europe/Paris", "-i", '{"day": "mon"}', "--catch-up", "all")
    assert "schedule nightly saved; next tick" in added.stdout
    [row] = json.loads(cli(db, "schedules", "list", "--json").stdout)
    assert (row["schedule_id"], row["workflow_name"], row["cron"], row["timezone"],
            row["catch_up"], row["input"], row["paused"]) == \
        ("nightly", "report", "0 2 * * *", "Europe/Paris", "all", {"day": "mon"}, False)
    assert row["next_tick"].endswith(("T01:00:00+00:00", "T00:00:00+00:00"))  # 02:00 Paris
    assert "paused" in cli(db, "schedules", "pause", "nightly").stdout
    assert json.loads(cli(db, "schedules", "list", "--json").stdout)[0]["paused"] is True
    assert "resumed" in cli(db, "schedules", "resume", "nightly").stdout
    assert "nightly" in cli(db, "schedules", "list").stdout
    assert "removed" in cli(db, "schedules", "remove", "nightly").stdout
    assert json.loads(cli(db, "schedules", "list", "--json").stdout) == []


@pytest.mark.parametrize(("args", "fragment"), [
    (["add", "s", f"{MODULE}:report", "--cron", "sometimes"], "not a cron expression"),
    (["add", "s", f"{MODULE}:report", "--cron", "* * * * *", "--tz", "Mars/Base"],
     "unknown time zone"),
    (["add", "s", f"{MODULE}:report", "--cron", "* * * * *", "--catch-up", "twice"],
     "--catch-up"),
    (["remove", "none"], "no schedule 'none'"),
    (["pause", "none"], "no schedule 'none'"),
])
def test_bad_schedule_commands_fail_in_one_line(db: Path, args: list[str], fragment: str) -> None:
    cli(db, "schedules", "add", "kept", f"{MODULE}:report", "--cron", "0 2 * * *")
    result = CliRunner().invoke(app, ["--db", str(db), "schedules", *args])
    assert result.exit_code == 1, result.output
    assert fragment in result.output
    listed = json.loads(cli(db, "schedules", "list", "--json").stdout)
    assert [s["schedule_id"] for s in listed] == ["kept"]
