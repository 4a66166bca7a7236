"""Damaged payloads on MemoryStore: reading them raises CheckpointCorruptedError, and a
failing call writes nothing.

The memory counterpart of ``test_damaged_rows`` (same scenario, calls and
rules, see ``damagekit``): each case spoils one stored payload (a channel
value, a log chunk, a task write, a step result, a request's payload,
response schema or answer) or removes one entry, on a deep copy of the store.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from damagekit import (
    BLOB_KINDS,
    MISSING,
    READS,
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

from durable_flow import (
    CheckpointNotFoundError,
    InvalidInputError,
    MemoryStore,
    Runtime,
    UnknownRequestError,
)


def _memory_rows(store: MemoryStore) -> dict[str, list[Any]]:
    """The store's data as rows that start with their run id, like the SQL tables."""
    return {
        "runs": [(r.run_id, repr(r)) for r in store._runs.values()],
        "checkpoints": [(m.run_id, m.id, repr(m)) for m in store._checkpoints.values()]
        + [(k[0], "thread", repr((k, v))) for k, v in store._threads.items()],
        **{name: [(k[0], repr((k, v))) for k, v in table.items()] for name, table in (
            ("channel_values", store._values), ("log_chunks", store._appends),
            ("task_writes", store._task_writes), ("steps", store._steps),
            ("requests", store._requests))},
    }


@dataclass(frozen=True)
class MemoryCell:
    """One stored payload of a MemoryStore: read it, replace it, or delete it (None)."""

    label: str
    run: str
    read: Callable[[MemoryStore, Facts], bytes | None]
    write: Callable[[MemoryStore, Facts, bytes | None], None]


Where = Callable[[MemoryStore, Facts], tuple[dict[Any, Any], Any]]


def _in_dict(label: str, run: str, where: Where) -> MemoryCell:
    def read(store: MemoryStore, f: Facts) -> bytes | None:
        table, key = where(store, f)
        return table[key]  # type: ignore[no-any-return]

    def write(store: MemoryStore, f: Facts, data: bytes | None) -> None:
        table, key = where(store, f)
        if data is None:
            del table[key]
        else:
            table[key] = data

    return MemoryCell(label, run, read, write)


def _record(label: str, run: str, where: Where, attr: str) -> MemoryCell:
    def read(store: MemoryStore, f: Facts) -> bytes | None:
        table, key = where(store, f)
        return getattr(table[key], attr)  # type: ignore[no-any-return]

    def write(store: MemoryStore, f: Facts, data: bytes | None) -> None:
        table, key = where(store, f)
        if data is None:
            del table[key]
        else:
            table[key] = dataclasses.replace(table[key], **{attr: data})

    return MemoryCell(label, run, read, write)


def _chunk(label: str, run: str, thread: Callable[[Facts], str], seq: int, channel: str
           ) -> MemoryCell:
    def find(store: MemoryStore, f: Facts) -> tuple[list[Any], int]:
        chunks = store._appends[(run, thread(f))]
        return chunks, next(i for i, c in enumerate(chunks) if c[:2] == (seq, channel))

    def read(store: MemoryStore, f: Facts) -> bytes | None:
        chunks, at = find(store, f)
        return chunks[at][2]  # type: ignore[no-any-return]

    def write(store: MemoryStore, f: Facts, data: bytes | None) -> None:
        chunks, at = find(store, f)
        if data is None:
            del chunks[at]
        else:
            chunks[at] = (seq, channel, data)

    return MemoryCell(label, run, read, write)


def _drop_head(store: MemoryStore, f: Facts, data: bytes | None) -> None:
    head = f.heads["A"]
    del store._checkpoints[head]
    store._threads[("A", "")].remove(head)


