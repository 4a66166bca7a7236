"""The durable-flow command, driven through typer's runner on a real SQLite file (and PostgreSQL)."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from pgdb import fresh_database
from typer.testing import CliRunner, Result

from durable_flow import Runtime
from durable_flow.cli import app
from durable_flow.cli._db import parse_db
from durable_flow.cli._reading import diff_values
from durable_flow.cli._support import CliError
from durable_flow.store.postgres._postgres import PostgresStore

MODULE = "cliflows"

FLOWS = textwrap.dedent('''
    import os
    import signal
    from pathlib import Path
    from typing import Annotated

    from durable_flow import END, Blackboard, RetryPolicy, WorkflowBuilder, add, append

    class Draft(Blackboard):
        topic: str = ""
        notes: Annotated[list[str], append] = []
        count: Annotated[int, add] = 0
        approved: bool = False

    async def research(state: Draft, ctx) -> dict:
        if Path("crash").exists():
            os.kill(os.getpid(), signal.SIGKILL)
        if Path("broken").exists():
            raise RuntimeError("disk [bold]full[/bold]")
        return {"notes": [f"about {state.topic}"], "count": 1}

    async def approve(state: Draft, ctx) -> dict:
        ok = await ctx.request({"question": f"publish {state.topic}?"}, response_type=bool)
        return {"approved": ok}

    b = WorkflowBuilder("publish", state=Draft)
    b.add_node("research", research, retry=RetryPolicy(max_attempts=2, initial_delay=0.01,
                                                       jitter=False))
    b.add_node("approve", approve)
    b.set_entry("research")
    b.add_edge("research", "approve")
    b.add_edge("approve", END)
    workflow = b.build()

    legal = WorkflowBuilder("legal", state=Draft)
    legal.add_node("sign", approve)
    legal.set_entry("sign")
    outer = WorkflowBuilder("review", state=Draft)
    outer.add_node("research", research)
    outer.add_subworkflow("legal", legal.build(), inputs=["topic"],
                          outputs={"approved": "approved"})
    outer.set_entry("research")
    outer.add_edge("research", "legal")
    nested = outer.build()

    builder = b
    answer = 42
    registry = {"research": research, "approve": approve}
''')

CRASHER = textwrap.dedent('''
    import asyncio, sys
    from durable_flow import Runtime
    from durable_flow.store.sqlite._sqlite import SqliteStore
    from cliflows import workflow

    async def main():
        async with Runtime(SqliteStore(sys.argv[1]), lease_ttl=0.3) as rt:
            await rt.run(workflow, {"topic": "crash"}, run_id="crashed",
                         workflow_ref="cliflows:workflow")

    asyncio.run(main())
''')


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory holding the workflow module; the current directory during the test."""
    (tmp_path / f"{MODULE}.py").write_text(FLOWS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delenv("DURABLE_FLOW_DB", raising=False)
    sys.modules.pop(MODULE, None)
    yield tmp_path
    sys.modules.pop(MODULE, None)
    structlog.reset_defaults()


@pytest.fixture
def new_db(project: Path) -> Path:
    """Where the project's database goes; not created yet."""
    return project / "runs.db"


@pytest.fixture
def db(new_db: Path, sqlite_at_head: Path) -> Path:
    """The project's database, already at the schema's head (creating one is tested with
    ``new_db``; migrating a new file costs a tenth of a second of CPU)."""
    shutil.copyfile(sqlite_at_head, new_db)
    return new_db


def cli(db: Path, *args: str, **kwargs: Any) -> Result:
    return CliRunner().invoke(app, ["--db", str(db), *args], **kwargs)


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.stderr
    return result


def as_json(result: Result) -> Any:
    return json.loads(ok(result).stdout)


def one_line_error(result: Result, *fragments: str) -> str:
    assert result.exit_code != 0, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0]
    return lines[0]


def start(db: Path, target: str = f"{MODULE}:workflow", topic: str = "tides") -> dict[str, Any]:
    data: dict[str, Any] = as_json(cli(db, "run", target, "--input", json.dumps({"topic": topic}),
                                       "--json"))
    return data


# -- run ------------------------------------------------------------------------------------


