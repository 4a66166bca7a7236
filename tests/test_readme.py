"""Every code block in README.md runs.

Python blocks are executed in order in one namespace, in a temporary
directory; console blocks of ``durable-flow`` commands run through the CLI
against the database the Python blocks left. The quick-start ``make`` block
is what CI itself runs (``.ci/run`` calls ``make test``) and what
``test_examples.py`` runs for ``make demo`` (``examples/showcase.py``).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from durable_flow.cli import app

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def blocks(lang: str) -> list[str]:
    return [body for kind, body in BLOCK.findall(README.read_text()) if kind == lang]


def test_readme_has_the_quick_start_commands() -> None:
    [quick, *_] = blocks("console")
    assert "make demo" in quick and "make test" in quick


def test_readme_python_and_cli_blocks_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "readme"}
    python = blocks("python")
    assert python, "README lost its tour"
    for body in python:
        exec(compile(body, str(README), "exec", dont_inherit=True), namespace)
    runner = CliRunner()
    commands = [line for body in blocks("console") for line in body.splitlines()
                if line.startswith("durable-flow ")]
    assert commands
    for line in commands:
        result = runner.invoke(app, shlex.split(line)[1:])
        assert result.exit_code == 0, f"{line}: {result.output}"
        assert result.output.strip()
