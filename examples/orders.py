"""An order workflow, and the tests its team writes for it (``examples/test_orders.py``).

``reserve`` holds the stock and ``charge`` takes the payment, each through a
durable step (``ctx.step``), so neither happens twice whatever crashes;
``approve`` asks a person before anything is charged. Version 2 renames
``approve`` to ``sign_off`` and declares how runs paused on version 1 move
onto it (``migrate(..., nodes=...)``), so a deploy does not strand them.

    python examples/orders.py
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from durable_flow import (
    END,
    Blackboard,
    NodeContext,
    RunStatus,
    Runtime,
    SqliteStore,
    Workflow,
    WorkflowBuilder,
)


class Order(Blackboard):
    item: str = ""
    qty: int = 1
    reservation: str = ""
    approved: bool = False
    receipt: str = ""


def hold_stock(item: str, qty: int) -> str:
    return f"hold-{item}-{qty}"  # a call to the warehouse in real life


def take_payment(item: str, qty: int) -> str:
    return f"paid-{item}-{qty * 12}"  # a call to the payment provider in real life


def build(version: str = "1") -> Workflow:
    """The order workflow; version "2" calls the approval node ``sign_off``."""
    ask = "approve" if version == "1" else "sign_off"
    b = WorkflowBuilder("orders", state=Order, version=version)

    @b.node()
    async def reserve(state: Order, ctx: NodeContext) -> dict[str, Any]:
        return {"reservation": await ctx.step("hold", hold_stock, state.item, state.qty)}

    async def approve(state: Order, ctx: NodeContext) -> dict[str, Any]:
        ok = await ctx.request({"item": state.item, "qty": state.qty}, response_type=bool)
        return {"approved": ok}

    @b.node()
    async def charge(state: Order, ctx: NodeContext) -> dict[str, Any]:
        return {"receipt": await ctx.step("pay", take_payment, state.item, state.qty)}

    b.add_node(ask, approve)
    b.set_entry("reserve")
    b.add_edge("reserve", ask)
    b.add_edge(ask, "charge", when="approved")
    b.add_edge(ask, END, when="not approved")
    b.add_edge("charge", END)
    if version == "2":
        b.migrate("1", lambda values: values, nodes={"approve": "sign_off"})
    return b.build()


workflow = build("1")
workflow_v2 = build("2")


async def main(db: Path = Path("orders.db")) -> Order:
    """One order, approved."""
    async with Runtime(SqliteStore(db)) as rt:
        result = await rt.run(workflow, {"item": "book", "qty": 2})
        [request] = result.pending_requests
        result = await rt.resume(workflow, result.run_id, responses={request.id: True})
        assert result.status is RunStatus.COMPLETED
        print("receipt:", result.state.receipt)
        return result.state


if __name__ == "__main__":
    asyncio.run(main())
