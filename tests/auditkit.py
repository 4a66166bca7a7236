"""Editing a store's rows behind its back, as someone holding the database would (every store).

``tamper(store, sql, *params)`` runs one statement written with ``?``
placeholders on the store's own database: a MemoryStore's in-memory SQLite,
a SqliteStore's file, or a PostgresStore's database (``$1, $2, ...``).
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

import asyncpg

from durable_flow import MemoryStore, PostgresStore, SqliteStore


async def tamper(store: Any, sql: str, *params: Any) -> None:
    """Run ``sql`` on the store's database outside the store (committed at once)."""
    if isinstance(store, MemoryStore):
        await store.driver.call(lambda conn: conn.execute(sql, params))
    elif isinstance(store, SqliteStore):
        with sqlite3.connect(store.path) as conn:
            conn.execute(sql, params)
    elif isinstance(store, PostgresStore):
        numbered = iter(range(1, 1 + sql.count("?")))
        conn = await asyncpg.connect(store._dsn)
        try:
            await conn.execute(re.sub(r"\?", lambda _: f"${next(numbered)}", sql), *params)
        finally:
            await conn.close()
    else:  # pragma: no cover - the fixtures make only these
        raise TypeError(type(store).__name__)


async def rows(store: Any, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """The rows of a query on the store's database, outside the store."""
    if isinstance(store, MemoryStore):
        return list(await store.driver.call(lambda conn: conn.execute(sql, params).fetchall()))
    if isinstance(store, SqliteStore):
        with sqlite3.connect(store.path) as conn:
            return list(conn.execute(sql, params).fetchall())
    numbered = iter(range(1, 1 + sql.count("?")))
    conn = await asyncpg.connect(store._dsn)
    try:
        found = await conn.fetch(re.sub(r"\?", lambda _: f"${next(numbered)}", sql), *params)
    finally:
        await conn.close()
    return [tuple(r) for r in found]
