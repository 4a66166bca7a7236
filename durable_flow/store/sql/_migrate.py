"""Schema migrations: where the alembic scripts live and how a store runs them.

The scripts are the repository's top-level ``migrations/`` directory, shipped
inside the wheel as ``durable_flow._migrations``. A store opening a database
first reads ``alembic_version`` itself and compares it with
:data:`HEAD_REVISION`; only a database that is new, older or unknown pays
for importing alembic and loading the scripts (:func:`upgrade_sync`).

Two processes opening a new database at once must not both create the
schema: SQLite's caller migrates inside ``BEGIN IMMEDIATE``; on PostgreSQL
:func:`upgrade_sync` first takes a transaction-level advisory lock, so the
second process waits, then reads the revision again and finds it at head.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import SchemaVersionError

if TYPE_CHECKING:
    from sqlalchemy import Connection
    from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = [
    "HEAD_REVISION",
    "KNOWN_REVISIONS",
    "MIGRATION_LOCK",
    "VERSION_TABLE",
    "check_versions",
    "head_revision",
    "script_location",
    "upgrade",
    "upgrade_sync",
]

#: The newest revision in ``migrations/versions`` (a test checks it against alembic).
HEAD_REVISION = "0022"
#: Every revision this code ships; a database at any other is newer than this code.
KNOWN_REVISIONS = frozenset({"0001", "0002", "0003", "0004", "0005", "0006", "0007",
                             "0008", "0009", "0011", "0012", "0013", "0014", "0016",
                             "0017", "0019", "0020", "0021", "0022"})
#: Alembic's bookkeeping table.
VERSION_TABLE = "alembic_version"
#: The PostgreSQL advisory lock key that serializes migrations ("dfmigrat" in ASCII):
#: fixed, so every durable-flow process, whatever its version, agrees on it.
MIGRATION_LOCK = int.from_bytes(b"dfmigrat", "big")


def head_revision() -> str:
    """The schema revision this version of durable-flow writes."""
    return HEAD_REVISION


def script_location() -> Path:
    """The alembic script directory: installed package data, else the checkout's."""
    spec = importlib.util.find_spec("durable_flow._migrations")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    checkout = Path(__file__).resolve().parent.parent / "migrations"
    if not (checkout / "env.py").is_file():
        raise FileNotFoundError("durable-flow's migration scripts are missing from this install")
    return checkout


def check_versions(found: Sequence[str]) -> bool:
    """Whether a database with these ``alembic_version`` rows is at head.

    Raises ``SchemaVersionError`` for a revision this code does not know,
    which can only come from a newer durable-flow.
    """
    for revision in found:
        if revision not in KNOWN_REVISIONS:
            raise SchemaVersionError(revision, HEAD_REVISION)
    return list(found) == [HEAD_REVISION]


def upgrade_sync(connection: Connection) -> None:
    """Upgrade the database behind ``connection`` to head, inside its transaction.

    The caller owns the transaction (on SQLite it should hold the write lock,
    so two processes never migrate at once; on PostgreSQL this takes
    :data:`MIGRATION_LOCK`, released when the transaction ends); the revision
    is read again here, under that lock. Raises ``SchemaVersionError`` if the
    database is newer.
    """
    from alembic import command
    from alembic.config import Config
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory
    from sqlalchemy import func, select

    if connection.dialect.name == "postgresql":
        connection.execute(select(func.pg_advisory_xact_lock(MIGRATION_LOCK)))

    config = Config()
    config.set_main_option("script_location", str(script_location()))
    config.attributes["connection"] = connection
    script = ScriptDirectory.from_config(config)
    known = {s.revision for s in script.walk_revisions()}
    for revision in MigrationContext.configure(connection).get_current_heads():
        if revision not in known:
            raise SchemaVersionError(revision, script.get_current_head() or HEAD_REVISION)
    command.upgrade(config, "head")


async def upgrade(connection: AsyncConnection) -> None:
    """Async form of :func:`upgrade_sync`, for stores built on SQLAlchemy's asyncio engine."""
    await connection.run_sync(upgrade_sync)
