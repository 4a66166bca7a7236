"""Per-key run concurrency across ``durable-flow worker`` processes (SQLite and PostgreSQL).

Two workers, four runs at a time each, serve ``keykit:workflow``
(``max_runs_per_key=1``). Runs of two keys and runs without a key are
submitted; the journal's timestamps show that no two runs of one key ever ran
at once, that each key's runs started in the order they were submitted, and
that the other keys' runs went on meanwhile (several calls at one moment).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

import keykit  # noqa: E402
from fleetprocs import Fleet, StoreFactory, fleet, wait_for  # noqa: E402
from limitkit import peak  # noqa: E402
from pgdb import fresh_database  # noqa: E402

from durable_flow import RunStatus, Runtime, SqliteStore  # noqa: E402
from durable_flow.store.postgres._postgres import PostgresStore  # noqa: E402

pytestmark = [pytest.mark.process, pytest.mark.fleet]

#: run ids by key, in submission order (``none``: no key)
RUNS = {"acme": [f"acme-{i}" for i in range(5)], "bolt": [f"bolt-{i}" for i in range(3)],
        "none": [f"none-{i}" for i in range(4)]}


@pytest.fixture
def pg_db() -> Iterator[str]:
    """A database of this test alone."""
    with fresh_database() as dsn:
        yield dsn


async def _submit(make_store: StoreFactory) -> None:
    order = [run_id for i in range(5) for ids in RUNS.values() for run_id in ids[i:i + 1]]
    async with Runtime(make_store()) as rt:
        for run_id in order:  # interleaved: acme-0, bolt-0, none-0, acme-1, ...
            key = run_id.split("-")[0]
            info = await rt.submit(keykit.workflow, {}, run_id=run_id,
                                   concurrency_key=None if key == "none" else key)
            assert info.concurrency_key == (None if key == "none" else key)


async def _completed(make_store: StoreFactory) -> int:
    async with Runtime(make_store()) as rt:
        return sum(r.status is RunStatus.COMPLETED for r in await rt.list_runs())


def start(f: Fleet, name: str) -> None:
    f.spawn(name, ["worker", "keykit:workflow", "--concurrency", "2", "--lease-ttl", "10",
                   "--poll-interval", "0.2", "--grace-period", "5", "--name", name],
            KEY_JOURNAL=str(f.journal))


def run_keys(make_store: StoreFactory, db: str, tmp_path: Path) -> None:
    async def schema() -> None:  # made before two workers open the database
        async with Runtime(make_store()):
            pass

    asyncio.run(schema())
    total = sum(len(ids) for ids in RUNS.values())
    with fleet(db, tmp_path) as f:
        start(f, "k1")
        start(f, "k2")
        f.wait_serving("k1", "k2")
        asyncio.run(_submit(make_store))
        wait_for(lambda: asyncio.run(_completed(make_store)) == total, 120, "every run",
                 interval=0.3)
    calls = keykit.calls(f.journal)
    assert sorted(calls) == sorted(r for ids in RUNS.values() for r in ids)
    for key in ("acme", "bolt"):
        spans = [calls[run_id] for run_id in RUNS[key]]
        assert peak(spans) == 1, (key, spans)  # never two of one key at once
        starts = [s for s, _ in spans]
        assert starts == sorted(starts), (key, spans)  # in submission order
    # the other keys went on beside a key's runs: acme's five calls in a row were
    # never alone
    assert peak(list(calls.values())) >= 3, sorted(calls.values())
    pids = {line.split()[1] for line in f.journal.read_text().splitlines()}
    assert len(pids) == 2  # both workers ran calls


def test_sqlite_workers_run_one_run_of_a_key_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "keys.db"
    run_keys(lambda: SqliteStore(path), str(path), tmp_path)


def test_postgresql_workers_run_one_run_of_a_key_at_a_time(pg_db: str, tmp_path: Path) -> None:
    run_keys(lambda: PostgresStore(pg_db, max_size=2), pg_db, tmp_path)
