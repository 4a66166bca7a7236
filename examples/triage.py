"""Triage with reducers and routing: classify tickets in parallel, route by score.

Three scorers run in parallel and write to reducer fields (summed scores,
appended notes, merged tags) without conflicts; a switch routes to the right
queue by a safe expression over the merged state.

    python examples/triage.py
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from durable_flow import END, Blackboard, MemoryStore, Runtime, WorkflowBuilder, add, append, merge


class Ticket(Blackboard):
    text: str = ""
    urgency: Annotated[int, add] = 0
    notes: Annotated[list[str], append] = []
    tags: Annotated[dict[str, str], merge] = {}
    queue: str = ""


b = WorkflowBuilder("triage", state=Ticket)


@b.node()
def keywords(state: Ticket) -> dict[str, Any]:
    hits = [w for w in ("outage", "down", "urgent") if w in state.text.lower()]
    return {"urgency": 2 * len(hits), "notes": [f"keywords: {hits}"], "tags": {"kw": str(len(hits))}}


@b.node()
def customer(state: Ticket) -> dict[str, Any]:
    vip = "enterprise" in state.text.lower()
    return {"urgency": 3 if vip else 0, "notes": [f"vip: {vip}"], "tags": {"tier": "vip" if vip else "std"}}


@b.node()
def sentiment(state: Ticket) -> dict[str, Any]:
    angry = state.text.count("!")
    return {"urgency": min(angry, 2), "notes": [f"exclamations: {angry}"]}


@b.node()
def triage(state: Ticket) -> None:
    return None


def queue(name: str) -> Any:
    def put(state: Ticket) -> dict[str, Any]:
        return {"queue": name}

    return put


b.add_node("start", lambda s: None)
b.set_entry("start")
for scorer in ("keywords", "customer", "sentiment"):
    b.add_edge("start", scorer)
b.add_fan_in(["keywords", "customer", "sentiment"], "triage")
for name in ("pager", "priority", "backlog"):
    b.add_node(name, queue(name))
    b.add_edge(name, END)
b.add_switch("triage", [("urgency >= 6", "pager"), ("urgency >= 3", "priority")], default="backlog")
workflow = b.build()


async def main(text: str = "Enterprise checkout is DOWN! outage!!") -> str:
    """Triage one ticket; returns the queue it landed in."""
    async with Runtime(MemoryStore()) as rt:
        result = await rt.run(workflow, {"text": text})
        state: Any = result.state
        print(f"urgency {state.urgency} -> {state.queue}; tags {state.tags}")
        for cp in reversed(await rt.history(result.run_id)):
            print(f"  superstep {cp.superstep}: ran {list(cp.nodes)} {cp.routing_reason or ''}")
        return str(state.queue)


if __name__ == "__main__":
    asyncio.run(main())
