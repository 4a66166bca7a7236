"""Effects that must not repeat, for the crash tests: an in-doubt payment and a refund tool.

Every effect appends a line to ``<EFFECTKIT_DIR>/<run id>.<effect>.txt``
(fsynced, so it survives SIGKILL), so a test counts how often it really
happened in each run. With ``EFFECTKIT_DIE`` naming the effect, the process
SIGKILLs itself right after the effect happened and before its result could
be recorded: the moment that leaves it in doubt.

``paying``: ``pay`` charges in a step with ``in_doubt="ask"``, then ``ship``.
``reconciled``: the same with a ``reconcile`` that reads the effect's file.
``refunding``: an agent whose scripted model calls ``refund`` (approved by a
person, ``in_doubt="ask"``) once, then answers with what the tool said.

Run as ``python tests/effectkit.py DB RUN_ID WORKFLOW [APPROVE]`` it starts
the run (answering a tool approval with APPROVE as JSON) and so dies inside
the effect when ``EFFECTKIT_DIE`` is set.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import orjson
from crashkit_waits import die, open_store

from durable_flow import (
    END,
    NOT_DONE,
    Blackboard,
    Message,
    NodeContext,
    RunStatus,
    Runtime,
    ToolCall,
    WorkflowBuilder,
    tool,
)
from durable_flow.testing import ScriptedModel


def effect_file(run_id: str, effect: str) -> Path:
    """Where the effect ``effect`` of run ``run_id`` leaves its lines."""
    return Path(os.environ["EFFECTKIT_DIR"]) / f"{run_id}.{effect}.txt"


def happened(run_id: str, effect: str) -> int:
    """How many times the effect happened in the run."""
    path = effect_file(run_id, effect)
    return len(path.read_text().splitlines()) if path.exists() else 0


def _effect(run_id: str, effect: str, line: str) -> None:
    with effect_file(run_id, effect).open("a") as fh:
        fh.write(line + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    if os.environ.get("EFFECTKIT_DIE") == effect:
        die()


class Pay(Blackboard):
    order: str = ""
    receipt: str = ""
    shipped: bool = False


def charge(run_id: str, order: str) -> str:
    """Charge the order (an effect that must not happen twice)."""
    _effect(run_id, "charge", order)
    return f"paid {order}"


def found(run_id: str, order: str) -> Any:
    """What the bank says about the charge: its receipt, or NOT_DONE."""
    return f"paid {order} (found)" if happened(run_id, "charge") else NOT_DONE


def _paying(name: str, reconcile: Any) -> Any:
    b = WorkflowBuilder(name, state=Pay)

    @b.node()
    async def pay(state: Pay, ctx: NodeContext) -> dict[str, Any]:
        receipt = await ctx.step("charge", charge, ctx.run_id, state.order, in_doubt="ask",
                                 reconcile=reconcile)
        return {"receipt": receipt}

    @b.node()
    async def ship(state: Pay, ctx: NodeContext) -> dict[str, Any]:
        return {"shipped": await ctx.step("label", lambda: True)}

    b.set_entry("pay")
    b.add_edge("pay", "ship")
    b.add_edge("ship", END)
    return b.build()


paying = _paying("effect-paying", None)
reconciled = _paying("effect-reconciled", found)


class Desk(Blackboard):
    question: str = ""
    answer: str = ""


@tool(approval=True, in_doubt="ask")
def refund(order: str, amount: int, ctx: NodeContext) -> str:
    """Refund part of an order."""
    _effect(ctx.run_id, "refund", f"{order} {amount}")
    return f"refunded {amount} on {order}"


def _script(messages: list[Message]) -> Any:
    results = [m for m in messages if m.role == "tool"]
    if not results:
        return Message.assistant(tool_calls=[
            ToolCall(id="r1", name="refund", arguments={"order": "A-7", "amount": 40})])
    return f"done: {results[-1].content}"


def _refunding() -> Any:
    b = WorkflowBuilder("effect-refunding", state=Desk)
    b.add_agent("desk", ScriptedModel(_script), instructions="Refund what is owed.",
                tools=[refund])
    b.set_entry("desk")
    b.add_edge("desk", END)
    return b.build()


refunding = _refunding()
WORKFLOWS = {"paying": paying, "reconciled": reconciled, "refunding": refunding}
INPUTS: dict[str, dict[str, Any]] = {"paying": {"order": "A-1"}, "reconciled": {"order": "A-1"},
                                     "refunding": {"question": "refund A-7"}}


async def child(db: str, run_id: str, name: str, approve: str | None) -> None:
    """Start the run (answering a tool approval with ``approve``); die inside the effect."""
    wf = WORKFLOWS[name]
    async with Runtime(open_store(db), lease_ttl=3.0) as rt:  # a loaded machine renews late
        r = await rt.run(wf, INPUTS[name], run_id=run_id)
        while r.status is RunStatus.WAITING and approve is not None:
            answers = {q.id: orjson.loads(approve) for q in r.pending_requests}
            r = await rt.resume(wf, run_id, responses=answers)


if __name__ == "__main__":
    asyncio.run(child(sys.argv[1], sys.argv[2], sys.argv[3],
                      sys.argv[4] if len(sys.argv) > 4 else None))
