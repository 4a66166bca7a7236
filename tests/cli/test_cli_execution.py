"""The CLI executing runs: interruption, recovery, workflow files, forks, logs and messages."""

# ruff: noqa: F811  # the fixtures db and project are test_cli's, imported by name

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.test_cli import (  # noqa: F401
    MODULE,
    as_json,
    cli,
    db,
    new_db,
    ok,
    one_line_error,
    project,
    start,
)

SLOW = textwrap.dedent('''
    import asyncio
    from pathlib import Path

    from durable_flow import Blackboard, WorkflowBuilder

    class S(Blackboard):
        done: bool = False

    async def slow(state: S) -> dict:
        Path("started").touch()
        if not Path("fast").exists():
            await asyncio.sleep(60)
        return {"done": True}

    b = WorkflowBuilder("slow", state=S)
    b.add_node("slow", slow)
    b.set_entry("slow")
    workflow = b.build()
''')

HOLDER = textwrap.dedent('''
    import asyncio, os, signal, sys
    from durable_flow import Runtime
    from durable_flow.store.sqlite._sqlite import SqliteStore
    from slowflow import workflow

    async def main():
        async with Runtime(SqliteStore(sys.argv[1]), lease_ttl=30) as rt:
            task = asyncio.create_task(rt.run(workflow, {}, run_id="held",
                                              workflow_ref="slowflow:workflow"))
            while not os.path.exists("started"):
                await asyncio.sleep(0.01)
            os.kill(os.getpid(), signal.SIGKILL)

    asyncio.run(main())
''')


def _env(project: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(project), *sys.path])}


