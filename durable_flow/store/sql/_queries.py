"""The store's statements by name, and the SQL they compile to, without SQLAlchemy at run time.

:mod:`._tables` builds every statement with SQLAlchemy Core and compiles it
per dialect. Importing SQLAlchemy and SQLModel costs far more than a short
command (``durable-flow runs``) takes otherwise, so the compiled text is
also kept in :mod:`._compiled`, generated from ``_tables.py`` and marked with
its digest: when the digest matches, :func:`queries_for` reads statements
from there; when ``_tables.py`` changed since, it compiles them (a test
fails until ``python -m durable_flow.store.sql._queries`` writes the file
again).
"""

from __future__ import annotations

import hashlib
import pprint
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from ._codec import Statement

__all__ = ["Queries", "SqlDialect", "compiled_source", "queries_for", "tables_digest"]

_TABLES = Path(__file__).with_name("_tables.py")
_COMPILED = Path(__file__).with_name("_compiled.py")


@dataclass(frozen=True, slots=True)
class SqlDialect:
    """What differs between SQL backends at the statement level.

    ``name`` picks SQLAlchemy's dialect (``sqlite``, or ``postgresql`` as
    asyncpg speaks it). ``returning``: every INSERT, UPDATE and DELETE ends
    in ``RETURNING 1``, one row per row it changed, for a driver whose batch
    call reports no row count (asyncpg's ``executemany``): it counts the rows
    instead.
    """

    name: Literal["sqlite", "postgresql"]
    returning: bool = False

    @property
    def key(self) -> str:
        """The dialect's entry in :mod:`._compiled`."""
        return self.name + ("+returning" if self.returning else "")


#: The dialects whose statements :mod:`._compiled` holds.
DIALECTS = (SqlDialect("sqlite"), SqlDialect("postgresql", returning=True))


class Queries:
    """Every statement of the store for one dialect (built in :mod:`._tables`)."""

    run_insert: Statement
    run_get: Statement
    run_list: dict[tuple[bool, ...], Statement]
    run_lease: Statement
    lease_renew: Statement
    lease_release: Statement
    lease_check: Statement
    run_cancel: Statement
    run_touch: Statement
    run_update: Statement
    run_update_release: Statement
    run_touch_cas: Statement
    run_update_cas: Statement
    run_update_release_cas: Statement
    run_claimable: Statement
    run_set_status: Statement
    lease_release_requeue: Statement
    run_get_locked: Statement
    run_claim: Statement
    cp_insert: Statement
    cp_get: Statement
    cp_head: Statement
    cp_list: dict[tuple[bool, ...], Statement]
    cp_mark: Statement
    cp_delete: Statement
    cp_scan: dict[tuple[bool, ...], Statement]
    cp_versions: Statement
    value_insert: Statement
    value_get: Statement
    value_keys: Statement
    value_delete: Statement
    chunk_insert: Statement
    chunk_delete_thread: Statement
    chunk_upto: Statement
    tw_upsert: Statement
    tw_get: Statement
    tw_delete: Statement
    step_upsert: Statement
    step_get: Statement
    step_delete: Statement
    req_insert: Statement
    req_answer: Statement
    req_get_answer: Statement
    req_reopen: Statement
    req_drop_open: Statement
    req_list: dict[tuple[bool, ...], Statement]
    req_inbox: dict[tuple[bool, ...], Statement]
    req_delete: Statement
    req_anchors: dict[tuple[bool, ...], Statement]

    def to_data(self) -> dict[str, Any]:
        """Plain data: each statement as (sql, names, constants, columns)."""
        return {name: ({k: _tuple(s) for k, s in value.items()} if isinstance(value, dict)
                       else _tuple(value)) for name, value in sorted(vars(self).items())}

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Queries:
        """Inverse of :meth:`to_data`."""
        queries = cls()
        for name, value in data.items():
            setattr(queries, name, {k: Statement(*s) for k, s in value.items()}
                    if isinstance(value, dict) else Statement(*value))
        return queries


def _tuple(s: Statement) -> tuple[Any, ...]:
    return (s.sql, s.names, dict(s.constants), s.columns)


def tables_digest() -> str:
    """The digest of ``_tables.py`` that the compiled statements were made from."""
    return hashlib.sha256(_TABLES.read_bytes()).hexdigest()


@cache
def queries_for(dialect: SqlDialect) -> Queries:
    """The statements of a dialect: precompiled when still current, else compiled now."""
    try:
        from . import _compiled

        current = tables_digest() == _compiled.DIGEST
    except (ImportError, OSError):  # a build without the file or without _tables.py's source
        current = False
    if current and dialect.key in _compiled.STATEMENTS:
        return Queries.from_data(_compiled.STATEMENTS[dialect.key])
    from ._tables import compile_queries

    return compile_queries(dialect)


def compiled_source() -> str:
    """The text of ``_compiled.py`` for the current ``_tables.py``."""
    from ._tables import compile_queries

    data = {d.key: compile_queries(d).to_data() for d in DIALECTS}
    return (
        '"""Generated from _tables.py by `python -m durable_flow.store.sql._queries`; '
        'do not edit."""\n\n'
        "# ruff: noqa\n"
        "from typing import Any\n\n"
        f"DIGEST = {tables_digest()!r}\n\n"
        f"STATEMENTS: dict[str, Any] = {pprint.pformat(data, width=100, sort_dicts=True)}\n")


if __name__ == "__main__":
    _COMPILED.write_text(compiled_source())
    sys.stdout.write(f"wrote {_COMPILED}\n")
