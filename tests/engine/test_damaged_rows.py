"""Damaged rows: reading them raises CheckpointCorruptedError, and a failing call writes nothing.

Each case damages one cell (or deletes one row) of a copy of the scenario in
``damagekit`` (a waiting run with a sub-workflow, requests, steps, a task
write, a log field and a node history; a completed run; a fork; a plain
waiting run), then makes every public read and write call about the damaged
run. Each call must

* succeed, or raise the error it raises on the undamaged store, or raise
  ``CheckpointCorruptedError`` naming a run and one of its checkpoints (never
  a bare ``JSONDecodeError``, ``TypeError``, ``KeyError``, ...);
* when it fails, leave every table exactly as it was.

Every case runs on SQLite (a copy of the file, damaged through ``sqlite3``);
on MemoryStore (a copy of its in-memory database, damaged through its
driver's connection: the same rows, the same transaction functions) one
damage of each cell and every missing row.

Run ownership is being made atomic separately; until then three kinds of
failing call still write, and a case whose only problems are these is an
expected failure whose reason names the call and the tables it changed:
``resume`` claims the run (lease epoch, status, answers) before it reads the
head; ``fork`` creates the new run before it decodes the copied state;
``update_state`` takes the lease before it reads the head.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

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
    AuditError,
    CheckpointCorruptedError,
    CheckpointNotFoundError,
    DurableFlowError,
    InvalidInputError,
    MemoryStore,
    RunNotFoundError,
    Runtime,
    SqliteStore,
    UnknownRequestError,
)
from durable_flow.model._records import ErrorInfo
from durable_flow.store._protocols import CheckpointStore
from durable_flow.store.sql._codec import error_json
from durable_flow.store.sql._tables import METADATA

T = TypeVar("T")
KINDS = ["memory", "sqlite"]

# -- the databases -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Db:
    """One copy of the scenario's database: a SQLite file, or a MemoryStore's."""

    path: Path | None = None
    memory: MemoryStore | None = None

    def store(self) -> CheckpointStore:
        """A store on this copy (the MemoryStore itself, or a new SqliteStore on the file)."""
        return self.memory if self.memory is not None else SqliteStore(self.path)  # type: ignore[arg-type]

    async def sql(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` on a connection to this copy, committing what it changed."""
        if self.memory is not None:  # autocommit: each statement commits
            return await self.memory.driver.call(fn)
        conn = sqlite3.connect(self.path)  # type: ignore[arg-type]
        try:
            with conn:
                return fn(conn)
        finally:
            conn.close()

    async def copy(self, path: Path) -> Db:
        """An independent copy (``path``: where a file copy goes)."""
        if self.memory is None:
            shutil.copyfile(self.path, path)  # type: ignore[arg-type]
            return Db(path=path)
        data = await self.sql(lambda conn: conn.serialize())
        copy = MemoryStore()
        await copy.driver.call(lambda conn: conn.deserialize(data))
        return Db(memory=copy)


async def new_db(kind: str, path: Path) -> Db:
    """An empty database of ``kind``."""
    if kind == "memory":
        return Db(memory=MemoryStore())
    return Db(path=path)

# -- the rows ----------------------------------------------------------------------------------

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

    async def apply(self, db: Db, facts: Facts) -> None:
        await db.sql(lambda conn: self._apply(conn, facts))

    def _apply(self, conn: sqlite3.Connection, facts: Facts) -> None:
        where, params = self.row.where(facts)
        if self.column is None:
            changed = conn.execute(f"DELETE FROM {self.row.table} WHERE {where}", params)
        else:
            (old,) = conn.execute(f"SELECT {self.column} FROM {self.row.table} WHERE {where}",
                                  params).fetchone()
            new = damage(self.kind, self.row.table, old)
            changed = conn.execute(
                f"UPDATE {self.row.table} SET {self.column} = ? WHERE {where}", (new, *params))
        assert changed.rowcount == 1, self

    def extra_errors(self) -> tuple[type[BaseException], ...]:
        """Errors the damage makes legitimate (an id that no longer exists, ...)."""
        if self.kind == MISSING:
            return {"runs": (RunNotFoundError,), "requests": (UnknownRequestError,),
                    "checkpoints": (CheckpointNotFoundError,)}.get(self.row.table, ())
        if self.column == "answer":  # an open request now looks answered, or an answered
            # one is not what its decision records (the audit trail stops the resume)
            return (UnknownRequestError, InvalidInputError, AuditError)
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