@contextlib.contextmanager
def _ctrl_c_delivered() -> Iterator[None]:
    """Children started inside take Ctrl-C as a terminal's foreground command does.

    A command started in the background of a script (``cmd &``) inherits SIGINT
    ignored, and an interpreter that starts with it ignored keeps ignoring it;
    so may this test process. A handler of our own is reset to the default
    when the child execs, ignored or not, so the child starts with Python's.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.process
def test_ctrl_c_says_the_run_was_interrupted_and_can_be_resumed(db: Path, project: Path) -> None:
    (project / "slowflow.py").write_text(SLOW)
    with _ctrl_c_delivered():
        child = subprocess.Popen(
            [sys.executable, "-m", "durable_flow", "--db", str(db), "run", "slowflow:workflow",
             "--run-id", "c2"], cwd=project, env=_env(project), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (project / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    child.send_signal(signal.SIGINT)
    _out, err = child.communicate(timeout=60)
    assert child.returncode == 130, err
    [line] = [x for x in err.splitlines() if x.strip()]  # no log line before it
    assert line.startswith("error: ") and "interrupted: run c2" in line and "still running" in line
    assert "was cancelled" not in line and f"durable-flow --db {db} resume c2" in line
    assert as_json(cli(db, "show", "c2", "--json"))["snapshot"]["status"] == "running"
    (project / "fast").touch()
    assert as_json(cli(db, "resume", "c2", "--json"))["status"] == "completed"


@pytest.mark.crash
def test_recover_names_runs_whose_lease_is_still_held(db: Path, project: Path) -> None:
    (project / "slowflow.py").write_text(SLOW)
    (project / "holder.py").write_text(HOLDER)
    child = subprocess.run([sys.executable, "holder.py", str(db)], cwd=project,
                           env=_env(project), capture_output=True, timeout=60)
    assert child.returncode == -9, child.stderr
    text = ok(cli(db, "recover", "slowflow:workflow")).stdout
    assert "needed recovery" not in text
    assert "run held is still held by" in text and "try again then" in text
    data = as_json(cli(db, "recover", "slowflow:workflow", "--json"))
    assert data["recovered"] == []
    [held] = data["held"]
    assert held["run_id"] == "held" and 20 < held["expires_in"] <= 30


def test_a_changed_graph_names_the_option_and_cancel_of_a_finished_run_says_so(
        db: Path, project: Path) -> None:
    (project / "changed.py").write_text(textwrap.dedent('''
        from durable_flow import Blackboard, WorkflowBuilder
        from cliflows import Draft, research

        b = WorkflowBuilder("publish", state=Draft)
        b.add_node("research", research)
        b.set_entry("research")
        workflow = b.build()
    '''))
    run_id = start(db)["run_id"]
    line = one_line_error(cli(db, "resume", run_id, "--workflow", "changed:workflow"),
                          "--allow-mismatch")
    assert "allow_mismatch=True" not in line
    ok(cli(db, "respond", run_id, "approve@2#0", "--value", "true"))
    line = one_line_error(cli(db, "cancel", run_id), f"run {run_id} is completed",
                          "cannot be cancelled")
    assert "resumed" not in line


def test_run_takes_a_python_file_and_resume_finds_it_from_anywhere(
        db: Path, project: Path) -> None:
    flows = project / "flows"
    flows.mkdir()
    (flows / "publishing.py").write_text((project / f"{MODULE}.py").read_text())
    elsewhere = project / "elsewhere"
    elsewhere.mkdir()
    data = as_json(cli(db, "run", "flows/publishing.py:workflow", "-i", '{"topic": "file"}',
                       "--json"))
    assert data["status"] == "waiting"
    [info] = as_json(cli(db, "runs", "--json"))
    assert info["workflow_ref"] == f"{flows / 'publishing.py'}:workflow"
    os.chdir(elsewhere)
    done = as_json(cli(db, "respond", data["run_id"], "approve@2#0", "--value", "true",
                       "--json"))
    assert done["status"] == "completed" and done["state"]["topic"] == "file"
    one_line_error(cli(db, "run", "flows/nothing.py:workflow"), "no file")


def test_run_takes_a_declarative_file_with_its_registry(db: Path, project: Path) -> None:
    (project / "flow.json").write_text(json.dumps({
        "name": "json_publish",
        "nodes": [{"id": "research", "agent_name": "research", "is_entry": True},
                  {"id": "approve", "agent_name": "approve", "is_exit": True}],
        "connections": [{"source_id": "research", "target_id": "approve"}]}))
    data = as_json(cli(db, "run", "flow.json", "--registry", f"{MODULE}:registry",
                       "-i", '{"topic": "json"}', "--json"))
    assert data["status"] == "waiting"
    [info] = as_json(cli(db, "runs", "--json"))
    assert info["workflow_ref"] == f"{project / 'flow.json'} --registry {MODULE}:registry"
    done = as_json(cli(db, "respond", data["run_id"], "approve@2#0", "--value", "true",
                       "--json"))
    assert done["status"] == "completed"
    one_line_error(cli(db, "run", f"{MODULE}:workflow", "--registry", f"{MODULE}:registry"),
                   "--registry is for .json/.yaml")


@pytest.mark.process
def test_python_dash_m_runs_the_command(project: Path) -> None:
    child = subprocess.run([sys.executable, "-m", "durable_flow", "--version"],
                           capture_output=True, text=True, timeout=60)
    assert child.returncode == 0 and child.stdout.startswith("durable-flow ")


def test_fork_takes_a_run_id_and_shows_progress(db: Path) -> None:
    run_id = start(db)["run_id"]
    text = ok(cli(db, "fork", run_id, "@1", "--run-id", "f1")).stdout
    assert "run f1 waiting" in text and "checkpoint(s) written" in text
    assert "approve" in text  # the node table
    assert "forked run" in text and "into f1" in text
    info = as_json(cli(db, "show", "f1", "--json"))["run"]
    assert info["forked_from"]["run_id"] == run_id
    one_line_error(cli(db, "fork", run_id, "@1", "--run-id", "f1"), "already exists")
    resumed = ok(cli(db, "resume", "f1")).stdout
    assert "run f1 waiting" in resumed and "checkpoint(s) written" in resumed


def test_log_json_and_debug_report_a_successful_run(db: Path) -> None:
    result = cli(db, "--log-json", "run", f"{MODULE}:workflow", "--run-id", "r1", "--json")
    events = [json.loads(x)["event"] for x in result.stderr.splitlines() if x.startswith("{")]
    assert events == ["run_started", "request_issued", "run_waiting"]
    result = cli(db, "--log-json", "--debug", "respond", "r1", "approve@2#0", "--value", "true",
                 "--json")
    lines = [json.loads(x) for x in result.stderr.splitlines() if x.startswith("{")]
    events = [e["event"] for e in lines]
    for expected in ("lease_acquired", "request_answered", "superstep_started", "node_started",
                     "node_completed", "checkpoint_saved", "run_completed", "lease_released"):
        assert expected in events
    started = next(e for e in lines if e["event"] == "node_started")
    assert (started["run_id"], started["node"], started["superstep"]) == ("r1", "approve", 2)
    assert {e["level"] for e in lines} == {"debug", "info"}


def test_debug_prints_a_failed_nodes_traceback(db: Path, project: Path) -> None:
    (project / "broken").touch()
    result = cli(db, "--debug", "run", f"{MODULE}:workflow", "--run-id", "r1")
    assert result.exit_code == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert 'raise RuntimeError("disk [bold]full[/bold]")' in result.stderr
    plain = cli(db, "run", f"{MODULE}:workflow", "--run-id", "r2")
    assert "Traceback" not in plain.stderr and "--debug shows the traceback" in plain.stderr


def test_validation_errors_are_one_line_of_json_not_pydantic_dumps(db: Path) -> None:
    line = one_line_error(cli(db, "run", f"{MODULE}:workflow", "-i", '{"topic": {"ok": true}}'),
                          'topic: Input should be a valid string (got {"ok":true})')
    assert "errors.pydantic.dev" not in line and "{'ok': True}" not in line
    run_id = start(db)["run_id"]
    line = one_line_error(cli(db, "respond", run_id, "approve@2#0", "--value", '{"ok": true}'),
                          '{"ok":true} is not of type "boolean"')
    assert "{'ok': True}" not in line


@pytest.mark.process
def test_a_read_command_loads_no_logging_answer_checks_or_agents(db: Path) -> None:
    start(db)  # the database exists and is at the current schema
    code = ("import runpy, sys\n"
            "sys.argv = ['durable-flow', '--db', sys.argv[1], 'runs']\n"
            "try:\n    runpy.run_module('durable_flow', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "heavy = ('alembic', 'structlog', 'jsonschema', 'httpx',\n"
            "         'durable_flow.agents', 'durable_flow.building.declarative')\n"
            "print(sorted({m for m in sys.modules if m.startswith(heavy)}))\n")
    out = subprocess.run([sys.executable, "-c", code, str(db)], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out.splitlines()[-1] == "[]"
