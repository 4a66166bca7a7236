"""Damaged rows: reading them raises CheckpointCorruptedError, and a failing call writes nothing.

Each case damages one cell (or deletes one row) of a SQLite copy of the scenario in
``damagekit`` (a waiting run with a sub-workflow, requests, steps, a task
write, a log field and a node history; a completed run; a fork; a plain
waiting run), then makes every public read and write call about the damaged
run. Each call must

* succeed, or raise the error it raises on the undamaged store, or raise
  ``CheckpointCorruptedError`` naming a run and one of its checkpoints (never
  a bare ``JSONDecodeError``, ``TypeError``, ``KeyError``, ...);
* when it fails, leave every table exactly as it was.

Run ownership is being made atomic separately; until then three kinds of
failing call still write, and a case whose only problems are these is an
expected failure whose reason names the call and the tables it changed:
``resume`` claims the run (lease epoch, status, answers) before it reads the
head; ``fork`` creates the new run before it decodes the copied state;
``update_state`` takes the lease before it reads the head.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from damagekit import (
    BLOB_KINDS,
    MISSING,
    READS,
    TEXT_KINDS,
    WRITES,
    Facts,
    Outcome,
    Scenario,
    build,
    conclude,
    damage,
    expected_undamaged_errors,
    judge,
    table_changes,
    undamaged_errors,
)
from sqlalchemy import LargeBinary

from durable_flow import (
    CheckpointCorruptedError,
    CheckpointNotFoundError,
    DurableFlowError,
    InvalidInputError,
    RunNotFoundError,
    Runtime,
    SqliteStore,
    UnknownRequestError,
)
from durable_flow.store.sql._tables import METADATA

# -- the SQLite store --------------------------------------------------------------------------

Where = Callable[[Facts], tuple[str, tuple[Any, ...]]]


def _key(*columns: str) -> Callable[..., Where]:
    def where(*values: Callable[[Facts], Any]) -> Where:
        return lambda f: (" AND ".join(f"{c} = ?" for c in columns), tuple(v(f) for v in values))

    return where


_cp = _key("run_id", "checkpoint_id")
_value = _key("run_id", "thread", "channel", "seq")
_step = _key("run_id", "checkpoint_id", "node", "name")
_request = _key("run_id", "request_id")


def _top(run: str) -> Callable[[Facts], str]:
    return lambda f: run


def _sub(run: str) -> Callable[[Facts], str]:
    return lambda f: f"{f.heads[run]}/sub"


@dataclass(frozen=True)
class Row:
    """One row of the scenario: its table, the run it belongs to, how to find it."""

    table: str
    label: str
    run: Callable[[Facts], str]
    where: Where
    columns: tuple[str, ...]


_A = _top("A")
ROWS = [
    Row("runs", "A", _A, lambda f: ("run_id = ?", ("A",)), ("error", "forked_from")),
    Row("runs", "C (fork)", lambda f: f.fork, lambda f: ("run_id = ?", (f.fork,)),
        ("error", "forked_from")),
    *[Row("checkpoints", label, run, _cp(run, cp), (
        "nodes", "next_tasks", "joins", "value_versions", "log_lengths", "error"))
      for label, run, cp in [
          ("A head", _A, lambda f: f.heads["A"]), ("A input", _A, lambda f: f.inputs["A"]),
          ("A sub head", _A, lambda f: f.sub_heads["A"]),
          ("B head", _top("B"), lambda f: f.heads["B"])]],
    Row("channel_values", "A count@1", _A, _value(_A, _top(""), _top("count"), _top(1)),
        ("data",)),
    Row("channel_values", "A score@0", _A, _value(_A, _top(""), _top("score"), _top(0)),
        ("data",)),
    Row("channel_values", "A sub q@0", _A, _value(_A, _sub("A"), _top("q"), _top(0)), ("data",)),
    # B was resumed twice inside its sub-workflow: each resume moved it to a new
    # top-level checkpoint (seq 2 and 3), so the superstep that wrote approved is seq 4
    Row("channel_values", "B approved@4", _top("B"),
        _value(_top("B"), _top(""), _top("approved"), _top(4)), ("data",)),
    Row("checkpoints", "D head", _top("D"), _cp(_top("D"), lambda f: f.heads["D"]),
        ("next_tasks", "value_versions", "log_lengths")),
    Row("channel_values", "D topic@1", _top("D"),
        _value(_top("D"), _top(""), _top("topic"), _top(1)), ("data",)),
    *[Row("log_chunks", f"A {channel}@{seq}", _A,
          _key("run_id", "thread", "seq", "channel")(_A, thread, _top(seq), _top(channel)),
          ("data",))
      for channel, thread, seq in [("notes", _top(""), 1), ("messages", _top(""), 1),
                                   ("history:research", _top(""), 1),
                                   ("messages", _sub("A"), 0)]],
    Row("task_writes", "A side", _A,
        _key("run_id", "checkpoint_id", "node")(_A, lambda f: f.heads["A"], _top("side")),
        ("data",)),
    Row("steps", "A fetch", _A, _step(_A, lambda f: f.inputs["A"], _top("research"),
                                      _top("fetch")), ("data",)),
    Row("steps", "A lookup", _A, _step(_A, lambda f: f.heads["A"], _top("ask"),
                                       _top("lookup")), ("data",)),
    *[Row("requests", f"{run} {rid}", _top(run), _request(_top(run), _top(rid)),
          ("payload", "response_schema", "answer"))
      for run, rid in [("A", "ask@2#0"), ("A", "ask@2#1"), ("A", "sub@2/inner_ask@1#0"),
                       ("D", "approve@2#0")]],
]

ROWS_BY_LABEL = {row.label: row for row in ROWS}
@dataclass(frozen=True)
class Case:
    """One cell damaged (or one row deleted)."""

    row: Row
    column: str | None
    kind: str

    def __str__(self) -> str:
        where = f"{self.row.table}.{self.column}" if self.column else self.row.table
        return f"{where}[{self.row.label}]-{self.kind}"

    def apply(self, db: Path, facts: Facts) -> None:
        where, params = self.row.where(facts)
        with sqlite3.connect(db) as conn:
            if self.column is None:
                changed = conn.execute(f"DELETE FROM {self.row.table} WHERE {where}", params)
            else:
                (old,) = conn.execute(f"SELECT {self.column} FROM {self.row.table} WHERE {where}",
                                      params).fetchone()
                new = damage(self.kind, self.row.table, old)
                changed = conn.execute(
                    f"UPDATE {self.row.table} SET {self.column} = ? WHERE {where}", (new, *params))
            assert changed.rowcount == 1, self
        conn.close()

    def extra_errors(self) -> tuple[type[BaseException], ...]:
        """Errors the damage makes legitimate (an id that no longer exists, ...)."""
        if self.kind == MISSING:
            return {"runs": (RunNotFoundError,), "requests": (UnknownRequestError,),
                    "checkpoints": (CheckpointNotFoundError,)}.get(self.row.table, ())
        if self.column == "answer":  # an open request now looks answered
            return (UnknownRequestError, InvalidInputError)
        return ()


def _cases() -> list[Case]:
    out = []
    for row in ROWS:
        blob = isinstance(METADATA.tables[row.table].c[row.columns[0]].type, LargeBinary)
        for column in row.columns:
            for kind in BLOB_KINDS if blob else TEXT_KINDS:
                if not (kind == "stored as text" and column == "answer"):
                    out.append(Case(row, column, kind))
        out.append(Case(row, None, MISSING))
    return out


SQLITE_CASES = _cases()


def _dump(db: Path) -> dict[str, list[Any]]:
    with sqlite3.connect(db) as conn:
        dump = {t: conn.execute(f"SELECT * FROM {t}").fetchall() for t in METADATA.tables}
    conn.close()
    return dump


def _copy(src: Path, dst: Path) -> Path:
    shutil.copyfile(src, dst)
    return dst


async def _calls(db: Path, calls: dict[str, Any], facts: Facts, run: str) -> list[Outcome]:
    outcomes = []
    async with Runtime(SqliteStore(db)) as rt:
        for name, call in calls.items():
            before = _dump(db)
            error: BaseException | None = None
            try:
                await call(rt, facts, run)
            except Exception as exc:
                error = exc
            outcomes.append(Outcome(name, error, table_changes(before, _dump(db))))
    return outcomes


async def run_sqlite(db: Path, tmp: Path, facts: Facts, run: str) -> list[Outcome]:
    """Every call about ``run``: the reads on one copy, each write on its own copy."""
    outcomes = await _calls(_copy(db, tmp / "reads.db"), READS, facts, run)
    for i, (name, call) in enumerate(WRITES.items()):
        outcomes += await _calls(_copy(db, tmp / f"write{i}.db"), {name: call}, facts, run)
    return outcomes


@pytest.fixture(scope="module")
def sqlite_scenario(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    tmp = tmp_path_factory.mktemp("damaged")
    template = tmp / "template.db"

    async def make() -> Scenario:
        async with Runtime(SqliteStore(template)) as rt:
            facts = await build(rt)
        baseline = {}
        for run in facts.workflows:
            outcomes = await run_sqlite(template, tmp, facts, run)
            baseline[run] = {o.call: type(o.error) if o.error else None for o in outcomes}
        return Scenario(facts, template, baseline)

    return asyncio.run(make())


@pytest.mark.parametrize("case", SQLITE_CASES, ids=str)
async def test_a_damaged_sqlite_cell_is_reported_and_failing_calls_change_nothing(
    case: Case, sqlite_scenario: Scenario, tmp_path: Path,
) -> None:
    facts = sqlite_scenario.facts
    db = _copy(sqlite_scenario.template, tmp_path / "damaged.db")
    case.apply(db, facts)
    run = case.row.run(facts)
    outcomes = await run_sqlite(db, tmp_path, facts, run)
    conclude(judge(outcomes, run, facts, sqlite_scenario.baseline[run], case.extra_errors()))


def test_the_undamaged_scenario_reads_and_writes_without_errors_except_misuse(
    sqlite_scenario: Scenario,
) -> None:
    facts = sqlite_scenario.facts
    assert undamaged_errors(sqlite_scenario) == expected_undamaged_errors(facts)
    assert len(SQLITE_CASES) > 150


# -- focused behaviours ----------------------------------------------------------------------------


async def test_damage_in_a_nested_head_stops_a_resume_before_a_sibling_saves_its_write(
    sqlite_scenario: Scenario, tmp_path: Path,
) -> None:
    facts = sqlite_scenario.facts
    db = _copy(sqlite_scenario.template, tmp_path / "nested.db")
    Case(ROWS_BY_LABEL["A sub q@0"], "data", "invalid JSON").apply(db, facts)
    before = _dump(db)
    async with Runtime(SqliteStore(db)) as rt:
        with pytest.raises(CheckpointCorruptedError) as err:
            await rt.resume(facts.workflows["A"], "A", responses={
                "ask@2#1": "because", "sub@2/inner_ask@1#0": True})
    assert (err.value.run_id, err.value.checkpoint_id) == ("A", facts.sub_heads["A"])
    assert "'q'" in err.value.reason
    after = _dump(db)
    for table in ("task_writes", "steps", "checkpoints", "channel_values", "log_chunks"):
        assert after[table] == before[table], table


async def test_a_damaged_step_result_raises_from_resume_instead_of_failing_the_node(
    sqlite_scenario: Scenario, tmp_path: Path,
) -> None:
    facts = sqlite_scenario.facts
    db = _copy(sqlite_scenario.template, tmp_path / "step.db")
    Case(ROWS_BY_LABEL["A lookup"], "data", "unknown tag").apply(db, facts)
    async with Runtime(SqliteStore(db)) as rt:
        with pytest.raises(CheckpointCorruptedError, match="martian") as err:
            await rt.resume(facts.workflows["A"], "A", responses={
                "ask@2#1": "because", "sub@2/inner_ask@1#0": True})
        assert (err.value.run_id, err.value.checkpoint_id) == ("A", facts.heads["A"])
        assert "'lookup'" in err.value.reason
        info = await rt.get_run("A")
    assert info.error is None and info.status.value != "failed"


@pytest.mark.parametrize("column", ["superstep", "seq", "size"])
async def test_a_counter_damaged_into_text_stops_resume_and_fork_before_anything_is_written(
    column: str, sqlite_scenario: Scenario, tmp_path: Path,
) -> None:
    facts = sqlite_scenario.facts
    db = _copy(sqlite_scenario.template, tmp_path / "counter.db")
    head = facts.heads["D"]
    with sqlite3.connect(db) as conn:
        conn.execute(f"UPDATE checkpoints SET {column} = 'x' WHERE run_id = ? "
                     "AND checkpoint_id = ?", ("D", head))
    conn.close()
    before = _dump(db)
    async with Runtime(SqliteStore(db)) as rt:
        for call in (lambda: rt.resume(facts.workflows["D"], "D",
                                       responses={"approve@2#0": True}),
                     lambda: rt.fork(facts.workflows["D"], "D", head)):
            with pytest.raises(CheckpointCorruptedError, match=column) as err:
                await call()
            assert (err.value.run_id, err.value.checkpoint_id) == ("D", head)
            assert _dump(db) == before  # no answer, no status, no orphan fork


# -- bad input on an undamaged store -----------------------------------------------------------

BAD_INPUT: dict[str, tuple[str, Any]] = {
    "update_state with an unknown field": ("D", lambda rt, f: rt.update_state(
        f.workflows["D"], "D", {"nope": 1})),
    "update_state with an ill-typed value": ("D", lambda rt, f: rt.update_state(
        f.workflows["D"], "D", {"approved": {"not": "a bool"}})),
    "resume with an ill-typed answer": ("D", lambda rt, f: rt.resume(
        f.workflows["D"], "D", responses={"approve@2#0": "not a bool"})),
    "resume with an answer that cannot be stored": ("D", lambda rt, f: rt.resume(
        f.workflows["D"], "D", responses={"approve@2#0": object()})),
    "resume with an unknown request id": ("D", lambda rt, f: rt.resume(
        f.workflows["D"], "D", responses={"ghost@1#0": True})),
    "resume with another answer to an answered request": ("A", lambda rt, f: rt.resume(
        f.workflows["A"], "A", responses={"ask@2#0": False})),
    "fork from an unknown checkpoint": ("B", lambda rt, f: rt.fork(f.workflows["B"], "B", "nope")),
    "fork with an unknown field": ("B", lambda rt, f: rt.fork(
        f.workflows["B"], "B", f.inputs["B"], update={"nope": 1})),
    "run with input that does not fit": ("A", lambda rt, f: rt.run(
        f.workflows["A"], {"count": "many"}, run_id="new")),
    "run with input that cannot be stored": ("A", lambda rt, f: rt.run(
        f.workflows["A"], {"topic": "\ud800"}, run_id="new")),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUT))
async def test_bad_input_raises_and_changes_nothing(
    name: str, sqlite_scenario: Scenario, tmp_path: Path,
) -> None:
    run, call = BAD_INPUT[name]
    facts = sqlite_scenario.facts
    outcomes = await _calls(_copy(sqlite_scenario.template, tmp_path / "bad.db"),
                            {name: lambda rt, f, r: call(rt, f)}, facts, run)
    [outcome] = outcomes
    assert isinstance(outcome.error, DurableFlowError), outcome.error
    conclude(judge(outcomes, run, facts, {name: type(outcome.error)}))