def test_run_waits_and_prints_the_request_and_the_respond_command(db: Path) -> None:
    result = ok(cli(db, "run", f"{MODULE}:workflow", "--input", '{"topic": "tides"}'))
    run_id = as_json(cli(db, "runs", "--json"))[0]["run_id"]
    assert "waiting" in result.stdout
    assert "research" in result.stdout and "approve" in result.stdout  # the summary table
    assert "approve@2#0" in result.stdout
    assert f"durable-flow --db {db} respond {run_id} 'approve@2#0' --value true" in result.stdout


def test_run_records_the_workflow_ref_and_creates_the_database(new_db: Path) -> None:
    db = new_db
    assert not db.exists()
    data = start(db)
    assert db.exists()
    assert data["status"] == "waiting"
    assert data["state"]["notes"] == ["about tides"]
    assert data["pending_requests"][0]["response_schema"] == {"type": "boolean"}
    [info] = as_json(cli(db, "runs", "--json"))
    assert info["workflow_ref"] == f"{MODULE}:workflow"
    assert info["run_id"] == data["run_id"]


def test_run_reads_input_from_a_file_and_takes_a_run_id(db: Path, project: Path) -> None:
    (project / "input.json").write_text('{"topic": "moon"}')
    data = as_json(cli(db, "run", f"{MODULE}:workflow", "-i", "@input.json", "--run-id", "r1",
                       "--json"))
    assert data["run_id"] == "r1"
    assert data["state"]["topic"] == "moon"


def test_a_failed_run_exits_1_and_resume_after_the_fix_completes_it(
        db: Path, project: Path) -> None:
    (project / "broken").touch()
    result = cli(db, "run", f"{MODULE}:workflow", "--run-id", "r1")
    assert result.exit_code == 1
    *logs, line = result.stderr.splitlines()  # the engine's log lines, then the error
    assert [next(e for e in ("node_retrying", "node_failed", "run_failed") if e in log)
            for log in logs] == ["node_retrying", "node_failed", "run_failed"]
    assert line.startswith("error: run r1 failed in node research: RuntimeError: disk "
                           "[bold]full[/bold]") and f"durable-flow --db {db} resume r1" in line
    assert "failed" in result.stdout and "retries" in result.stdout
    (project / "broken").unlink()
    resumed = as_json(cli(db, "resume", "r1", "--json"))
    assert resumed["status"] == "waiting"
    assert resumed["state"]["count"] == 1


def test_default_database_comes_from_the_environment(project: Path) -> None:
    env_db = project / "env.db"
    runner = CliRunner()
    result = runner.invoke(app, ["run", f"{MODULE}:workflow", "--json"],
                           env={"DURABLE_FLOW_DB": str(env_db)})
    ok(result)
    assert env_db.exists()
    ok(runner.invoke(app, ["db", "upgrade"]))  # no --db, no env: ./durable_flow.db
    assert (project / "durable_flow.db").exists()


# -- reading --------------------------------------------------------------------------------


def test_runs_filters_by_status_and_workflow(db: Path, project: Path) -> None:
    waiting = start(db)["run_id"]
    nested = start(db, f"{MODULE}:nested")["run_id"]
    (project / "broken").touch()
    failed = cli(db, "run", f"{MODULE}:workflow", "--json")
    assert failed.exit_code == 1
    failed_id = json.loads(failed.stdout)["run_id"]

    def ids(*args: str) -> set[str]:
        return {r["run_id"] for r in as_json(cli(db, "runs", "--json", *args))}

    assert ids() == {waiting, nested, failed_id}
    assert ids("--status", "failed") == {failed_id}
    assert ids("--status", "waiting", "--workflow", "publish") == {waiting}
    assert ids("--workflow", "review") == {nested}
    assert ids("--status", "completed") == set()
    table = ok(cli(db, "runs")).stdout
    assert waiting in table and failed_id in table and "RuntimeError" in table


def test_show_prints_status_blackboard_requests_and_nested_state(db: Path) -> None:
    run_id = start(db, f"{MODULE}:nested")["run_id"]
    text = ok(cli(db, "show", run_id)).stdout
    for expected in ("waiting", f"{MODULE}:nested", "about tides", "legal@2/sign@1#0",
                     "sub-workflow legal", "sign"):
        assert expected in text
    data = as_json(cli(db, "show", run_id, "--json"))
    assert data["run"]["workflow_name"] == "review"
    snap = data["snapshot"]
    assert snap["values"]["notes"] == ["about tides"]
    assert snap["pending_requests"][0]["node"] == "legal.sign"
    assert snap["subworkflows"]["legal"]["next_tasks"] == ["sign"]
    assert snap["subworkflows"]["legal"]["values"]["topic"] == "tides"


