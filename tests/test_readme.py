"""Every code block in README.md runs.

Python blocks are executed in order in one namespace, in a temporary
directory (and once more on the database they left: the tour can be run
again); console blocks of ``durable-flow`` commands run through the CLI
against the database the Python blocks left. The quick-start ``make`` block
is what CI itself runs (``.ci/run`` calls ``make test``) and what
``test_examples.py`` runs for ``make demo`` (``examples/showcase.py``).
"""

from __future__ import annotations

import asyncio
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from durable_flow import RunStatus, Runtime, SqliteStore
from durable_flow.cli import app

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def blocks(lang: str) -> list[str]:
    return [body for kind, body in BLOCK.findall(README.read_text()) if kind == lang]


def test_readme_has_the_quick_start_commands() -> None:
    [quick, *_] = blocks("console")
    assert "make demo" in quick and "make test" in quick


def run_python_blocks() -> None:
    """Execute the README's Python blocks in order, in one fresh namespace."""
    namespace: dict[str, object] = {"__name__": "readme"}
    python = blocks("python")
    assert python, "README lost its tour"
    for body in python:
        exec(compile(body, str(README), "exec", dont_inherit=True), namespace)


async def tour_record() -> tuple[list[tuple[str, RunStatus]], int]:
    """The tour's run in its database, and how many checkpoints it has.

    (The README's worker example submits runs of its own with fresh ids.)
    """
    async with Runtime(SqliteStore("runs.db")) as rt:
        runs = [(run.run_id, run.status) for run in await rt.list_runs()
                if run.run_id == "tour"]
        return runs, len(await rt.history("tour"))


def test_readme_python_and_cli_blocks_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    run_python_blocks()
    runner = CliRunner()
    commands = [line for body in blocks("console") for line in body.splitlines()
                if line.startswith("durable-flow ")]
    assert commands
    for line in commands:
        result = runner.invoke(app, shlex.split(line)[1:])
        assert result.exit_code == 0, f"{line}: {result.output}"
        assert result.output.strip()


def test_the_tour_says_what_it_did(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    run_python_blocks()
    out = capsys.readouterr().out
    assert "run tour: completed, notes=['about tides'], approved=True" in out


def test_the_tour_runs_again_on_the_database_it_left(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    run_python_blocks()
    first = asyncio.run(tour_record())
    assert first[0] == [("tour", RunStatus.COMPLETED)]
    run_python_blocks()  # the same run_id and input: the completed run is returned as it is
    assert asyncio.run(tour_record()) == first
