"""The statement cache: compiled SQL kept in a file, read back without SQLAlchemy.

Every test points ``DURABLE_FLOW_CACHE_DIR`` at a directory of its own
(conftest.py already keeps the session's cache out of the home directory).
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import durable_flow
from durable_flow.store.sql import _cache
from durable_flow.store.sql._approval_queries import ApprovalQueries
from durable_flow.store.sql._cache import (
    CACHE_ENV,
    CachedQueries,
    cache_file,
    load_or_compile,
    statements_for,
)
from durable_flow.store.sql._decisions import approvals_of
from durable_flow.store.sql._tables import Queries
from durable_flow.store.sql._wait_queries import WaitQueries
from durable_flow.store.sql._waits import waits_of
from durable_flow.store.sqlite._sqlite import SqliteStore

PACKAGE = Path(durable_flow.__file__).resolve().parent
DIALECTS = ["sqlite", "postgresql"]
HEAVY = ("sqlalchemy", "sqlmodel", "alembic")


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(folder))
    return folder


@pytest.fixture
def own_statements() -> Iterator[None]:
    """Stores made in the test read or compile their statements again (under its cache dir)."""
    statements_for.cache_clear()
    yield
    statements_for.cache_clear()  # the next stores read the session's cache again


def _fresh(name: str) -> tuple[dict[str, object], dict[str, object]]:
    """Every statement of a dialect, compiled now (not the process's shared ones)."""
    dialect = _cache.sql_dialect(name)
    queries = {k: v for k, v in vars(Queries(dialect)).items() if k != "dialect"}
    return queries, dict(vars(WaitQueries(dialect)))


def _loaded(name: str) -> CachedQueries:
    loaded = load_or_compile(name)
    assert isinstance(loaded, CachedQueries), "the statements were compiled, not read back"
    return loaded


@pytest.mark.parametrize("name", DIALECTS)
def test_cached_statements_equal_freshly_compiled_ones(cache_dir: Path, name: str) -> None:
    compiled = load_or_compile(name)  # nothing cached yet: compiles, then writes the file
    assert isinstance(compiled, Queries)
    path = cache_file(name)
    assert path is not None and path.parent == cache_dir and path.is_file()
    loaded = _loaded(name)
    queries, waits = _fresh(name)
    cached_queries = {k: v for k, v in vars(loaded).items() if k not in ("waits", "approvals", "_name")}
    # every attribute, equal and of the same types all the way down (repr tells 1 from True)
    assert sorted(cached_queries) == sorted(queries)
    assert {k: repr(v) for k, v in cached_queries.items()} == {k: repr(v) for k, v in queries.items()}
    assert cached_queries == queries
    assert sorted(vars(waits_of(loaded))) == sorted(waits)
    assert {k: repr(v) for k, v in vars(waits_of(loaded)).items()} == {
        k: repr(v) for k, v in waits.items()}
    approvals = dict(vars(ApprovalQueries(_cache.sql_dialect(name))))
    assert {k: repr(v) for k, v in vars(approvals_of(loaded)).items()} == {
        k: repr(v) for k, v in approvals.items()}
    assert loaded.dialect is _cache.sql_dialect(name)


def test_a_damaged_or_stale_file_is_ignored_and_written_again(cache_dir: Path) -> None:
    load_or_compile("sqlite")
    path = cache_file("sqlite")
    assert path is not None
    good = path.read_bytes()
    head, _, body = good.partition(b"\n")
    damages = {
        "truncated": good[: len(good) // 2],
        "not JSON": b"\x00garbage\xff",
        "empty": b"",
        "SQL changed, still JSON": head + b"\n" + body.replace(b"SELECT", b"DELETE", 1),
        "stale key": head.replace(b'"key":"', b'"key":"0', 1) + b"\n" + body,
        "body of another shape": head + b"\n" + b'{"queries": {}, "waits": {}}',
        # checksums that match: the entries themselves are checked
        "a name that is not text": _signed(head, body.replace(b'"$tuple":["run_id"', b'"$tuple":[1', 1)),
        "an unknown tag": _signed(head, body.replace(b'"$stmt"', b'"$stmx"', 1)),
        "a group missing": _signed(head, b'{"queries": {}}'),
    }
    assert all(v != good for v in damages.values())
    for what, data in damages.items():
        path.write_bytes(data)
        again = load_or_compile("sqlite")
        assert not isinstance(again, CachedQueries), what
        assert path.read_bytes() == good, what  # written again
        _loaded("sqlite")


def _signed(head: bytes, body: bytes) -> bytes:
    """A cache file whose header's checksum matches ``body``."""
    header = json.loads(head)
    header["sha256"] = hashlib.sha256(body).hexdigest()
    return json.dumps(header, separators=(",", ":")).encode() + b"\n" + body


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX file modes")
def test_a_file_others_may_write_is_not_trusted(cache_dir: Path) -> None:
    load_or_compile("sqlite")
    path = cache_file("sqlite")
    assert path is not None
    path.chmod(0o666)
    assert not isinstance(load_or_compile("sqlite"), CachedQueries)
    assert path.stat().st_mode & 0o777 == 0o600  # replaced by a file of this user alone
    _loaded("sqlite")


async def test_a_cache_directory_that_cannot_be_written_still_works(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_statements: None) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    folders = [blocker / "cache", ""]  # under a file (even root cannot write there); disabled
    if os.name == "posix" and os.geteuid() != 0:  # root writes into read-only directories
        read_only = tmp_path / "read-only"
        read_only.mkdir(mode=0o500)
        folders.append(read_only / "cache")
    for folder in folders:
        monkeypatch.setenv(CACHE_ENV, str(folder))
        q = load_or_compile("sqlite")
        assert isinstance(q, Queries)
        assert q.run_get.sql.startswith("SELECT")
        statements_for.cache_clear()
        async with SqliteStore(tmp_path / "runs.db") as store:
            assert isinstance(store._q, Queries)
            assert await store.list_runs() == []
    assert not (blocker / "cache").exists()


def test_the_stores_of_the_tests_run_on_cached_statements(tmp_path: Path) -> None:
    assert isinstance(SqliteStore(tmp_path / "runs.db")._q, CachedQueries)  # see conftest.py


def test_the_cache_is_named_by_code_libraries_and_dialect(cache_dir: Path) -> None:
    paths = {name: cache_file(name) for name in DIALECTS}
    assert len(set(paths.values())) == 2
    assert all(p is not None and re.fullmatch(rf"sql-{n}-[0-9a-f]{{24}}\.json", p.name)
               for n, p in paths.items())


def test_every_module_that_builds_statements_is_part_of_the_key() -> None:
    sql = PACKAGE / "store" / "sql"
    builders = {f"store/sql/{p.name}" for p in sql.glob("*.py")
                if re.search(r"^(from|import) sqlalchemy", p.read_text(encoding="utf-8"), re.M)}
    assert builders == {"store/sql/_schema.py", "store/sql/_tables.py", "store/sql/_wait_queries.py",
                        "store/sql/_approval_queries.py", "store/sql/_flow_queries.py"}
    assert all((PACKAGE / source).is_file() for source in _cache.SOURCES)
    for source in builders:  # and what they import from the package
        assert _package_imports(source) <= set(_cache.SOURCES), source


def _package_imports(source: str) -> set[str]:
    """The package's modules ``source`` imports at module level, as paths like SOURCES."""
    here = Path(source).parent
    found = set()
    for node in ast.parse((PACKAGE / source).read_text(encoding="utf-8")).body:
        if not isinstance(node, ast.ImportFrom) or not node.level:
            continue
        base = here
        for _ in range(node.level - 1):
            base = base.parent
        module = base.joinpath(*(node.module or "").split("."))
        names = [module / alias.name for alias in node.names] if not node.module else [module]
        found |= {f"{n.as_posix()}.py" for n in names if (PACKAGE / f"{n}.py").is_file()}
    return found


@pytest.mark.process
def test_cli_runs_with_a_warm_cache_imports_no_sqlalchemy(cache_dir: Path, tmp_path: Path) -> None:
    db = tmp_path / "head.db"
    asyncio.run(_setup(db))  # a database at the current schema
    cli = [sys.executable, "-m", "durable_flow", "--db", str(db), "runs"]
    first = subprocess.run(cli, capture_output=True, text=True, timeout=60, check=True)
    assert first.stdout.strip() == "no runs"
    assert cache_file("sqlite") is not None and cache_file("sqlite").is_file()  # type: ignore[union-attr]
    code = ("import runpy, sys\n"
            "sys.argv = ['durable-flow', '--db', sys.argv[1], 'runs']\n"
            "try:\n    runpy.run_module('durable_flow', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            f"print(sorted({{m for m in sys.modules if m.split('.')[0] in {HEAVY!r}}}))\n")
    out = subprocess.run([sys.executable, "-c", code, str(db)], capture_output=True, text=True,
                         timeout=60, check=True).stdout.splitlines()
    assert out == ["no runs", "[]"]


async def _setup(path: Path) -> None:
    async with SqliteStore(path):
        pass
