"""The alembic scripts: they build the models' schema on SQLite and PostgreSQL, and ship."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import subprocess
import sys
import tomllib
from functools import partial
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from pgdb import fresh_database, run_async
from sqlalchemy import create_engine, event
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

import durable_flow
from durable_flow.errors import SchemaVersionError
from durable_flow.store.postgres._postgres import PostgresStore
from durable_flow.store.sql import _migrate
from durable_flow.store.sql._tables import METADATA

REPO = Path(__file__).resolve().parents[2]


def _schema(path: Path) -> set[tuple[str, str, str]]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT type, name, sql FROM sqlite_master "
                            "WHERE name NOT LIKE 'alembic%' AND sql IS NOT NULL").fetchall()
    finally:
        conn.close()
    return {(kind, name, " ".join(sql.split())) for kind, name, sql in rows}


def _upgrade(path: Path) -> None:
    engine = create_engine(f"sqlite:///{path}", poolclass=NullPool)
    try:
        with engine.begin() as conn:
            _migrate.upgrade_sync(conn)
    finally:
        engine.dispose()


def test_migrations_build_exactly_the_models_schema(tmp_path: Path) -> None:
    migrated, modelled = tmp_path / "migrated.db", tmp_path / "modelled.db"
    _upgrade(migrated)
    engine = create_engine(f"sqlite:///{modelled}", poolclass=NullPool)
    METADATA.create_all(engine)
    engine.dispose()
    assert _schema(migrated) == _schema(modelled)
    assert len(_schema(migrated)) == len(METADATA.tables) + sum(
        len(t.indexes) for t in METADATA.tables.values())


def test_head_and_known_revisions_match_the_scripts() -> None:
    config = Config()
    config.set_main_option("script_location", str(_migrate.script_location()))
    script = ScriptDirectory.from_config(config)
    assert script.get_current_head() == _migrate.HEAD_REVISION == _migrate.head_revision()
    assert {s.revision for s in script.walk_revisions()} == _migrate.KNOWN_REVISIONS


def test_check_versions() -> None:
    assert _migrate.check_versions([_migrate.HEAD_REVISION])
    assert not _migrate.check_versions([])
    with pytest.raises(SchemaVersionError, match="abc"):
        _migrate.check_versions(["abc"])


def test_migrating_leaves_the_application_logging_alone(tmp_path: Path) -> None:
    app = logging.getLogger("some.app")
    root_handlers = list(logging.getLogger().handlers)
    _upgrade(tmp_path / "log.db")
    assert not app.disabled
    assert logging.getLogger().handlers == root_handlers


def test_the_alembic_command_line_environment_works(tmp_path: Path) -> None:
    config = Config(str(REPO / "migrations" / "alembic.ini"))
    config.set_main_option("sqlalchemy.url", f"sqlite:///{tmp_path / 'cli.db'}")
    command.upgrade(config, "head")
    assert _schema(tmp_path / "cli.db") == _schema_of_models(tmp_path)


def _schema_of_models(tmp_path: Path) -> set[tuple[str, str, str]]:
    path = tmp_path / "models.db"
    engine = create_engine(f"sqlite:///{path}", poolclass=NullPool)
    METADATA.create_all(engine)
    engine.dispose()
    return _schema(path)


def test_a_migration_runs_inside_the_callers_transaction(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'tx.db'}", poolclass=NullPool)
    event.listen(engine, "connect", lambda dbapi, _rec: setattr(dbapi, "isolation_level", None))
    event.listen(engine, "begin", lambda conn: conn.exec_driver_sql("BEGIN IMMEDIATE"))
    try:
        with pytest.raises(RuntimeError), engine.begin() as conn:
            _migrate.upgrade_sync(conn)
            raise RuntimeError("roll back")
    finally:
        engine.dispose()
    assert _schema(tmp_path / "tx.db") == set()


def test_the_scripts_are_found_in_a_checkout() -> None:
    location = _migrate.script_location()
    assert (location / "env.py").is_file()
    assert (location / "versions" / "0001_initial.py").is_file()


def test_pyproject_ships_every_package_and_the_migrations() -> None:
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    package_root = Path(durable_flow.__file__).parent
    on_disk = {".".join(p.parent.relative_to(package_root.parent).parts)
               for p in package_root.rglob("__init__.py")}
    assert on_disk <= listed
    assert setuptools["package-dir"]["durable_flow._migrations"] == "migrations"
    assert {"durable_flow._migrations", "durable_flow._migrations.versions"} <= listed
    assert "*.mako" in setuptools["package-data"]["durable_flow._migrations"]


# -- PostgreSQL ----------------------------------------------------------------------------------

_PG_COLUMNS = """
    SELECT table_name, column_name, data_type, is_nullable, column_default
    FROM information_schema.columns
    WHERE table_schema = current_schema() AND table_name <> 'alembic_version'"""
_PG_INDEXES = """
    SELECT tablename, indexname, indexdef FROM pg_indexes
    WHERE schemaname = current_schema() AND tablename <> 'alembic_version'"""


async def _pg_fetch(dsn: str, sql: str) -> list[tuple[Any, ...]]:
    conn = await asyncpg.connect(dsn)
    try:
        return [tuple(row) for row in await conn.fetch(sql)]
    finally:
        await conn.close()


async def _pg_schema(dsn: str) -> set[tuple[Any, ...]]:
    return {*await _pg_fetch(dsn, _PG_COLUMNS), *await _pg_fetch(dsn, _PG_INDEXES)}


async def _create_models(dsn: str) -> None:
    engine = create_async_engine("postgresql+asyncpg://", poolclass=NullPool,
                                 async_creator=partial(asyncpg.connect, dsn))
    try:
        async with engine.begin() as conn:
            await conn.run_sync(METADATA.create_all)
    finally:
        await engine.dispose()


async def test_postgres_setup_builds_exactly_the_models_schema(fresh_pg: str) -> None:
    async with PostgresStore(fresh_pg):
        pass
    assert await _pg_fetch(fresh_pg, "SELECT version_num FROM alembic_version") == [
        (_migrate.HEAD_REVISION,)]
    with fresh_database() as modelled:
        await _create_models(modelled)
        assert await _pg_schema(fresh_pg) == await _pg_schema(modelled)
    types = {(table, column): kind for table, column, kind, *_ in
             await _pg_fetch(fresh_pg, _PG_COLUMNS)}
    assert types["channel_values", "data"] == "bytea"
    assert types["runs", "lease_expires_at"] == types["checkpoints", "created_at"] == "bigint"
    indexes = {name: sql for _, name, sql in await _pg_fetch(fresh_pg, _PG_INDEXES)}
    assert indexes["ix_requests_open"].endswith("WHERE (answer IS NULL)")


async def test_postgres_refuses_a_database_newer_than_the_code(fresh_pg: str) -> None:
    async with PostgresStore(fresh_pg):
        pass
    await _pg_fetch(fresh_pg, "UPDATE alembic_version SET version_num = '9999_future'")
    with pytest.raises(SchemaVersionError) as err:
        await PostgresStore(fresh_pg).setup()
    assert (err.value.database_version, err.value.code_version) == (
        "9999_future", _migrate.HEAD_REVISION)


async def test_postgres_stores_set_up_at_once_all_succeed(fresh_pg: str) -> None:
    stores = [PostgresStore(fresh_pg) for _ in range(6)]
    try:
        await asyncio.gather(*(s.setup() for s in stores))
        assert [await s.get_run("nope") for s in stores] == [None] * len(stores)
    finally:
        await asyncio.gather(*(s.close() for s in stores))
    assert await _pg_fetch(fresh_pg, "SELECT version_num FROM alembic_version") == [
        (_migrate.HEAD_REVISION,)]


_SETUP = """
import asyncio, sys
import alembic.command, alembic.runtime.migration, alembic.script  # loaded before the start
import sqlalchemy.ext.asyncio
from durable_flow.store.postgres._postgres import PostgresStore

async def main():
    store = PostgresStore(sys.argv[1])
    print("ready", flush=True)
    sys.stdin.readline()  # every process starts setting up at once
    await store.setup()
    await store.close()

asyncio.run(main())
"""


@pytest.mark.process
def test_postgres_setups_from_several_processes_at_once_all_succeed(fresh_pg: str) -> None:
    children = [subprocess.Popen([sys.executable, "-c", _SETUP, fresh_pg], text=True,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE) for _ in range(4)]
    for child in children:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.close()
    failures = [child.stderr.read() if child.stderr else "" for child in children]
    for child in children:
        child.wait(timeout=120)
    assert [child.returncode for child in children] == [0] * 4, failures
    assert run_async(_pg_fetch(fresh_pg, "SELECT version_num FROM alembic_version")) == [
        (_migrate.HEAD_REVISION,)]
