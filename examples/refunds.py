"""Refunds: an agent proposes them, a person approves each call, a payment left in doubt is asked about.

A support agent (a scripted model here, any ``ChatModel`` in real life) reads
a complaint and proposes two refunds with the ``refund`` tool. The tool is
marked ``durable_flow.tool(approval=Approval(roles=["finance"]))``, so each
call waits for someone in finance, who sees the tool and its exact
arguments: fiona approves the first and refuses the second (the model is told
why, and the refund never runs). Then ``payout`` transfers the total with
``ctx.step("transfer", ..., in_doubt="ask")``.

The transfer runs in a child process that is killed (SIGKILL) right after
the bank took the money and before the result was recorded. On resume the
step does not pay again on a guess: it opens an ``in_doubt`` request. Fiona
checks the bank statement, answers ``InDoubtDecision(done=True, result=...)``
with the bank's reference, and the run completes. The bank saw one transfer.

    python examples/refunds.py
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from durable_flow import (
    END,
    Approval,
    Blackboard,
    InDoubtDecision,
    Message,
    NodeContext,
    Principal,
    RunLockedError,
    Runtime,
    SqliteStore,
    ToolCall,
    ToolDecision,
    WorkflowBuilder,
    tool,
)
from durable_flow.testing import ScriptedModel

FIONA = Principal("fiona@example.com", roles=("finance",))
FOLDER = Path(os.path.abspath(os.environ.get("REFUNDS_DIR", ".")))


class Case(Blackboard):
    complaint: str = ""
    answer: str = ""
    paid: str = ""


def _append(name: str, line: str) -> int:
    """Append a line to one of the outside systems' files; returns how many lines it has."""
    path = FOLDER / name
    with path.open("a") as fh:
        fh.write(line + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    return len(path.read_text().splitlines())


def lines(name: str) -> list[str]:
    """What an outside system recorded (``refunds.txt``: the book, ``bank.txt``: transfers)."""
    path = FOLDER / name
    return path.read_text().splitlines() if path.exists() else []


@tool(approval=Approval(title="Refund a customer", roles=["finance"]))
def refund(order: str, amount: int) -> str:
    """Book a refund of ``amount`` EUR on an order."""
    _append("refunds.txt", f"{order} {amount}")
    return f"refund of {amount} EUR on {order} booked"


def support(messages: list[Message]) -> Any:
    """The scripted model: two refunds first, then a reply built from what the tools said."""
    results = [m.content for m in messages if m.role == "tool"]
    if not results:
        return Message.assistant(tool_calls=[
            ToolCall(id="r1", name="refund", arguments={"order": "A-7", "amount": 40}),
            ToolCall(id="r2", name="refund", arguments={"order": "B-2", "amount": 500})])
    return "Dear customer: " + " / ".join(results)


def transfer(order_total: int) -> str:
    """Send the money (the bank's side: one line per transfer, its reference returned)."""
    number = _append("bank.txt", f"transfer {order_total} EUR")
    if os.environ.get("REFUNDS_KILL") == "transfer":
        os.kill(os.getpid(), signal.SIGKILL)  # the bank has it; the run has not recorded it
    return f"bank-ref-{number}"


b = WorkflowBuilder("refunds", state=Case)
b.add_agent("desk", ScriptedModel(support), instructions="Refund what we owe.",
            input_key="complaint", tools=[refund])


@b.node()
async def payout(state: Case, ctx: NodeContext) -> dict[str, Any]:
    total = await ctx.step("total", lambda: sum(int(x.split()[1]) for x in lines("refunds.txt")))
    reference = await ctx.step("transfer", transfer, total, in_doubt="ask")
    return {"paid": reference}


b.set_entry("desk")
b.add_edge("desk", "payout")
b.add_edge("payout", END)
workflow = b.build()
RUN = "refund-case-1"


async def child(db: str) -> None:
    """Continue the run until the transfer, where this process dies."""
    # the default 30 s lease: on SQLite the parent takes a killed holder's lease at once
    async with Runtime(SqliteStore(db)) as rt:
        await rt.resume(workflow, RUN)


async def _resume(rt: Runtime, **kwargs: Any) -> Any:
    while True:
        try:
            return await rt.resume(workflow, RUN, **kwargs)
        except RunLockedError:
            await asyncio.sleep(0.1)  # the child still stopping: it lets go soon


async def main(db: Path = Path("refunds.db")) -> dict[str, Any]:
    """Run the case; returns what the outside systems saw and what the run ended with."""
    async with Runtime(SqliteStore(db)) as rt:
        r = await rt.run(workflow, {"complaint": "Two orders arrived broken."}, run_id=RUN)
        first = r.pending_requests[0]
        print(f"{first.title}: {first.payload['tool']} {first.payload['arguments']}")
        r = await rt.resume(workflow, RUN, responses={first.id: ToolDecision(approve=True)},
                            by=FIONA)
        second = r.pending_requests[0]
        print(f"{second.title}: {second.payload['tool']} {second.payload['arguments']}")
        await rt.respond(RUN, {second.id: ToolDecision(
            approve=False, comment="over 300 EUR needs the receipt")}, by=FIONA)
    env = {**os.environ, "REFUNDS_KILL": "transfer", "REFUNDS_DIR": str(FOLDER)}
    proc = await asyncio.to_thread(
        subprocess.run, [sys.executable, __file__, "--child", str(db)], env=env, check=False)
    print("child exit code:", proc.returncode, "(-9 is SIGKILL); the bank saw:", lines("bank.txt"))
    async with Runtime(SqliteStore(db)) as rt:
        r = await _resume(rt)
        doubt = r.pending_requests[0]
        print(f"{doubt.title} started at {doubt.payload['started_at']}, "
              f"arguments {doubt.payload['arguments']}")
        reference = f"bank-ref-{len(lines('bank.txt'))}"  # fiona reads it off the statement
        r = await rt.resume(workflow, RUN, by=FIONA, responses={
            doubt.id: InDoubtDecision(done=True, result=reference)})
        state: Any = r.state
        print(f"{r.status.value}: paid {state.paid}; {state.answer}")
        decisions = [d.kind for d in await rt.decisions(RUN)]
        return {"status": r.status.value, "paid": state.paid, "answer": state.answer,
                "refunds": lines("refunds.txt"), "bank": lines("bank.txt"),
                "asked": doubt.payload, "decisions": decisions}


if __name__ == "__main__":
    if "--child" in sys.argv:
        asyncio.run(child(sys.argv[-1]))
    else:
        asyncio.run(main())
