"""The stream log on SQL: appending a batch of entries, reading after an offset, deleting.

A batch is one transaction of its own, never part of a superstep commit: it
reads the run's last ``seq`` and inserts the entries after it. The statements
are compiled on first use per dialect (a run that streams nothing never
compiles them); bound parameters only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from ._codec import from_us, to_us
from ._ops import Tx, execute, execute_many, fetch
from ._statement import Statement

if TYPE_CHECKING:  # the statements module imports SQLAlchemy: only when compiling
    from ._tables import Queries, SqlDialect

__all__ = ["StreamQueries", "append_stream_tx", "delete_stream_tx", "read_stream_tx",
           "trim_stream_tx"]


class StreamQueries:
    """The stream log's statements for one dialect."""

    def __init__(self, d: SqlDialect) -> None:
        from sqlalchemy import bindparam, delete, func, literal_column, select

        from ._schema import METADATA
        from ._tables import compile_statement

        table = METADATA.tables["stream_entries"]
        run = table.c.run_id == bindparam("run_id")

        def c(stmt: Any) -> Statement:
            return compile_statement(stmt, d.dialect)

        insert = table.insert().values({col.name: bindparam(col.name) for col in table.c})
        self.insert = c(insert.returning(literal_column("1")) if d.returning else insert)
        self.last = c(select(func.coalesce(func.max(table.c.seq), 0).label("seq")).where(run))
        self.after = c(select(table).where(run, table.c.seq > bindparam("after"))
                       .order_by(table.c.seq).limit(bindparam("n")))
        self.delete = c(delete(table).where(run))
        self.trim = c(delete(table).where(run, table.c.created_at < bindparam("floor"),
                                          table.c.seq < bindparam("last")))


@cache
def _compiled(d: SqlDialect) -> StreamQueries:
    return StreamQueries(d)


def streams_of(q: Queries) -> StreamQueries:
    """The stream statements of the dialect ``q`` was compiled for."""
    return _compiled(q.dialect)


def append_stream_tx(q: Queries, run_id: str, entries: Sequence[Mapping[str, Any]]) -> Tx[int]:
    """Append ``entries`` after the run's last; returns the last ``seq``.

    Each entry has ``epoch``, ``namespace``, ``node``, ``superstep``,
    ``kind``, ``data`` (orjson bytes) and ``ts``.
    """
    s = streams_of(q)
    seq = (yield from fetch(s.last, run_id=run_id))[0]["seq"]
    rows = []
    for entry in entries:
        seq += 1
        rows.append({"run_id": run_id, "seq": seq, "epoch": entry["epoch"],
                     "namespace": entry["namespace"], "node": entry["node"],
                     "superstep": entry["superstep"], "kind": entry["kind"],
                     "data": entry["data"], "created_at": to_us(entry["ts"])})
    if rows:
        yield from execute_many(s.insert, rows)
    return int(seq)


def read_stream_tx(q: Queries, run_id: str, after: int, limit: int) -> Tx[list[dict[str, Any]]]:
    """At most ``limit`` entries after ``seq`` ``after``, in order, as plain rows."""
    rows = yield from fetch(streams_of(q).after, run_id=run_id, after=after, n=limit)
    return [{**r, "ts": from_us(int(r.pop("created_at")))} for r in rows]


def delete_stream_tx(q: Queries, run_id: str) -> Tx[None]:
    """Drop a run's stream log."""
    yield from execute(streams_of(q).delete, run_id=run_id)


def trim_stream_tx(q: Queries, run_id: str, floor: int) -> Tx[None]:
    """Drop a run's entries written before ``floor`` (microseconds): see ``stream_floors``.

    The run's last entry stays, so the numbering goes on after it.
    """
    s = streams_of(q)
    last = (yield from fetch(s.last, run_id=run_id))[0]["seq"]
    yield from execute(s.trim, run_id=run_id, floor=floor, last=last)