CASES = _cases()
# MemoryStore keeps its rows in an in-memory SQLite database and reads them through the same
# transaction functions and decoders as SqliteStore: every case runs on SQLite, and on
# MemoryStore one damage of each cell (the first kind of each column) and every missing row.
_ON_MEMORY = {c for c in CASES if c.kind in (TEXT_KINDS[0], MISSING)}
STORE_CASES = [pytest.param("sqlite", c, id=f"sqlite-{c}") for c in CASES] + [
    pytest.param("memory", c, id=f"memory-{c}") for c in CASES if c in _ON_MEMORY]


def _dump_tables(conn: sqlite3.Connection) -> dict[str, list[Any]]:
    return {t: conn.execute(f"SELECT * FROM {t}").fetchall() for t in METADATA.tables}


async def _dump(db: Db) -> dict[str, list[Any]]:
    return await db.sql(_dump_tables)


class Watch:
    """Whether anything was written to a copy since the last look, without reading its rows.

    A SQLite file: ``PRAGMA data_version`` of a connection of the watch's own
    changes whenever another connection (the store's) commits. A MemoryStore:
    its one connection's ``total_changes`` (rows inserted, updated or deleted,
    also in a transaction rolled back: then the rows are compared, and equal).
    Only when it moved are the tables dumped and compared.
    """

    def __init__(self, db: Db) -> None:
        self.db = db
        self.conn = sqlite3.connect(db.path) if db.memory is None else None  # type: ignore[arg-type]

    async def mark(self) -> int:
        if self.conn is not None:
            return int(self.conn.execute("PRAGMA data_version").fetchone()[0])
        return int(await self.db.sql(lambda conn: conn.total_changes))

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


async def _calls(db: Db, calls: dict[str, Any], facts: Facts, run: str,
                 rows: dict[str, list[Any]] | None = None) -> list[Outcome]:
    """Each call on ``db``, in turn, with the tables it changed (``rows``: ``db``'s, if known)."""
    outcomes = []
    watch = Watch(db)
    try:
        seen = await watch.mark()
        state = rows if rows is not None else await _dump(db)
        async with Runtime(db.store()) as rt:
            for name, call in calls.items():
                if (now := await watch.mark()) != seen:  # the store wrote as it opened
                    seen, state = now, await _dump(db)
                error: BaseException | None = None
                try:
                    await call(rt, facts, run)
                except Exception as exc:
                    error = exc
                changes: dict[str, Any] = {}
                if (now := await watch.mark()) != seen:
                    after = await _dump(db)
                    seen, changes, state = now, table_changes(state, after), after
                outcomes.append(Outcome(name, error, changes))
    finally:
        watch.close()
    return outcomes


async def run_calls(db: Db, tmp: Path, facts: Facts, run: str) -> list[Outcome]:
    """Every call about ``run``: the reads on one copy, each write on its own copy."""
    rows = await _dump(db)  # every copy starts as ``db`` is
    outcomes = await _calls(await db.copy(tmp / "reads.db"), READS, facts, run, rows)
    for i, (name, call) in enumerate(WRITES.items()):
        outcomes += await _calls(await db.copy(tmp / f"write{i}.db"), {name: call}, facts, run,
                                 rows)
    return outcomes


#: The undamaged scenario of each kind of store, built once per test process: pytest
#: sets a module-scoped fixture up again for each test parametrized through it
#: indirectly with its own ids, and a scenario takes about a second to build.
_SCENARIOS: dict[str, Scenario] = {}


