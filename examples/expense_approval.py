"""Expense approval: a policy for small amounts, a finance role, a two-step escalation, webhooks.

An expense claim is approved by the ``finance`` role. Small claims (under
100 EUR) are answered at once by the policy ``small-expenses``, and nobody
is asked. A larger claim waits for finance; unanswered by its deadline it is
escalated to the ``manager`` role, with a new deadline of the same length;
unanswered again, a second step asks the ``cfo``, and without an answer the
claim is refused. A ``Worker`` runs the flow: it wakes the run at each
deadline and delivers every notification (the request opening, each
escalation) to a webhook, at least once. Every answer, policy answer and
escalation is a decision in the run's hash-chained audit trail.

    python examples/expense_approval.py   # the same flow, with deadlines of 1.5 seconds
"""

from __future__ import annotations

import asyncio
import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from durable_flow import (
    END,
    Blackboard,
    NodeContext,
    PendingRequest,
    Policy,
    Principal,
    RunLockedError,
    RunStatus,
    Runtime,
    SqliteStore,
    WebhookNotifier,
    Worker,
    WorkflowBuilder,
)


class Expense(Blackboard):
    claimant: str = ""
    amount: int = 0
    reason: str = ""
    approved: bool | None = None


SMALL = Policy("small-expenses", "amount < 100", True)


def build(*, deadline: timedelta = timedelta(days=2)) -> Any:
    """The flow: finance (escalating to the managers), then the CFO if nobody answered."""
    b = WorkflowBuilder("expense_approval", state=Expense)

    def claim(state: Expense) -> dict[str, Any]:
        return {"question": f"Approve {state.amount} EUR for {state.claimant}?",
                "claimant": state.claimant, "amount": state.amount, "reason": state.reason}

    @b.node()
    async def finance(state: Expense, ctx: NodeContext) -> dict[str, Any]:
        answer = await ctx.request(claim(state), bool, roles=["finance"], timeout=deadline,
                                   escalate_to=["role:manager"], default=None, policy=SMALL)
        return {"approved": answer}

    @b.node()
    async def cfo(state: Expense, ctx: NodeContext) -> dict[str, Any]:
        if state.approved is not None:
            return {}
        answer = await ctx.request(claim(state), bool, assignees=["cfo@example.com"],
                                   timeout=deadline, default=False)
        return {"approved": answer}

    b.set_entry("finance").add_edge("finance", "cfo").add_edge("cfo", END)
    return b.build()


class Hook:
    """A local webhook receiver: keeps each notification's JSON."""

    def __init__(self) -> None:
        received: list[dict[str, Any]] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.received = received
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/hook"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


async def waiting_for(rt: Runtime, run_id: str, *, escalated: bool) -> PendingRequest:
    """The run's open request once it is (or is not yet) escalated and the worker let go.

    The worker escalates inside an execution of the run; an answer is taken once that
    execution committed and released the run (until then `respond` raises RunLockedError).
    """
    while True:
        if (await rt.get_run(run_id)).status is RunStatus.WAITING:
            for req in await rt.pending_requests():
                if req.run_id == run_id and req.escalated == escalated:
                    return req
        await asyncio.sleep(0.05)


async def answer(rt: Runtime, run_id: str, request_id: str, value: Any, *, by: Principal,
                 comment: str) -> None:
    """Answer a request; while a worker holds the run for a moment (it escalates, or wakes
    it at a deadline), ``respond`` raises RunLockedError and the answer is sent again."""
    for _ in range(300):
        try:
            await rt.respond(run_id, {request_id: value}, by=by, comment=comment)
            return
        except RunLockedError:
            await asyncio.sleep(0.1)
    raise TimeoutError(f"run {run_id} stayed locked")


async def finished(rt: Runtime, run_id: str) -> None:
    """Wait until the run completed (its deadlines pass while it waits)."""
    while True:
        if (await rt.get_run(run_id)).status is RunStatus.COMPLETED:
            return
        await asyncio.sleep(0.05)


async def main(db: Path = Path("expenses.db"), *,
               deadline: timedelta = timedelta(seconds=1.5)) -> dict[str, Any]:
    """A small claim (the policy), one the manager approves after the escalation, one nobody does."""
    workflow, hook = build(deadline=deadline), Hook()
    try:
        async with Runtime(SqliteStore(db)) as rt, \
                Worker(SqliteStore(db), [workflow], poll_interval=0.05,
                       notifiers=[WebhookNotifier(hook.url)]) as worker:
            serving = asyncio.create_task(worker.serve())
            small = (await rt.submit(workflow, {"claimant": "alice", "amount": 40})).run_id
            large = (await rt.submit(workflow, {"claimant": "bob", "amount": 900,
                                                "reason": "conference"})).run_id
            lost = (await rt.submit(workflow, {"claimant": "carol", "amount": 500})).run_id
            await asyncio.wait_for(finished(rt, small), 30)
            print("alice's 40 EUR: answered by the policy small-expenses")
            escalated = await waiting_for(rt, large, escalated=True)
            print(f"bob's 900 EUR: escalated to {', '.join(escalated.roles)}")
            await answer(rt, large, escalated.id, True, by=Principal("mia", ("manager",)),
                         comment="conference budget")
            await asyncio.wait_for(finished(rt, large), 30)
            await asyncio.wait_for(finished(rt, lost), 30)
            results = {}
            for name, run_id in (("alice", small), ("bob", large), ("carol", lost)):
                chain = await rt.decisions(run_id)
                audit = await rt.verify_audit(run_id)  # chain, anchor and answers
                assert audit.ok, audit.problems
                results[name] = {"approved": (await rt.get_state(run_id)).values["approved"],
                                 "decisions": [(d.kind, d.by) for d in chain]}
                print(f"{name}: approved={results[name]['approved']}; "
                      f"decisions: {results[name]['decisions']}")
            for _ in range(600):  # the outbox delivers each at least once
                if len({n["id"] for n in hook.received}) >= 5:
                    break
                await asyncio.sleep(0.05)
            await worker.stop()
            await serving
        kinds = sorted({(n["id"], n["kind"]) for n in hook.received}, key=lambda x: x[0])
        print(f"webhook notifications: {len(kinds)} ({sum(k == 'escalated' for _, k in kinds)} "
              "escalations)")
        results["notifications"] = [k for _, k in kinds]
        return results
    finally:
        hook.close()


if __name__ == "__main__":
    asyncio.run(main())
