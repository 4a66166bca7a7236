"""Shared by CLI tests that write a workflow module and run commands on its database."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import forkrun
import pytest
import structlog
from typer.testing import CliRunner, Result

from durable_flow.cli import app


def project_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str,
               source: str, at_head: Path | None = None) -> Iterator[Path]:
    """Write ``module`` into a fresh directory, run there, yield its database path.

    ``at_head`` (the ``sqlite_at_head`` fixture): the database starts as a copy of
    it, already migrated; without it the first command creates the file.
    """
    (tmp_path / f"{module}.py").write_text(source)
    if at_head is not None:
        shutil.copyfile(at_head, tmp_path / "runs.db")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    monkeypatch.delenv("DURABLE_FLOW_DB", raising=False)
    sys.modules.pop(module, None)
    yield tmp_path / "runs.db"
    sys.modules.pop(module, None)
    structlog.reset_defaults()


def cli(db: Path, *args: str) -> Result:
    """Run ``durable-flow --db DB ARGS``; it must succeed."""
    result = CliRunner().invoke(app, ["--db", str(db), *args])
    assert result.exit_code == 0, result.output
    return result


def script(cwd: Path, *args: str, stdin: str | None = None,
           timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run the real console script ``durable-flow ARGS`` in ``cwd`` (its database there).

    ``DURABLE_FLOW_DB`` is ``cwd/runs.db`` unless ``--db`` is given; the
    directory is first on the path, as it would be for a user typing there.
    A process of its own, forked from a server that imported the command
    line's libraries once (``forkrun``): its own arguments, environment,
    folder, stdin, output and exit code.
    """
    env = dict(os.environ, DURABLE_FLOW_DB=str(cwd / "runs.db"), PYTHONPATH=str(cwd),
               NO_COLOR="1", TERM="dumb", COLUMNS="200")
    return forkrun.run([CONSOLE_SCRIPT, *args], env=env, timeout=timeout, cwd=cwd,
                       input=stdin, console=True)


CONSOLE_SCRIPT = Path(sys.executable).parent / "durable-flow"


def one_error_line(proc: subprocess.CompletedProcess[str], code: int, *fragments: str) -> str:
    """The single ``error: ...`` line a refused command prints, with exit ``code``."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    lines = [x for x in (proc.stdout + proc.stderr).splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), (proc.stdout, proc.stderr)
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]