@pytest.fixture(params=KINDS)
def scenario(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
             ) -> Scenario:
    """The undamaged scenario on one kind of store; ``template`` is its :class:`Db`.

    Shared by every test of the process: each copies the template before it
    changes anything.
    """
    kind = request.param
    if kind not in _SCENARIOS:
        _SCENARIOS[kind] = asyncio.run(_build(kind, tmp_path_factory.mktemp("damaged")))
    return _SCENARIOS[kind]


async def _build(kind: str, tmp: Path) -> Scenario:
    template = await new_db(kind, tmp / "template.db")
    async with Runtime(template.store()) as rt:
        facts = await build(rt)
    baseline = {}
    for run in facts.workflows:
        outcomes = await run_calls(template, tmp, facts, run)
        baseline[run] = {o.call: type(o.error) if o.error else None for o in outcomes}
    return Scenario(facts, template, baseline)


@pytest.mark.parametrize(("scenario", "case"), STORE_CASES, indirect=["scenario"])
async def test_a_damaged_cell_is_reported_and_failing_calls_change_nothing(
    case: Case, scenario: Scenario, tmp_path: Path,
) -> None:
    facts = scenario.facts
    db = await scenario.template.copy(tmp_path / "damaged.db")
    await case.apply(db, facts)
    run = case.row.run(facts)
    outcomes = await run_calls(db, tmp_path, facts, run)
    conclude(judge(outcomes, run, facts, scenario.baseline[run], case.extra_errors()))


def test_the_undamaged_scenario_reads_and_writes_without_errors_except_misuse(
    scenario: Scenario,
) -> None:
    facts = scenario.facts
    assert undamaged_errors(scenario) == expected_undamaged_errors(facts)
    assert len(CASES) > 150


# -- focused behaviours ----------------------------------------------------------------------------


async def test_damage_in_a_nested_head_stops_a_resume_before_a_sibling_saves_its_write(
    scenario: Scenario, tmp_path: Path,
) -> None:
    facts = scenario.facts
    db = await scenario.template.copy(tmp_path / "nested.db")
    await Case(ROWS_BY_LABEL["A sub q@0"], "data", "invalid JSON").apply(db, facts)
    before = await _dump(db)
    async with Runtime(db.store()) as rt:
        with pytest.raises(CheckpointCorruptedError) as err:
            await rt.resume(facts.workflows["A"], "A", responses={
                "ask@2#1": "because", "sub@2/inner_ask@1#0": True})
    assert (err.value.run_id, err.value.checkpoint_id) == ("A", facts.sub_heads["A"])
    assert "'q'" in err.value.reason
    after = await _dump(db)
    for table in ("task_writes", "steps", "checkpoints", "channel_values", "log_chunks"):
        assert after[table] == before[table], table


async def test_a_damaged_step_result_raises_from_resume_instead_of_failing_the_node(
    scenario: Scenario, tmp_path: Path,
) -> None:
    facts = scenario.facts
    db = await scenario.template.copy(tmp_path / "step.db")
    await Case(ROWS_BY_LABEL["A lookup"], "data", "unknown tag").apply(db, facts)
    async with Runtime(db.store()) as rt:
        with pytest.raises(CheckpointCorruptedError, match="martian") as err:
            await rt.resume(facts.workflows["A"], "A", responses={
                "ask@2#1": "because", "sub@2/inner_ask@1#0": True})
        assert (err.value.run_id, err.value.checkpoint_id) == ("A", facts.heads["A"])
        assert "'lookup'" in err.value.reason
        info = await rt.get_run("A")
    assert info.error is None and info.status.value != "failed"


@pytest.mark.parametrize("column", ["superstep", "seq", "size"])
async def test_a_counter_damaged_into_text_stops_resume_and_fork_before_anything_is_written(
    column: str, scenario: Scenario, tmp_path: Path,
) -> None:
    facts = scenario.facts
    db = await scenario.template.copy(tmp_path / "counter.db")
    head = facts.heads["D"]
    await db.sql(lambda conn: conn.execute(
        f"UPDATE checkpoints SET {column} = 'x' WHERE run_id = ? AND checkpoint_id = ?",
        ("D", head)))
    before = await _dump(db)
    async with Runtime(db.store()) as rt:
        for call in (lambda: rt.resume(facts.workflows["D"], "D",
                                       responses={"approve@2#0": True}),
                     lambda: rt.fork(facts.workflows["D"], "D", head)):
            with pytest.raises(CheckpointCorruptedError, match=column) as err:
                await call()
            assert (err.value.run_id, err.value.checkpoint_id) == ("D", head)
            assert await _dump(db) == before  # no answer, no status, no orphan fork


