"""Escalation: an approval with a deadline, and a payment that waits for a webhook.

A purchase needs a manager's approval within two days. Unanswered by then,
``ctx.request`` raises ``RequestTimeoutError`` inside the node, which
escalates to a director (the manager's late answer is refused). Once
approved, the payment node creates a charge (a durable step: done once) and
waits for the payment provider's webhook, an event sent to the run from
outside with ``Runtime.send_event``; no webhook within an hour fails the
payment. A ``Worker`` runs everything: it wakes the run when its deadline
comes and the moment its event arrives, and no process has to stay alive in
between; the run holds no lease while it waits.

    python examples/escalation.py      # the same flow, with deadlines of a second
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel

from durable_flow import (
    END,
    Blackboard,
    Command,
    EventTimeoutError,
    NodeContext,
    PendingRequest,
    RequestTimeoutError,
    RunStatus,
    Runtime,
    SqliteStore,
    Worker,
    Workflow,
    WorkflowBuilder,
    append,
)


class Purchase(Blackboard):
    item: str = ""
    amount: int = 0
    approver: str = ""
    approved: bool = False
    charge_id: str = ""
    paid: bool = False
    trail: Annotated[list[str], append] = []


class Payment(BaseModel):
    """The payment provider's webhook."""

    charge_id: str
    status: str


class Provider:
    """The outside world: creating a charge must happen once per purchase."""

    def __init__(self) -> None:
        self.charges: list[int] = []

    def create_charge(self, amount: int) -> str:
        self.charges.append(amount)
        return f"ch_{len(self.charges)}"


def build(provider: Provider, *, approval_deadline: timedelta = timedelta(days=2),
          payment_timeout: timedelta = timedelta(hours=1)) -> Workflow:
    """ask_manager -(deadline)-> ask_director; approved -> charge (waits for the webhook)."""
    b = WorkflowBuilder("purchase", state=Purchase)

    def question(state: Purchase, approver: str) -> dict[str, Any]:
        return {"approver": approver, "item": state.item, "amount": state.amount}

    @b.node(goto=["ask_director"])
    async def ask_manager(state: Purchase, ctx: NodeContext) -> Any:
        try:
            ok = await ctx.request(question(state, "manager"), response_type=bool,
                                   timeout=approval_deadline)
        except RequestTimeoutError:
            return Command(update={"trail": ["the manager did not answer in time"]},
                           goto="ask_director", reason="escalated")
        return {"approved": ok, "approver": "manager", "trail": ["manager answered"]}

    @b.node()
    async def ask_director(state: Purchase, ctx: NodeContext) -> dict[str, Any]:
        ok = await ctx.request(question(state, "director"), response_type=bool)
        return {"approved": ok, "approver": "director", "trail": ["director answered"]}

    @b.node()
    async def charge(state: Purchase, ctx: NodeContext) -> dict[str, Any]:
        charge_id = await ctx.step("create_charge", provider.create_charge, state.amount)
        try:
            webhook = await ctx.wait_event("payment", response_type=Payment,
                                           timeout=payment_timeout)
        except EventTimeoutError:
            return {"charge_id": charge_id, "trail": ["no webhook in time"]}
        paid = webhook.charge_id == charge_id and webhook.status == "succeeded"
        return {"charge_id": charge_id, "paid": paid, "trail": [f"payment {webhook.status}"]}

    b.set_entry("ask_manager")
    for node in ("ask_manager", "ask_director"):
        b.add_switch(node, [("approved", "charge")], default=END)
    b.add_edge("charge", END)
    return b.build()


async def inbox_entry(rt: Runtime, run_id: str, approver: str) -> PendingRequest:
    """Wait until the run's request to ``approver`` is in the inbox."""
    while True:
        for req in await rt.pending_requests():
            if req.run_id == run_id and req.payload["approver"] == approver:
                return req
        await asyncio.sleep(0.05)


async def main(db: Path = Path("escalation.db"), provider: Provider | None = None, *,
               approval_deadline: timedelta = timedelta(seconds=1),
               payment_timeout: timedelta = timedelta(seconds=30)) -> Purchase:
    """Submit a purchase; let the manager's deadline pass; the director approves; pay."""
    provider = provider or Provider()
    workflow = build(provider, approval_deadline=approval_deadline,
                     payment_timeout=payment_timeout)
    async with Runtime(SqliteStore(db)) as rt, \
            Worker(SqliteStore(db), [workflow], poll_interval=0.05) as worker:
        serving = asyncio.create_task(worker.serve())
        run_id = (await rt.submit(workflow, {"item": "laptop", "amount": 1200})).run_id
        manager = await inbox_entry(rt, run_id, "manager")
        print(f"asked the manager, deadline {manager.expires_at:%H:%M:%S}")
        # nobody answers: at the deadline the worker wakes the run, and it escalates
        director = await inbox_entry(rt, run_id, "director")
        print("escalated to the director")
        await rt.respond(run_id, {director.id: True})
        await rt.wait(run_id, timeout=30)  # waiting for the webhook now
        print(f"charge created: {provider.charges}; waiting for the webhook")
        await rt.send_event(run_id, "payment", {"charge_id": "ch_1", "status": "succeeded"})
        info = await rt.wait(run_id, timeout=30)
        assert info.status is RunStatus.COMPLETED, info
        state = (await rt.get_state(run_id)).values
        await worker.stop()
        await serving
    print(f"approved by the {state['approver']}, paid: {state['paid']}")
    return Purchase.model_validate(state)


if __name__ == "__main__":
    asyncio.run(main())