def test_show_a_past_checkpoint_by_prefix(db: Path) -> None:
    run_id = start(db)["run_id"]
    first = as_json(cli(db, "history", run_id, "--json"))[-1]["id"]
    snap = as_json(cli(db, "show", run_id, "--checkpoint", first[:30], "--json"))["snapshot"]
    assert snap["checkpoint_id"] == first
    assert snap["values"]["notes"] == []


def test_history_lists_checkpoints_newest_first_and_nested_namespaces(db: Path) -> None:
    run_id = start(db, f"{MODULE}:nested")["run_id"]
    top = as_json(cli(db, "history", run_id, "--json"))
    assert [c["superstep"] for c in top] == [1, 0]
    assert top[0]["nodes"] == ["research"] and top[0]["size"] > 0
    inner = as_json(cli(db, "history", run_id, "--namespace", "legal", "--json"))
    assert [c["namespace"] for c in inner] == ["legal"]
    table = ok(cli(db, "history", run_id)).stdout
    assert top[0]["id"] in table and "research" in table and "input" in table


def test_diff_shows_added_changed_and_appended_fields(db: Path) -> None:
    run_id = start(db)["run_id"]
    request = "approve@2#0"
    ok(cli(db, "respond", run_id, request, "--value", "true", "--json"))
    history = as_json(cli(db, "history", run_id, "--json"))
    first, last = history[-1]["id"], history[0]["id"]
    data = as_json(cli(db, "diff", run_id, first, last, "--json"))
    assert data["appended"] == {"notes": ["about tides"]}
    assert data["changed"] == {"count": {"before": 0, "after": 1},
                               "approved": {"before": False, "after": True}}
    assert data["added"] == {} and data["removed"] == {}
    text = ok(cli(db, "diff", run_id, first[:30], last)).stdout
    assert "1 item(s) appended" in text and "count" in text
    same = ok(cli(db, "diff", run_id, last, last)).stdout
    assert "no blackboard changes" in same


def test_diff_values_tells_growth_from_change() -> None:
    changes = diff_values({"a": [1], "b": [1, 2], "c": 1, "gone": 0},
                          {"a": [1, 2, 3], "b": [2], "c": 1, "new": "x"})
    assert changes == {"added": {"new": "x"}, "removed": {"gone": 0},
                       "changed": {"b": {"before": [1, 2], "after": [2]}},
                       "appended": {"a": [2, 3]}}


def test_inbox_lists_every_pending_request_across_runs_and_levels(db: Path) -> None:
    flat = start(db)["run_id"]
    nested = start(db, f"{MODULE}:nested")["run_id"]
    items = as_json(cli(db, "inbox", "--json"))
    assert [(r["run_id"], r["id"]) for r in items] == [(flat, "approve@2#0"),
                                                       (nested, "legal@2/sign@1#0")]
    only = as_json(cli(db, "inbox", "--workflow", "review", "--json"))
    assert [r["run_id"] for r in only] == [nested]
    text = ok(cli(db, "inbox")).stdout
    assert "legal@2/sign@1#0" in text and "boolean" in text and "respond" in text


# -- answering, resuming, forking, cancelling -------------------------------------------------


def test_respond_answers_and_resumes_to_completion(db: Path) -> None:
    run_id = start(db)["run_id"]
    result = ok(cli(db, "respond", run_id, "approve@2#0", "--value", "true"))
    assert "completed" in result.stdout
    assert f"using {MODULE}:workflow" in result.stdout
    snap = as_json(cli(db, "show", run_id, "--json"))["snapshot"]
    assert snap["status"] == "completed" and snap["values"]["approved"] is True
    assert as_json(cli(db, "inbox", "--json")) == []


def test_respond_reaches_a_request_inside_a_subworkflow(db: Path) -> None:
    run_id = start(db, f"{MODULE}:nested")["run_id"]
    data = as_json(cli(db, "respond", run_id, "legal@2/sign@1#0", "--value", "false", "--json"))
    assert data["status"] == "completed"
    assert data["state"]["approved"] is False


