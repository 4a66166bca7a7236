"""Every example runs, and does what its docstring says."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import forkrun
import pytest
from clikit import script

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic resolves the models' annotations through it
    spec.loader.exec_module(module)
    return module


async def test_approval_rejects_then_publishes_once(tmp_path: Path) -> None:
    approval = load("approval")
    blog = approval.Blog(tmp_path / "blog.txt")
    state = await approval.main(tmp_path / "approval.db", blog)
    # the rejection's comment looped back into the draft that was approved
    assert state.comments == ["shorter"]
    assert "shorter" in state.draft
    assert state.approved and state.url == "https://blog.example/tides"
    # the publish node ran twice (the announcement failed once), the side effect once
    assert blog.announce_attempts == 2
    assert blog.announcements == ["https://blog.example/tides"]
    assert blog.posts() == [f"https://blog.example/tides\t{state.draft}"]


@pytest.mark.process
def test_approval_runs_as_a_script(tmp_path: Path) -> None:
    proc = forkrun.run([EXAMPLES / "approval.py"], cwd=tmp_path, timeout=120, plain=True)
    assert proc.returncode == 0, proc.stderr
    assert "published: https://blog.example/tides" in proc.stdout
    assert (tmp_path / "approval_blog.txt").read_text().count("shorter") == 1


async def test_nested_review_answers_the_deepest_request(tmp_path: Path) -> None:
    assert await load("nested_review").main(tmp_path / "nested.db") is True


async def test_triage_routes_by_summed_urgency() -> None:
    triage = load("triage")
    assert await triage.main("Enterprise checkout is DOWN! outage!!") == "pager"
    assert await triage.main("enterprise question") == "priority"
    assert await triage.main("a small typo") == "backlog"


async def test_retries_then_resume_reruns_only_the_failed_task(tmp_path: Path) -> None:
    attempts = await load("retries").main(tmp_path / "retries.db")
    assert attempts == {"fetch": 3, "slow": 2, "strict": 2}


@pytest.mark.crash
def test_crash_resume_repeats_nothing(tmp_path: Path) -> None:
    proc = forkrun.run([EXAMPLES / "crash_resume.py"], cwd=tmp_path, timeout=120, plain=True)
    assert proc.returncode == 0, proc.stderr
    assert "child exit code: -9" in proc.stdout
    assert "seen = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]" in proc.stdout


@pytest.mark.crash
def test_showcase_demo_kills_resumes_and_finishes(tmp_path: Path) -> None:
    env = {**os.environ, "DEMO_DB": str(tmp_path / "demo.db"), "COLUMNS": "200"}
    proc = forkrun.run([EXAMPLES / "showcase.py"], cwd=tmp_path, timeout=180, env=env,
                       plain=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "SIGKILL" in out and "completed" in out
    log = (tmp_path / "demo.log").read_text().splitlines()
    for fetch in ("archive", "papers", "news"):
        assert log.count(f"{fetch} did its work") == 1, "a committed fetch ran again"
    assert log.count("summarize started") == 2  # killed inside it, then run again
    # every command the demo suggests runs and shows something (no empty inbox)
    suggested = [line.split(" --db ", 1)[1].split(" ", 1)[1] for line in out.splitlines()
                 if "durable-flow --db" in line]
    assert len(suggested) >= 4 and "inbox" not in suggested
    for cmd in suggested:
        shown = script(tmp_path, "--db", str(tmp_path / "demo.db"), *cmd.split())
        assert shown.returncode == 0 and shown.stdout.strip(), (cmd, shown.stderr)


def _map_review(tmp_path: Path, *args: str) -> str:
    proc = forkrun.run([EXAMPLES / "map_review.py", *args], cwd=tmp_path, timeout=300,
                       plain=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "exited with -9" in proc.stdout  # the SIGKILL happened
    assert "still waiting: review[11]@2/approve@2#0, review[15]@2/approve@2#0, " \
           "review[19]@2/approve@2#0" in proc.stdout
    assert "final: completed - 20 reviewed, 1 rejected" in proc.stdout
    log = (tmp_path / "map_review.log").read_text().splitlines()
    assert all(log.count(f"extract contract-{i:02d}") == 1 for i in range(20))
    risky = {3, 7, 11, 15, 19}
    runs = {i: log.count(f"approve review[{i}].approve") for i in range(20)}
    # low risk: once; risky: asked, then answered; review[7] also killed mid-answer
    assert runs == {i: 1 if i not in risky else 3 if i == 7 else 2 for i in range(20)}
    assert log.count("report") == 1
    return proc.stdout


@pytest.mark.crash
def test_map_review_survives_a_sigkill_between_answers_on_sqlite(tmp_path: Path) -> None:
    _map_review(tmp_path)


@pytest.mark.crash
def test_map_review_survives_a_sigkill_between_answers_on_postgresql(tmp_path: Path) -> None:
    from pgdb import fresh_database

    with fresh_database() as dsn:
        _map_review(tmp_path, dsn)