MEMORY_CELLS = [
    _in_dict("value A count@1", "A", lambda s, f: (s._values, ("A", "", "count", 1))),
    _in_dict("value A sub q@0", "A", lambda s, f: (s._values, ("A", f"{f.heads['A']}/sub", "q", 0))),
    _in_dict("value D topic@1", "D", lambda s, f: (s._values, ("D", "", "topic", 1))),
    _chunk("log A notes@1", "A", lambda f: "", 1, "notes"),
    _chunk("log A history:research@1", "A", lambda f: "", 1, "history:research"),
    _chunk("log A sub messages@0", "A", lambda f: f"{f.heads['A']}/sub", 0, "messages"),
    _record("task write A side", "A",
            lambda s, f: (s._task_writes[("A", f.heads["A"])], "side"), "data"),
    _in_dict("step A fetch", "A", lambda s, f: (s._steps[("A", f.inputs["A"], "research")], "fetch")),
    _in_dict("step A lookup", "A", lambda s, f: (s._steps[("A", f.heads["A"], "ask")], "lookup")),
    *[_record(f"request A {rid} {attr}", "A", lambda s, f, rid=rid: (s._requests, ("A", rid)), attr)
      for rid, attrs in (("ask@2#0", ("payload", "response_schema", "answer")),
                         ("ask@2#1", ("payload", "response_schema")),
                         ("sub@2/inner_ask@1#0", ("payload",)))
      for attr in attrs],
]
MEMORY_HEAD = MemoryCell("head checkpoint A", "A", lambda s, f: None, _drop_head)


@dataclass(frozen=True)
class MemoryCase:
    """One MemoryStore payload damaged, or one entry removed."""

    cell: MemoryCell
    kind: str

    def __str__(self) -> str:
        return f"{self.cell.label}-{self.kind}"

    def apply(self, store: MemoryStore, facts: Facts) -> None:
        if self.kind == MISSING:
            self.cell.write(store, facts, None)
            return
        table = "log_chunks" if self.cell.label.startswith("log") else "memory"
        new = damage(self.kind, table, self.cell.read(store, facts))
        self.cell.write(store, facts, new if isinstance(new, bytes) else None)

    def extra_errors(self) -> tuple[type[BaseException], ...]:
        """Errors the damage makes legitimate, as for :meth:`Case.extra_errors`."""
        if "answer" in self.cell.label:
            return (UnknownRequestError, InvalidInputError)
        if self.kind != MISSING:
            return ()
        if "request" in self.cell.label:
            return (UnknownRequestError,)
        return (CheckpointNotFoundError,) if "checkpoint" in self.cell.label else ()


MEMORY_CASES = [MemoryCase(cell, kind) for cell in MEMORY_CELLS
                for kind in (*BLOB_KINDS[:4], MISSING)
                if not (kind == MISSING and "request" in cell.label and "payload" not in cell.label)]
MEMORY_CASES.append(MemoryCase(MEMORY_HEAD, MISSING))


async def _memory_calls(template: MemoryStore, calls: dict[str, Any], facts: Facts, run: str,
                        damage_of: MemoryCase | None) -> list[Outcome]:
    store = copy.deepcopy(template)
    if damage_of is not None:
        damage_of.apply(store, facts)
    outcomes = []
    async with Runtime(store) as rt:
        for name, call in calls.items():
            before = _memory_rows(store)
            error: BaseException | None = None
            try:
                await call(rt, facts, run)
            except Exception as exc:
                error = exc
            outcomes.append(Outcome(name, error, table_changes(before, _memory_rows(store))))
    return outcomes


async def run_memory(template: MemoryStore, facts: Facts, run: str,
                     case: MemoryCase | None) -> list[Outcome]:
    """Every call about ``run`` on damaged copies: the reads on one, each write on its own."""
    outcomes = await _memory_calls(template, READS, facts, run, case)
    for name, call in WRITES.items():
        outcomes += await _memory_calls(template, {name: call}, facts, run, case)
    return outcomes


@pytest.fixture(scope="module")
def memory_scenario() -> Scenario:
    async def make() -> Scenario:
        store = MemoryStore()
        async with Runtime(store) as rt:
            facts = await build(rt)
        baseline = {}
        for run in facts.workflows:
            outcomes = await run_memory(store, facts, run, None)
            baseline[run] = {o.call: type(o.error) if o.error else None for o in outcomes}
        return Scenario(facts, store, baseline)

    return asyncio.run(make())


@pytest.mark.parametrize("case", MEMORY_CASES, ids=str)
async def test_a_damaged_memory_payload_is_reported_and_failing_calls_change_nothing(
    case: MemoryCase, memory_scenario: Scenario,
) -> None:
    facts = memory_scenario.facts
    run = case.cell.run
    outcomes = await run_memory(memory_scenario.template, facts, run, case)
    conclude(judge(outcomes, run, facts, memory_scenario.baseline[run], case.extra_errors()))


def test_the_undamaged_memory_scenario_fails_only_on_misuse(memory_scenario: Scenario) -> None:
    assert undamaged_errors(memory_scenario) == expected_undamaged_errors(memory_scenario.facts)