def test_respond_with_an_explicit_workflow_and_a_value_file(db: Path, project: Path) -> None:
    run_id = start(db)["run_id"]
    (project / "answer.json").write_text("true")
    data = as_json(cli(db, "respond", run_id, "approve@2#0", "--value", "@answer.json",
                       "--workflow", f"{MODULE}:workflow", "--json"))
    assert data["status"] == "completed"


def test_resume_of_a_waiting_run_without_answers_keeps_it_waiting(db: Path) -> None:
    run_id = start(db)["run_id"]
    data = as_json(cli(db, "resume", run_id, "--json"))
    assert data["status"] == "waiting"
    assert [r["id"] for r in data["pending_requests"]] == ["approve@2#0"]


def test_fork_starts_a_new_run_from_a_checkpoint_with_an_update(db: Path) -> None:
    run_id = start(db)["run_id"]
    ok(cli(db, "respond", run_id, "approve@2#0", "--value", "true", "--json"))
    checkpoint = as_json(cli(db, "history", run_id, "--json"))[1]["id"]  # after research
    data = as_json(cli(db, "fork", run_id, checkpoint, "--update", '{"topic": "moon"}',
                       "--json"))
    assert data["run_id"] != run_id
    assert data["status"] == "waiting"
    assert data["state"]["topic"] == "moon"
    forked = next(r for r in as_json(cli(db, "runs", "--json")) if r["run_id"] == data["run_id"])
    assert forked["forked_from"] == {"run_id": run_id, "checkpoint_id": checkpoint}
    text = ok(cli(db, "fork", run_id, checkpoint[:30])).stdout
    assert f"forked run {run_id}" in text and "waiting" in text


def test_cancel_marks_a_waiting_run_cancelled(db: Path) -> None:
    run_id = start(db)["run_id"]
    info = as_json(cli(db, "cancel", run_id, "--json"))
    assert info["status"] == "cancelled"
    assert "cancelled" in ok(cli(db, "show", run_id)).stdout
    one_line_error(cli(db, "resume", run_id), "cancelled", "cannot be resumed")
    one_line_error(cli(db, "cancel", run_id), "cancelled")


def test_cancel_and_fork_record_who_did_it(db: Path) -> None:
    run_id = start(db)["run_id"]
    checkpoint = as_json(cli(db, "history", run_id, "--json"))[0]["id"]
    forked = as_json(cli(db, "fork", run_id, checkpoint, "--by", "olga", "--json"))
    ok(cli(db, "cancel", run_id, "--by", "olga", "--json"))
    (cancel,) = as_json(cli(db, "audit", run_id, "--json"))
    assert (cancel["kind"], cancel["by"], cancel["via"]) == ("cancel", "olga", "cli")
    first = as_json(cli(db, "audit", forked["run_id"], "--json"))[0]
    assert (first["kind"], first["by"], first["via"]) == ("fork", "olga", "cli")
    assert first["answer"]["source_run_id"] == run_id


@pytest.mark.crash
def test_recover_resumes_a_run_whose_process_was_killed(db: Path, project: Path) -> None:
    (project / "crasher.py").write_text(CRASHER)
    (project / "crash").touch()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(project), *sys.path])}
    child = subprocess.run([sys.executable, "crasher.py", str(db)], cwd=project, env=env,
                           capture_output=True, timeout=60)
    assert child.returncode == -9, child.stderr
    (project / "crash").unlink()
    [info] = as_json(cli(db, "runs", "--json"))
    assert info["status"] == "running"
    time.sleep(0.4)  # the dead process's lease expires
    text = ok(cli(db, "recover", f"{MODULE}:workflow")).stdout
    assert "crashed" in text and "waiting" in text
    assert as_json(cli(db, "recover", f"{MODULE}:workflow", "--json")) == {
        "recovered": [], "held": []}
    assert "needed recovery" in ok(cli(db, "recover", f"{MODULE}:workflow")).stdout


# -- graph, validate, db ----------------------------------------------------------------------


def test_graph_prints_mermaid_and_dot(new_db: Path) -> None:
    db = new_db
    mermaid = ok(cli(db, "graph", f"{MODULE}:workflow")).stdout
    assert mermaid.startswith("flowchart") and "research" in mermaid and "approve" in mermaid
    dot = ok(cli(db, "graph", f"{MODULE}:nested", "--format", "dot")).stdout
    assert dot.startswith("digraph") and '"research" -> "legal"' in dot
    structure = as_json(cli(db, "graph", f"{MODULE}:workflow", "--json"))
    assert structure["entry"] == "research" and set(structure["nodes"]) == {"research", "approve"}
    assert not db.exists()  # graph needs no database



