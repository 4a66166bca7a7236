"""A run's stored rows, read and written whole: what ``export`` and ``import`` move.

:func:`export_rows_tx` reads every row of one run, table by table, as the
columns hold them (times in microseconds, payloads as bytes), plus the graph
descriptions its signature names; :func:`import_rows_tx` writes such rows
back in one transaction, refusing a run id that exists (``RunExistsError``)
and keeping a graph description already there. Rows copied verbatim load
back exactly: every checkpoint, log segment, request, step, task write and
mailbox event is the one that was exported.

The statements are built from the table models and compiled on first use,
in the process that exports or imports (SQLAlchemy is imported then); they
are not kept in the statement cache (``_cache.py``), whose key covers only
the statements every store opens with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from ...errors import RunExistsError
from .._rows import RunRows
from ._ops import Tx, execute_many, fetch
from ._statement import Statement

if TYPE_CHECKING:
    from sqlalchemy import Table
    from sqlalchemy.sql.expression import ClauseElement

    from ._tables import Queries, SqlDialect

__all__ = ["RUN_TABLES", "TransferQueries", "export_rows_tx", "import_rows_tx", "transfer_queries"]

# the tables keyed by run_id, in the order an import writes them
RUN_TABLES = ("runs", "run_labels", "checkpoints", "channel_values", "log_chunks", "task_writes",
              "steps", "requests", "mailbox", "decisions", "notifications")
_GRAPHS = "graphs"


@dataclass(frozen=True)
class TransferQueries:
    """Per table: select a run's rows, insert rows; and the graphs by signature."""

    select: dict[str, Statement]
    insert: dict[str, Statement]
    graph_get: Statement
    graph_insert: Statement


@cache
def columns(table: str) -> tuple[tuple[str, str, bool], ...]:
    """``(name, kind, nullable)`` of each column: ``bytes``, ``bool``, ``int``, ``float`` or ``str``."""
    from sqlalchemy import Boolean, Float, Integer, LargeBinary

    from ._tables import METADATA

    out = []
    for column in METADATA.tables[table].c:
        kind = "bytes" if isinstance(column.type, LargeBinary) else \
            "bool" if isinstance(column.type, Boolean) else \
            "int" if isinstance(column.type, Integer) else \
            "float" if isinstance(column.type, Float) else "str"
        out.append((column.name, kind, bool(column.nullable)))
    return tuple(out)


@cache
def transfer_queries(d: SqlDialect) -> TransferQueries:
    """The transfer statements of one dialect (compiled once per process)."""
    from sqlalchemy import bindparam, literal_column, select

    from ._tables import METADATA, compile_statement

    def c(stmt: ClauseElement) -> Statement:
        return compile_statement(stmt, d.dialect)

    def insert(table: Table) -> ClauseElement:
        stmt = d.insert(table).values({col.name: bindparam(col.name) for col in table.c})
        return stmt.returning(literal_column("1")) if d.returning else stmt

    tables = {name: METADATA.tables[name] for name in RUN_TABLES}
    graphs = METADATA.tables[_GRAPHS]
    graph_insert = d.insert(graphs).values({col.name: bindparam(col.name) for col in graphs.c}) \
        .on_conflict_do_nothing(index_elements=["signature"])
    return TransferQueries(
        select={name: c(select(t).where(t.c.run_id == bindparam("run_id"))
                        .order_by(*t.primary_key.columns)) for name, t in tables.items()},
        insert={name: c(insert(t)) for name, t in tables.items()},
        graph_get=c(select(graphs).where(graphs.c.signature == bindparam("signature"))),
        graph_insert=c(graph_insert.returning(literal_column("1")) if d.returning
                       else graph_insert))


def _normal(table: str, row: Mapping[str, Any]) -> dict[str, Any]:
    """A row as every backend gives it: bytes as bytes, booleans as bool."""
    out = dict(row)
    for name, kind, _ in columns(table):
        value = out.get(name)
        if value is not None:
            out[name] = bytes(value) if kind == "bytes" else bool(value) if kind == "bool" \
                else float(value) if kind == "float" else value
    return out


def export_rows_tx(q: TransferQueries, run_id: str) -> Tx[RunRows | None]:
    """Every row of ``run_id`` and the graphs it names; None when there is no such run."""
    tables: dict[str, list[dict[str, Any]]] = {}
    for name in RUN_TABLES:
        rows = yield from fetch(q.select[name], run_id=run_id)
        tables[name] = [_normal(name, row) for row in rows]
    if not tables["runs"]:
        return None
    signatures = {tables["runs"][0]["signature"]}
    graphs = []
    for signature in sorted(signatures):
        graphs += (yield from fetch(q.graph_get, signature=signature))
    tables[_GRAPHS] = [_normal(_GRAPHS, row) for row in graphs]
    return RunRows(run_id, tables)


def import_rows_tx(q: TransferQueries, rows: RunRows, store_q: Queries | None = None) -> Tx[None]:
    """Insert ``rows`` in one transaction; ``RunExistsError`` (nothing written) if the id is taken.

    ``rows.decision`` (the import's own) is chained after the imported decisions.
    """
    if (yield from fetch(q.select["runs"], run_id=rows.run_id)):
        raise RunExistsError(rows.run_id)
    for name in RUN_TABLES:
        yield from execute_many(q.insert[name], rows.tables.get(name, []))
    yield from execute_many(q.graph_insert, rows.tables.get(_GRAPHS, []))
    if rows.decision is not None and store_q is not None:
        from ._decisions import record_decisions_tx

        yield from record_decisions_tx(store_q, rows.run_id, [rows.decision])
