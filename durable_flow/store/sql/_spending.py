"""A run's usage and budget on SQL: adding one model call's usage, replacing the budget.

Each is one transaction of its own under the run's lease: an UPDATE of the
run's row (so PostgreSQL takes the row's lock first, as every write of a run
does) that matches only while the lease is ours, then the new totals read
back. The statements are compiled on first use per dialect (a run that calls
no model never compiles them); bound parameters only.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from ...model._budget import Budget, RunUsage
from .._protocols import Lease
from ._ops import Tx, execute, fetch
from ._shared import lease_lost
from ._statement import Statement

if TYPE_CHECKING:  # the statements module imports SQLAlchemy: only when compiling
    from ._tables import Queries, SqlDialect

__all__ = ["add_usage_tx", "set_budget_tx"]


class SpendingQueries:
    """The usage and budget statements for one dialect."""

    def __init__(self, d: SqlDialect) -> None:
        from sqlalchemy import bindparam, literal_column, select, update

        from ._schema import METADATA
        from ._tables import compile_statement

        runs = METADATA.tables["runs"]
        held = (runs.c.run_id == bindparam("run_id"), runs.c.lease_epoch == bindparam("epoch"),
                runs.c.lease_owner == bindparam("owner"))

        def c(stmt: Any) -> Statement:
            return compile_statement(stmt, d.dialect)

        def changes(stmt: Any) -> Statement:  # counted by the driver (see SqlDialect)
            return c(stmt.returning(literal_column("1")) if d.returning else stmt)

        self.add = changes(update(runs).where(*held).values(
            input_tokens=runs.c.input_tokens + bindparam("input_tokens"),
            output_tokens=runs.c.output_tokens + bindparam("output_tokens"),
            usd=runs.c.usd + bindparam("usd")))
        self.totals = c(select(runs.c.input_tokens, runs.c.output_tokens, runs.c.usd)
                        .where(runs.c.run_id == bindparam("run_id")))
        self.budget = changes(update(runs).where(*held).values(
            budget_tokens=bindparam("budget_tokens"), budget_usd=bindparam("budget_usd")))


@cache
def _compiled(d: SqlDialect) -> SpendingQueries:
    return SpendingQueries(d)


def _held(lease: Lease) -> dict[str, Any]:
    return {"run_id": lease.run_id, "epoch": lease.epoch, "owner": lease.owner}


def add_usage_tx(q: Queries, lease: Lease, usage: RunUsage) -> Tx[RunUsage]:
    """Add ``usage`` to the run's totals while ``lease`` is held; the new totals."""
    s = _compiled(q.dialect)
    if not (yield from execute(s.add, **_held(lease), input_tokens=usage.input_tokens,
                               output_tokens=usage.output_tokens, usd=float(usage.usd))):
        yield from lease_lost(q, lease)
    row = (yield from fetch(s.totals, run_id=lease.run_id))[0]
    return RunUsage(int(row["input_tokens"]), int(row["output_tokens"]), float(row["usd"]))


def set_budget_tx(q: Queries, lease: Lease, budget: Budget | None) -> Tx[None]:
    """Replace the run's budget while ``lease`` is held."""
    if not (yield from execute(_compiled(q.dialect).budget, **_held(lease),
                               budget_tokens=None if budget is None else budget.max_tokens,
                               budget_usd=None if budget is None else budget.max_usd)):
        yield from lease_lost(q, lease)