FLOW_YAML = textwrap.dedent('''
    name: yaml_publish
    nodes:
      - {id: research, agent_name: research, is_entry: true}
      - {id: approve, agent_name: approve, is_exit: true}
    connections:
      - {source_id: research, target_id: approve}
''')

BAD_YAML = textwrap.dedent('''
    name: broken
    nodes:
      - {id: research, agent_name: research, is_entry: true}
    connections:
      - {source_id: research, target_id: nowhere}
      - {source_id: nothing, target_id: research}
''')


def test_validate_checks_a_file_and_says_when_agents_were_not_checked(
        db: Path, project: Path) -> None:
    (project / "flow.yaml").write_text(FLOW_YAML)
    result = ok(cli(db, "validate", "flow.yaml"))
    assert "'yaml_publish' is valid" in result.stdout
    assert "not checked" in result.stdout
    data = as_json(cli(db, "validate", "flow.yaml", "--registry", f"{MODULE}:registry", "--json"))
    assert data["valid"] is True and data["nodes"] == ["approve", "research"]
    assert data["notes"] == []


def test_validate_lists_every_problem_of_an_invalid_file(db: Path, project: Path) -> None:
    (project / "bad.yaml").write_text(BAD_YAML)
    result = cli(db, "validate", "bad.yaml", "--registry", f"{MODULE}:registry")
    one_line_error(result, "bad.yaml is invalid")
    assert "nowhere" in result.stdout and "nothing" in result.stdout
    data = json.loads(cli(db, "validate", "bad.yaml", "--json").stdout)
    assert data["valid"] is False and len(data["problems"]) >= 2


def test_graph_of_a_declarative_file(db: Path, project: Path) -> None:
    (project / "flow.yaml").write_text(FLOW_YAML)
    out = ok(cli(db, "graph", "flow.yaml", "--registry", f"{MODULE}:registry")).stdout
    assert "research" in out and "approve" in out


def test_db_upgrade_creates_the_schema_and_prune_removes_old_checkpoints(new_db: Path) -> None:
    db = new_db
    assert "up to date" in ok(cli(db, "db", "upgrade")).stdout
    run_id = start(db)["run_id"]
    ok(cli(db, "respond", run_id, "approve@2#0", "--value", "true", "--json"))
    before = len(as_json(cli(db, "history", run_id, "--json")))
    assert as_json(cli(db, "db", "prune", "--keep-last", "1", "--run", run_id,
                       "--json"))["removed"] == before - 1
    assert len(as_json(cli(db, "history", run_id, "--json"))) == 1
    assert "removed 0 checkpoint(s)" in ok(cli(db, "db", "prune", "--keep-last", "1",
                                               "--older-than-days", "0")).stdout
    one_line_error(cli(db, "db", "prune"), "--keep-last")
    one_line_error(cli(db, "db", "prune", "--keep-last", "1", "--run", "nope"), "no run")


# -- bad input: one line, non-zero exit, no traceback -----------------------------------------


@pytest.mark.parametrize("args", [
    ["show", "nope"], ["history", "nope"], ["resume", "nope"], ["cancel", "nope"],
    ["respond", "nope", "approve@2#0", "--value", "true"], ["fork", "nope", "cp"],
    ["diff", "nope", "a", "b"],
])
def test_an_unknown_run_is_one_line(db: Path, args: list[str]) -> None:
    start(db)
    one_line_error(cli(db, *args), "no run with id 'nope'")


def test_an_unknown_request_is_one_line_and_lists_the_pending_ones(db: Path) -> None:
    run_id = start(db)["run_id"]
    one_line_error(cli(db, "respond", run_id, "approve@9#9", "--value", "true"),
                   "no pending request 'approve@9#9'", "pending: approve@2#0")
    assert as_json(cli(db, "show", run_id, "--json"))["snapshot"]["status"] == "waiting"


@pytest.mark.parametrize(("option", "args"), [
    ("--value", ["respond", "RUN", "approve@2#0", "--value", "{yes"]),
    ("--input", ["run", f"{MODULE}:workflow", "--input", "{'topic': 1}"]),
    ("--update", ["fork", "RUN", "CP", "--update", "[1,"]),
])
def test_malformed_json_is_one_line(db: Path, option: str, args: list[str]) -> None:
    run_id = start(db)["run_id"]
    args = [run_id if a == "RUN" else a for a in args]
    one_line_error(cli(db, *args), f"{option} is not valid JSON")


