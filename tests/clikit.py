"""Shared by CLI tests that write a workflow module and run commands on its database."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from typer.testing import CliRunner, Result

from durable_flow.cli import app


def project_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str,
               source: str) -> Iterator[Path]:
    """Write ``module`` into a fresh directory, run there, yield its database path."""
    (tmp_path / f"{module}.py").write_text(source)
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
