"""The alembic scripts: they build the models' schema, and ship with the package."""

from __future__ import annotations

import logging
import sqlite3
import tomllib
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, event
from sqlalchemy.pool import NullPool

import durable_flow
from durable_flow.errors import SchemaVersionError
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
