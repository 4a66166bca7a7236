"""Approval loop: a draft is written, a person approves or rejects with a comment.

A rejection loops back to the writer, whose revised draft answers the comment;
an approval publishes through a durable step: the post is appended to the
blog's file exactly once, even though the publish node is retried (its
announcement to a flaky feed fails the first time), because the retry gets
the recorded result of ``ctx.step`` instead of publishing again. The final
answer comes from a new runtime on the same database file, as it would from
another process days later.

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
    RetryPolicy,
    RunStatus,
    Runtime,
    SqliteStore,
    Workflow,
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


class Blog:
    """The outside world: publishing appends one line per post to a file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.announcements: list[str] = []
        self.announce_attempts = 0

    def publish(self, topic: str, draft: str) -> str:
        """The side effect that must happen once: write the post."""
        url = f"https://blog.example/{topic}"
        with self.path.open("a", encoding="utf-8") as f:
            f.write(f"{url}\t{draft}\n")
        return url

    def posts(self) -> list[str]:
        """Every published post, one line each."""
        return self.path.read_text(encoding="utf-8").splitlines() if self.path.exists() else []

    def announce(self, url: str) -> None:
        """Tell the feed; it times out on the first attempt."""
        self.announce_attempts += 1
        if self.announce_attempts == 1:
            raise ConnectionError("the announcement feed timed out")
        self.announcements.append(url)


def build(blog: Blog) -> Workflow:
    """write -> review -> (approved: publish | rejected: write again)."""
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

    @b.node(retry=RetryPolicy(max_attempts=3, initial_delay=0.01, jitter=False))
    async def publish(state: Post, ctx: NodeContext) -> dict[str, Any]:
        # recorded as soon as it returns: the retry below gets the url back
        # from the store and does not publish a second time
        url = await ctx.step("push", blog.publish, state.topic, state.draft)
        blog.announce(url)  # fails once: the node is retried
        return {"url": url}

    b.set_entry("write")
    b.add_edge("write", "review")
    b.add_switch("review", [("approved", "publish")], default="write")
    b.add_edge("publish", END)
    return b.build()


async def main(db: Path = Path("approval.db"), blog: Blog | None = None) -> Post:
    """Run once, reject once, approve: returns the final state."""
    blog = blog or Blog(Path("approval_blog.txt"))
    workflow = build(blog)
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
    state = result.state
    assert isinstance(state, Post)
    print("published:", state.url)
    print(f"announce attempts: {blog.announce_attempts}, posts in {blog.path}: {len(blog.posts())}")
    return state


if __name__ == "__main__":
    asyncio.run(main())