def test_input_that_is_not_an_object_or_does_not_fit_the_schema_is_one_line(db: Path) -> None:
    one_line_error(cli(db, "run", f"{MODULE}:workflow", "-i", "[1]"), "must be a JSON object")
    one_line_error(cli(db, "run", f"{MODULE}:workflow", "-i", '{"nope": 1}'),
                   "input does not fit Draft")
    one_line_error(cli(db, "run", f"{MODULE}:workflow", "-i", "@missing.json"),
                   "cannot read missing.json")


def test_a_value_that_fails_the_schema_prints_the_schema_and_writes_nothing(db: Path) -> None:
    run_id = start(db)["run_id"]
    history = as_json(cli(db, "history", run_id, "--json"))
    line = one_line_error(cli(db, "respond", run_id, "approve@2#0", "--value", '"yes"'),
                          "answer to request 'approve@2#0' is invalid")
    assert 'expected JSON schema: {"type":"boolean"}' in line
    assert as_json(cli(db, "history", run_id, "--json")) == history
    assert len(as_json(cli(db, "inbox", "--json"))) == 1


@pytest.mark.parametrize(("target", "message"), [
    ("nomodule:workflow", "cannot import 'nomodule'"),
    (f"{MODULE}:missing", f"module '{MODULE}' has no attribute 'missing'"),
    (f"{MODULE}:answer", "is not a durable_flow Workflow"),
    (f"{MODULE}:builder", "is a WorkflowBuilder"),
    ("no-colon", "is not a MODULE:WORKFLOW reference"),
    ("../evil:x", "is not a MODULE:WORKFLOW reference"),
])
def test_an_unknown_module_workflow_is_one_line(new_db: Path, target: str, message: str) -> None:
    db = new_db
    one_line_error(cli(db, "run", target), message)
    one_line_error(cli(db, "graph", target), message)
    one_line_error(cli(db, "recover", target), message)
    assert not db.exists()


def test_a_module_that_fails_to_import_is_one_line(db: Path, project: Path) -> None:
    (project / "brokenmod.py").write_text("raise ValueError('bad\\nconfig')\n")
    one_line_error(cli(db, "run", "brokenmod:workflow"), "importing 'brokenmod' failed",
                   "ValueError: bad config")
    sys.modules.pop("brokenmod", None)


def test_a_run_not_started_by_the_cli_needs_workflow(db: Path, project: Path) -> None:
    import asyncio

    from durable_flow import Runtime
    from durable_flow.store.sqlite._sqlite import SqliteStore

    sys.path.insert(0, str(project))
    from cliflows import workflow  # type: ignore[import-not-found]

    async def go() -> str:
        async with Runtime(SqliteStore(db)) as rt:
            return (await rt.run(workflow, {"topic": "api"})).run_id

    run_id = asyncio.run(go())
    one_line_error(cli(db, "resume", run_id), "no recorded workflow", "--workflow")
    data = as_json(cli(db, "respond", run_id, "approve@2#0", "--value", "true",
                       "--workflow", f"{MODULE}:workflow", "--json"))
    assert data["status"] == "completed"


def test_database_errors_are_one_line(project: Path) -> None:
    missing = project / "missing.db"
    one_line_error(cli(missing, "runs"), "no database at")
    assert not missing.exists()
    one_line_error(cli(project / "nodir" / "x.db", "run", f"{MODULE}:workflow"),
                   "no directory")
    line = one_line_error(CliRunner().invoke(app, ["--db", "postgresql://u:secret@127.0.0.1:1/db",
                                                   "runs"]),
                          "cannot connect to PostgreSQL at postgresql://u:***@127.0.0.1:1/db")
    assert "secret" not in line
    one_line_error(CliRunner().invoke(app, ["--db", "mysql://h/db", "runs"]), "unsupported")
    (project / "junk.db").write_text("this is not a database " * 100)
    one_line_error(cli(project / "junk.db", "runs"))


