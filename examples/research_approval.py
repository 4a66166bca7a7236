"""Research that goes on while an approval waits: ``WorkflowBuilder(..., waits="branch")``.

brief --> market, tech, legal (three research agents) --> report (a join after all four)
      \\-> approve (a person approves the budget) ---------/

Three research agents and one approval start in the same superstep. The
approval stops on ``ctx.request``; with ``waits="branch"`` it is *parked*:
the research agents' answers merge at the barrier and the run goes on
without it (each agent then checks its sources in a second superstep). The
report is a join after all four, so it waits for the approval. The run is
``waiting`` once nothing but the parked approval is left, with every
finding already on the blackboard; the answer then runs the approval again
from the top, and the join writes the report.

The agents' models are ``ScriptedModel`` functions, so this runs without a
network or an API key. Run: ``python examples/research_approval.py``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel

from durable_flow import (
    END,
    Blackboard,
    Message,
    NodeContext,
    RunStatus,
    Runtime,
    SqliteStore,
    Workflow,
    WorkflowBuilder,
    append,
)
from durable_flow.testing import ScriptedModel

TOPICS = ("market", "tech", "legal")


class Budget(BaseModel):
    """What the approver answers."""

    approved: bool
    limit_eur: int = 0


class Study(Blackboard):
    question: str = ""
    market: str = ""
    tech: str = ""
    legal: str = ""
    checked: Annotated[list[str], append] = []
    approved: bool = False
    limit_eur: int = 0
    report: str = ""


def researcher(topic: str) -> ScriptedModel:
    """A stand-in for a real model: one short finding about ``topic``."""

    def reply(messages: list[Message]) -> str:
        return f"{topic}: {messages[-1].content.split(': ', 1)[-1]} looks promising"

    return ScriptedModel(reply, name=f"{topic}-researcher")


def build() -> Workflow:
    """brief -> (market, tech, legal -> check_*) and approve -> report."""
    b = WorkflowBuilder("research", state=Study, waits="branch")

    @b.node()
    async def brief(state: Study) -> dict[str, Any]:
        return {"question": state.question.strip()}

    for topic in TOPICS:
        b.add_agent(topic, researcher(topic), instructions=f"Research the {topic} side.",
                    input_template="Question: {question}", output_key=topic, history="none")
        b.add_node(f"check_{topic}", checker(topic))
        b.add_edge("brief", topic).add_edge(topic, f"check_{topic}")

    @b.node()
    async def approve(state: Study, ctx: NodeContext) -> dict[str, Any]:
        answer = await ctx.request({"question": f"Fund a study of {state.question!r}?"},
                                   response_type=Budget)
        return {"approved": answer.approved, "limit_eur": answer.limit_eur}

    @b.node()
    async def report(state: Study) -> dict[str, Any]:
        verdict = f"approved up to {state.limit_eur} EUR" if state.approved else "not funded"
        return {"report": f"{state.question}: {verdict}; " + "; ".join(
            getattr(state, t) for t in TOPICS)}

    b.set_entry("brief").add_edge("brief", "approve")
    b.add_fan_in([*(f"check_{t}" for t in TOPICS), "approve"], "report")
    b.add_edge("report", END)
    return b.build()


def checker(topic: str) -> Any:
    """The second research step: a finding is checked (the run goes on past the approval)."""

    async def check(state: Study) -> dict[str, Any]:
        await asyncio.sleep(0.05)  # I/O: fetching the sources
        return {"checked": [topic]}

    return check


async def main(db: Path = Path("research.db")) -> Study:
    """Run until only the approval is left, answer it, return the final state."""
    workflow = build()
    async with Runtime(SqliteStore(db)) as rt:
        result = await rt.run(workflow, {"question": "solar roofs for schools"})
        state = await rt.get_state(result.run_id)
        [parked] = state.parked
        print(f"run {result.run_id} is {result.status.value}; parked: {parked.node} "
              f"since superstep {parked.since_superstep}, waiting for {parked.kind}")
        done = sorted(t for t in TOPICS if state.values[t])
        print(f"research finished while the approval waited: {', '.join(done)} "
              f"(checked: {', '.join(sorted(state.values['checked']))})")
        [request] = result.pending_requests
        print("asked:", request.payload["question"])
        result = await rt.resume(workflow, result.run_id,
                                 responses={request.id: {"approved": True, "limit_eur": 5000}})
    assert result.status is RunStatus.COMPLETED, result.error
    final = result.state
    assert isinstance(final, Study)
    print("joined:", final.report)
    return final


if __name__ == "__main__":
    asyncio.run(main())
