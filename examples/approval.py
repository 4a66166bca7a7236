"""Approval loop: a draft is written, a person approves or rejects with a comment.

A rejection loops back to the writer with the comment; an approval publishes
through a durable step (the side effect happens once, whatever is retried).

    python examples/approval.py
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel

from durable_flow import (
    END,
    Blackboard,
    NodeContext,
    RunStatus,
    Runtime,
    SqliteStore,
    WorkflowBuilder,
    append,
)


class Review(BaseModel):
    """What the approver answers."""

    approved: bool
    comment: str = ""


class Post(Blackboard):
    topic: str = ""
    draft: str = ""
    comments: Annotated[list[str], append] = []
    approved: bool = False
    url: str = ""


b = WorkflowBuilder("approval", state=Post)


@b.node()
async def write(state: Post) -> dict[str, Any]:
    fixes = f" (revised: {'; '.join(state.comments)})" if state.comments else ""
    return {"draft": f"A post about {state.topic}{fixes}"}


@b.node()
async def review(state: Post, ctx: NodeContext) -> dict[str, Any]:
    answer = await ctx.request({"draft": state.draft}, response_type=Review)
    if answer.approved:
        return {"approved": True}
    return {"approved": False, "comments": [answer.comment]}


@b.node()
async def publish(state: Post, ctx: NodeContext) -> dict[str, Any]:
    def push() -> str:
        return f"https://blog.example/{state.topic}"

    return {"url": await ctx.step("push", push)}


b.set_entry("write")
b.add_edge("write", "review")
b.add_switch("review", [("approved", "publish")], default="write")
b.add_edge("publish", END)
workflow = b.build()


async def main(db: Path = Path("approval.db")) -> str:
    """Run once, reject once, approve: returns the published url."""
    async with Runtime(SqliteStore(db)) as rt:
        result = await rt.run(workflow, {"topic": "tides"})
        req = result.pending_requests[0]
        print("asked:", req.payload)
        result = await rt.resume(workflow, result.run_id,
                                 responses={req.id: {"approved": False, "comment": "shorter"}})
        req = result.pending_requests[0]
        print("asked again:", req.payload)
    # the answer may come from another process, days later: a new runtime, same file
    async with Runtime(SqliteStore(db)) as rt:
        result = await rt.resume(workflow, result.run_id, responses={req.id: {"approved": True}})
        assert result.status is RunStatus.COMPLETED
        print("published:", result.state.url)  # type: ignore[attr-defined]
        return str(result.state.url)  # type: ignore[attr-defined]


if __name__ == "__main__":
    asyncio.run(main())