def test_sqlite_urls_name_files(project: Path) -> None:
    ok(CliRunner().invoke(app, ["--db", "sqlite:///url.db", "run", f"{MODULE}:workflow",
                                "--json"]))
    assert (project / "url.db").exists()
    assert parse_db("sqlite:////abs/x.db") == ("sqlite", "/abs/x.db")
    assert parse_db("plain.db") == ("sqlite", "plain.db")
    assert parse_db("postgresql+asyncpg://h/db") == ("postgresql", "postgresql+asyncpg://h/db")
    with pytest.raises(CliError):
        parse_db("sqlite://")


def test_a_postgresql_url_runs_answers_and_lists_runs_on_postgresql(project: Path) -> None:
    with fresh_database() as dsn:
        def pg(*args: str) -> Result:
            return CliRunner().invoke(app, ["--db", dsn, *args])

        assert "up to date" in ok(pg("db", "upgrade")).stdout
        run_id = as_json(pg("run", f"{MODULE}:workflow", "--input", '{"topic": "pg"}',
                            "--json"))["run_id"]
        assert [(r["run_id"], r["status"]) for r in as_json(pg("runs", "--json"))] == [
            (run_id, "waiting")]
        done = as_json(pg("respond", run_id, "approve@2#0", "--value", "true", "--json"))
        assert (done["status"], done["state"]["approved"]) == ("completed", True)
        assert run_id in ok(pg("runs", "--status", "completed")).stdout


@pytest.mark.process
def test_a_worker_and_the_inbox_on_postgresql(project: Path) -> None:
    """``durable-flow --db postgresql://... worker`` runs a submitted run; ``inbox`` lists its request."""
    sys.path.insert(0, str(project))
    flows = importlib.import_module(MODULE)
    with fresh_database() as dsn:
        def pg(*args: str) -> Result:
            return CliRunner().invoke(app, ["--db", dsn, *args])

        async def submit() -> str:
            async with Runtime(PostgresStore(dsn, max_size=1)) as rt:
                return (await rt.submit(flows.workflow, {"topic": "fleet"})).run_id

        ok(pg("db", "upgrade"))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(project), *sys.path])}
        log = project / "worker.log"
        with log.open("w") as out:
            worker = subprocess.Popen(
                [sys.executable, "-m", "durable_flow", "--db", dsn, "worker",
                 f"{MODULE}:workflow", "--poll-interval", "30"],
                cwd=project, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            while " serving " not in log.read_text():
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
            run_id = asyncio.run(submit())
            deadline = time.monotonic() + 15
            while as_json(pg("runs", "--json"))[0]["status"] != "waiting":
                assert time.monotonic() < deadline, "the worker did not run the submitted run"
                time.sleep(0.1)
            [item] = as_json(pg("inbox", "--json"))
            assert (item["run_id"], item["id"]) == (run_id, "approve@2#0")
            assert "approve@2#0" in ok(pg("inbox")).stdout
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=30)
        text = log.read_text()
        assert worker.returncode == 0, text
        assert "serving publish@1 on postgresql://" in text and "after 1 execution(s)" in text


def test_debug_shows_the_traceback(db: Path) -> None:
    start(db)
    result = CliRunner().invoke(app, ["--db", str(db), "--debug", "show", "nope"])
    assert result.exit_code == 1
    assert type(result.exception).__name__ == "RunNotFoundError"


def test_log_json_writes_engine_lines_with_run_node_and_superstep(db: Path,
                                                                  project: Path) -> None:
    (project / "broken").touch()
    result = cli(db, "--log-json", "run", f"{MODULE}:workflow", "--run-id", "r1", "--json")
    assert result.exit_code == 1
    json.loads(result.stdout)  # stdout stays pure JSON
    logs = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    events = [entry["event"] for entry in logs]
    assert events == ["run_started", "node_retrying", "node_failed", "run_failed"]
    for entry in logs:
        assert entry["run_id"] == "r1"
    for entry in logs[1:3]:
        assert entry["node"] == "research" and entry["superstep"] == 1
    assert "Traceback" in logs[2]["exception"]  # the failed node's, in the JSON line
    assert result.stderr.splitlines()[-1].startswith("error: run r1 failed")


def test_version_and_help(db: Path) -> None:
    assert ok(CliRunner().invoke(app, ["--version"])).stdout.startswith("durable-flow ")
    help_text = ok(CliRunner().invoke(app, ["--help"])).stdout
    for command in ("run", "runs", "show", "history", "diff", "inbox", "respond", "resume",
                    "fork", "cancel", "recover", "graph", "validate", "db"):
        assert command in help_text
