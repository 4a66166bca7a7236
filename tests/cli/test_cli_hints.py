"""What the CLI suggests a user types next is right: answers that fit, who answers, supersteps."""

from __future__ import annotations

import json
import shlex
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from clikit import cli, project_db
from typer.testing import CliRunner

from durable_flow.cli import app

MODULE = "hintflows"

FLOWS = textwrap.dedent('''
    from pydantic import BaseModel, Field

    from durable_flow import END, Blackboard, WorkflowBuilder

    class Verdict(BaseModel):
        approve: bool
        amount: int = Field(ge=10)
        note: str = ""

    class Claim(Blackboard):
        amount: int = 0
        verdict: Verdict | None = None

    async def check(state, ctx):
        return {"amount": 40}

    async def decide(state, ctx):
        v = await ctx.request({"question": "pay?"}, response_type=Verdict, assignees=["fay"])
        return {"verdict": v}

    b = WorkflowBuilder("claims", state=Claim)
    b.add_node("check", check)
    b.add_node("decide", decide)
    b.set_entry("check")
    b.add_edge("check", "decide")
    b.add_edge("decide", END)
    workflow = b.build()
''')


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sqlite_at_head: Path) -> Iterator[Path]:
    monkeypatch.setenv("COLUMNS", "250")
    yield from project_db(tmp_path, monkeypatch, MODULE, FLOWS, sqlite_at_head)


def test_run_suggests_an_answer_that_fits_and_who_gives_it(db: Path) -> None:
    out = cli(db, "run", f"{MODULE}:workflow", "--run-id", "c1").stdout
    line = next(x.strip() for x in out.splitlines() if x.strip().startswith("durable-flow "))
    args = shlex.split(line)[1:]
    value = json.loads(args[args.index("--value") + 1])
    assert value == {"approve": True, "amount": 10}  # the required fields, each valid
    assert args[args.index("--by") + 1] == "fay"
    answered = CliRunner().invoke(app, args)  # the suggestion, as printed, is accepted
    assert answered.exit_code == 0, answered.output
    shown = json.loads(cli(db, "show", "c1", "--json").stdout)
    assert shown["snapshot"]["status"] == "completed"


def test_run_and_show_agree_on_the_superstep_a_run_waits_in(db: Path) -> None:
    out = cli(db, "run", f"{MODULE}:workflow", "--run-id", "c2").stdout
    assert "waiting in superstep 2" in out
    assert "decide@2#0" in out
    shown = cli(db, "show", "c2").stdout
    assert "1 committed; waiting in superstep 2" in shown
