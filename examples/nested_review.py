"""Nested review: research and review sub-workflows; review holds a legal one.

The legal sub-workflow asks a person for sign-off. The request surfaces on
the parent run with its qualified path (``review.legal.signoff``) and the
answer is routed back through the parent's ``resume``.

    python examples/nested_review.py
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

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


class Research(Blackboard):
    topic: str = ""
    findings: Annotated[list[str], append] = []


class Legal(Blackboard):
    text: str = ""
    signed_off: bool = False


class ReviewState(Blackboard):
    text: str = ""
    style_ok: bool = False
    signed_off: bool = False


class Article(Blackboard):
    topic: str = ""
    findings: list[str] = []
    text: str = ""
    signed_off: bool = False
    published: bool = False


def research_workflow() -> Any:
    b = WorkflowBuilder("research", state=Research)

    @b.node()
    def search(state: Research) -> dict[str, Any]:
        return {"findings": [f"{state.topic} rise twice a day"]}

    @b.node()
    def verify(state: Research) -> dict[str, Any]:
        return {"findings": [f"verified {len(state.findings)} finding(s)"]}

    b.set_entry("search")
    b.add_edge("search", "verify")
    return b.build()


def legal_workflow() -> Any:
    b = WorkflowBuilder("legal", state=Legal)

    @b.node()
    async def signoff(state: Legal, ctx: NodeContext) -> dict[str, Any]:
        ok = await ctx.request({"text": state.text, "question": "legal sign-off?"},
                               response_type=bool)
        return {"signed_off": ok}

    b.set_entry("signoff")
    return b.build()


def review_workflow() -> Any:
    b = WorkflowBuilder("review", state=ReviewState)

    @b.node()
    def style(state: ReviewState) -> dict[str, Any]:
        return {"style_ok": len(state.text) < 500}

    b.add_subworkflow("legal", legal_workflow(), inputs=["text"], outputs=["signed_off"])
    b.set_entry("style")
    b.add_edge("style", "legal")
    return b.build()


def build() -> Any:
    b = WorkflowBuilder("nested-review", state=Article)
    b.add_subworkflow("research", research_workflow(), inputs=["topic"], outputs=["findings"])

    @b.node()
    def draft(state: Article) -> dict[str, Any]:
        return {"text": f"On {state.topic}: " + "; ".join(state.findings)}

    b.add_subworkflow("review", review_workflow(), inputs=["text"], outputs=["signed_off"])

    @b.node()
    def publish(state: Article) -> dict[str, Any]:
        return {"published": state.signed_off}

    b.set_entry("research")
    b.add_edge("research", "draft")
    b.add_edge("draft", "review")
    b.add_edge("review", "publish")
    b.add_edge("publish", END)
    return b.build()


workflow = build()


async def main(db: Path = Path("nested_review.db")) -> bool:
    """Run until the legal sign-off, answer it from a new runtime, finish."""
    async with Runtime(SqliteStore(db)) as rt:
        result = await rt.run(workflow, {"topic": "tides"})
        assert result.status is RunStatus.WAITING
        [req] = result.pending_requests
        print(f"waiting on {req.node}: {req.payload}")
        inner = (await rt.get_state(result.run_id)).subworkflows["review"]
        print("review is at superstep", inner.superstep, "with", inner.values)
    async with Runtime(SqliteStore(db)) as rt:
        result = await rt.resume(workflow, result.run_id, responses={req.id: True})
        assert result.status is RunStatus.COMPLETED
        print("published:", result.state.published)  # type: ignore[attr-defined]
        return bool(result.state.published)  # type: ignore[attr-defined]


if __name__ == "__main__":
    asyncio.run(main())
