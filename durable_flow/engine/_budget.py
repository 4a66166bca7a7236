"""A run's budget inside its execution: usage kept in step with the store, and the budget request.

:class:`Spending` reads the run's usage and budget once per execution and
adds each model call's usage to the store as the call returns (its own
transaction, before the call's result is recorded: a call made again after
a crash was paid twice and is counted twice). :func:`check_budget` runs
before a model call that is not recorded yet: when the run's usage has
reached its budget, the node asks a person instead (a request of kind
``budget``), found again after a restart by its own call index (the model
round's key), never mixed with the node's ``ctx.request`` calls.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING

from pydantic import TypeAdapter

from ..errors import BudgetExceededError, RunNotFoundError
from ..model._budget import Budget, BudgetDecision, RunUsage
from ..model._serde import decode
from ..store._protocols import CheckpointStore, Lease
from ._context import Interrupt

if TYPE_CHECKING:
    from ._context import TaskCalls
    from ._run import RunContext

__all__ = ["BUDGET_INDEX", "Spending", "check_budget"]

#: Budget requests' call indexes start here, far above any node's own ``ctx.request`` calls.
BUDGET_INDEX = 1 << 20
_DECISION: TypeAdapter[BudgetDecision] = TypeAdapter(BudgetDecision)


class Spending:
    """One execution's view of its run's usage and budget."""

    def __init__(self, store: CheckpointStore, lease: Lease) -> None:
        self.store = store
        self.lease = lease
        self.usage = RunUsage()
        self.budget: Budget | None = None
        self._loaded = False
        self._lock = asyncio.Lock()

    async def load(self) -> None:
        """Read the run's usage and budget (once per execution)."""
        async with self._lock:
            if self._loaded:
                return
            record = await self.store.get_run(self.lease.run_id)
            if record is None:
                raise RunNotFoundError(self.lease.run_id)
            self.usage, self.budget, self._loaded = record.usage, record.budget, True

    async def charge(self, usage: RunUsage) -> None:
        """Add one model call's usage to the run's totals."""
        if usage.total_tokens or usage.usd:
            self.usage = await self.store.add_usage(self.lease, usage)

    async def set_budget(self, budget: Budget) -> None:
        """Replace the run's budget (a person's decision)."""
        if budget != self.budget:
            await self.store.set_budget(self.lease, budget)
            self.budget = budget


async def check_budget(calls: TaskCalls, key: int) -> None:
    """Before an unrecorded model call: go ahead, or ask a person when the budget is reached.

    The answer's ``stop`` raises ``BudgetExceededError`` (never retried: the
    run fails); raised limits are stored and the call goes ahead.
    """
    run: RunContext = calls.io.run
    spending = run.spending
    await spending.load()
    index = BUDGET_INDEX + key
    row = calls.recorded(index, "request", "a budget check")
    budget = spending.budget
    if row is None:
        if budget is None or not budget.reached(spending.usage):
            return
        payload = {"kind": "budget", "used": spending.usage.to_dict(), "limit": budget.to_dict()}
        row = calls.new_request(index, payload, _DECISION)
        raise Interrupt([dataclasses.replace(row, id=f"{row.id.rpartition('#')[0]}#budget{key}")])
    if row.answer is None:
        raise Interrupt([row])
    decision = _DECISION.validate_python(decode(row.answer))
    if decision.stop:
        asked = decode(row.payload)
        err = BudgetExceededError(calls.run_id, calls.node, asked.get("used", {}),
                                  asked.get("limit", {}))
        err.raised_by_runtime = True  # a retry of the node could not change the answer
        raise err
    old = budget or Budget()
    run.guard()
    await spending.set_budget(Budget(
        max_tokens=old.max_tokens if decision.raise_to_tokens is None
        else decision.raise_to_tokens,
        max_usd=old.max_usd if decision.raise_to_usd is None else decision.raise_to_usd))
