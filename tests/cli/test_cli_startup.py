"""The console script builds only the command it runs; the whole app stays the same."""

from __future__ import annotations

import ast
import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from durable_flow.cli import _app, app
from durable_flow.cli._app import build_app, command_named
from durable_flow.store.sqlite._sqlite import SqliteStore

COMMANDS = [name for name, _, _ in _app._COMMANDS]


@pytest.mark.parametrize(("args", "command"), [
    (["runs"], "runs"),
    (["--db", "x.db", "runs", "--json"], "runs"),
    (["--db=x.db", "--debug", "--log-json", "show", "r1"], "show"),
    (["--db", "runs", "inbox"], "inbox"),  # a value that looks like a command
    (["db", "upgrade"], "db"),
    ([], None),
    (["--help"], None),
    (["--version"], None),
    (["--db"], None),
    (["rnus"], None),  # unknown: the whole app suggests the right one
    (["--debug=1", "runs"], None),  # not plain: the whole app reports it
    (["--no-debug", "runs"], None),
    (["--", "runs"], None),
])
def test_the_command_on_the_command_line(args: list[str], command: str | None) -> None:
    assert command_named(args) == command


@pytest.mark.parametrize("command", [*COMMANDS, "db"])
def test_an_app_of_one_command_helps_like_the_whole_app(command: str) -> None:
    runner = CliRunner()
    one = runner.invoke(build_app(command), [command, "--help"])
    whole = runner.invoke(app, [command, "--help"])
    assert one.exit_code == whole.exit_code == 0
    assert one.output == whole.output


def test_the_whole_app_has_every_command() -> None:
    out = CliRunner().invoke(app, ["--help"]).output
    assert all(f" {name} " in out for name in [*COMMANDS, "db"])


# what listing runs never needs (pydantic itself is typer's, which coerces options with it)
NOT_FOR_RUNS = ("sqlalchemy", "sqlmodel", "alembic", "structlog", "tenacity", "durable_flow.engine",
                "durable_flow.runtime._runtime", "durable_flow.model._graph",
                "durable_flow.model._blackboard", "durable_flow.model._messages",
                "durable_flow.building")


@pytest.mark.process
@pytest.mark.parametrize("with_runs", [False, True])
def test_runs_imports_no_other_command_nor_the_engine(tmp_path: Path, with_runs: bool) -> None:
    db = tmp_path / "head.db"
    asyncio.run(_two_runs(db) if with_runs else _setup(db))
    code = ("import runpy, sys\n"
            "sys.argv = ['durable-flow', '--db', sys.argv[1], 'runs']\n"
            "try:\n    runpy.run_module('durable_flow', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('durable_flow.cli.')))\n"
            f"print(sorted(m for m in sys.modules if m.startswith({NOT_FOR_RUNS!r})))\n")
    run = [sys.executable, "-c", code, str(db)]
    subprocess.run(run, capture_output=True, timeout=60, check=True)  # fills the statement cache
    out = subprocess.run(run, capture_output=True, text=True, timeout=60,
                         check=True).stdout.splitlines()
    if with_runs:  # the table, one row per run
        assert sum(" completed " in line for line in out) == 4
    else:
        assert out[0] == "no runs"
    loaded = {m.rsplit(".", 1)[1] for m in ast.literal_eval(out[-2])}
    assert {"_app", "_reading"} <= loaded
    assert loaded.isdisjoint({"_control", "_running", "_follow", "_progress", "_tools", "_prune",
                              "_worker", "_ui", "_events"})
    assert ast.literal_eval(out[-1]) == []


def test_runs_lists_what_the_runtime_lists(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    asyncio.run(_two_runs(db))
    runner = CliRunner()
    for args in ([], ["--status", "completed"], ["--workflow", "other"], ["-s", "waiting"]):
        listed = runner.invoke(app, ["--db", str(db), "runs", "--json", *args])
        assert listed.exit_code == 0, listed.output
        expected = asyncio.run(_listed(db, args))
        assert [r["run_id"] for r in json.loads(listed.output)] == expected


async def _two_runs(path: Path) -> None:
    from durable_flow import END, Blackboard, Runtime, WorkflowBuilder

    class S(Blackboard):
        n: int = 0

    for name in ("one", "other"):
        b = WorkflowBuilder(name, state=S)
        b.add_node("step", lambda s: {"n": s.n + 1})
        b.set_entry("step")
        b.add_edge("step", END)
        async with Runtime(SqliteStore(path)) as rt:
            await rt.run(b.build())
            await rt.run(b.build())


async def _listed(path: Path, args: list[str]) -> list[str]:
    from durable_flow import Runtime

    status = args[1] if args and args[0] in ("--status", "-s") else None
    workflow = args[1] if args and args[0] == "--workflow" else None
    async with Runtime(SqliteStore(path)) as rt:
        return [r.run_id for r in await rt.list_runs(status=status, workflow_name=workflow)]


async def _setup(path: Path) -> None:
    async with SqliteStore(path):
        pass


@pytest.mark.process
@pytest.mark.parametrize(("args", "fragment"), [
    (["ui", "--port", "70000"], "Invalid value for '--port'"),
    (["runs", "--bogus"], "No such option: --bogus"),
    (["nosuch"], "No such command 'nosuch'"),
    (["users", "add"], "Missing argument 'NAME'"),
])
def test_a_command_line_that_does_not_parse_is_one_line_and_exit_2(
        tmp_path: Path, args: list[str], fragment: str) -> None:
    proc = subprocess.run([str(Path(sys.executable).with_name("durable-flow")), *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "COLUMNS": "80"})
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], lines
    assert "--help" in lines[0]


def test_no_command_shows_the_help() -> None:
    result = CliRunner().invoke(app, [])
    assert "Usage: " in result.output and not result.output.startswith("error:")
    assert "COMMAND" in result.output and "run" in result.output


def test_a_worker_leaves_its_start_up_heap_out_of_later_collections() -> None:
    import gc
    import weakref

    from durable_flow.cli._worker import freeze_startup_heap

    try:
        frozen = freeze_startup_heap()
        assert frozen > 10_000 and gc.get_freeze_count() == frozen
        assert len(gc.get_objects()) < frozen // 10  # what a full collection walks now

        class Cycle:
            me: object = None

        made = Cycle()
        made.me = made  # garbage made afterwards is still collected
        gone = weakref.ref(made)
        del made
        gc.collect()
        assert gone() is None
    finally:
        gc.unfreeze()