# every column of a checkpoint row the loads read, edited into another value of its type
SEALED = ["thread", "namespace", "parent_id", "seq", "superstep", "created_at", "status",
          "source", "nodes", "routing_reason", "next_tasks", "joins", "value_versions",
          "log_lengths", "error", "size", "task_args", "parked", "digests"]


@pytest.mark.parametrize("column", SEALED)
async def test_a_cell_changed_into_another_valid_value_is_damage_every_read_reports(
    column: str, scenario: Scenario, tmp_path: Path,
) -> None:
    """A digit changed in an item count (still valid JSON) never loads as a shorter state."""
    facts = scenario.facts
    db = await scenario.template.copy(tmp_path / "valid.db")
    head = facts.heads["A"]

    def change(conn: sqlite3.Connection) -> None:
        (old,) = conn.execute(f"SELECT {column} FROM checkpoints WHERE run_id = ? AND "
                              "checkpoint_id = ?", ("A", head)).fetchone()
        conn.execute(f"UPDATE checkpoints SET {column} = ? WHERE run_id = ? AND "
                     "checkpoint_id = ?", (other_value(column, old), "A", head))

    await db.sql(change)
    before = await _dump(db)
    async with Runtime(db.store()) as rt:
        for call in (lambda: rt.get_state("A"),
                     lambda: rt.resume(facts.workflows["A"], "A"),
                     lambda: rt.fork(facts.workflows["A"], "A", head)):
            with pytest.raises(CheckpointCorruptedError, match="does not match its digest") as err:
                await call()
            assert (err.value.run_id, err.value.checkpoint_id) == ("A", head)
            assert await _dump(db) == before


def other_value(column: str, old: Any) -> Any:
    """A value of ``column``'s own type other than ``old``: it still reads, it is not the row."""
    if isinstance(old, int):
        return old + 1
    if column == "status":
        return "completed" if old != "completed" else "waiting"
    if column == "source":
        return "fork" if old != "fork" else "loop"
    if old is None:  # a NULL cell given a value its decoder reads
        return {"error": json.dumps(error_json_of("ValueError", "planted")),
                "task_args": '{"ghost": 1}', "parked": "[]",
                "routing_reason": "planted", "parent_id": "planted"}[column]
    if not old.startswith(("[", "{")):  # plain text
        return old + "x"
    data = json.loads(old)
    if isinstance(data, dict):
        if not data:
            return json.dumps({"ghost": 1} if column != "joins" else {"ghost": []})
        key = sorted(data)[0]
        value = data[key]
        if isinstance(value, int):
            data[key] = value + 1
        elif isinstance(value, list) and value and isinstance(value[0], int):
            data[key] = [value[0] + 1, *value[1:]]  # a digest's checksum
        else:
            data["ghost"] = value
        return json.dumps(data)
    return json.dumps(data[:-1] if data else ["ghost"])


def error_json_of(kind: str, message: str) -> Any:
    """An ``ErrorInfo`` as the ``error`` columns hold it."""
    return json.loads(error_json(ErrorInfo(kind, message)) or "null")


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
    name: str, scenario: Scenario, tmp_path: Path,
) -> None:
    run, call = BAD_INPUT[name]
    facts = scenario.facts
    outcomes = await _calls(await scenario.template.copy(tmp_path / "bad.db"),
                            {name: lambda rt, f, r: call(rt, f)}, facts, run)
    [outcome] = outcomes
    assert isinstance(outcome.error, DurableFlowError), outcome.error
    conclude(judge(outcomes, run, facts, {name: type(outcome.error)}))
