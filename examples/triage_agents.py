"""Support-ticket triage with three agents, offline.

classify (structured union output) --route_by_type--> investigate (tool) --> write
                                                  \\-> billing_note (transform) -/
                                                  \\-> write (default)

The models are ``ScriptedModel`` functions, so this runs without a network
or an API key; swap them for ``OpenAIChatModel("gpt-4o-mini")`` to use a real
model. Run: ``python examples/triage_agents.py``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Literal

from pydantic import BaseModel

from durable_flow import END, Blackboard, Message, Runtime, ToolCall, Workflow, WorkflowBuilder
from durable_flow.testing import MemoryStore, ScriptedModel
from durable_flow.transforms import default


class Billing(BaseModel):
    """A question about an invoice or a charge."""

    invoice_id: str | None = None
    summary: str


class Outage(BaseModel):
    """A service that does not work."""

    service: str
    severity: Literal["low", "high"] = "low"
    summary: str


class Other(BaseModel):
    """Anything else."""

    summary: str


class Ticket(Blackboard):
    body: str
    summary: str = ""
    invoice_id: str | None = None
    service: str = ""
    severity: str = ""
    matched_type: str | None = None
    result: Billing | Outage | Other | None = None
    findings: str = ""
    reply: str = ""


def service_status(service: str) -> str:
    """Look up the public status of a service."""
    return {"email": "degraded since 09:12 UTC, fix rolling out"}.get(service, "operational")


# --- scripted models: deterministic stand-ins for real chat models ---------------


def classifier_script(messages: list[Message]) -> str:
    text = messages[-1].content.lower()
    if "down" in text or "not working" in text:
        return json.dumps({"service": "email", "severity": "high", "summary": "email is down"})
    if "invoice" in text or "charged" in text:
        return json.dumps({"invoice_id": "INV-1042", "summary": "double charge on an invoice"})
    return json.dumps({"summary": "general question"})


def investigator_script(messages: list[Message]) -> Message | str:
    results = [m for m in messages if m.role == "tool"]
    if not results:
        call = ToolCall(id="status-1", name="service_status", arguments={"service": "email"})
        return Message.assistant(tool_calls=[call])
    return f"Status page says email is {results[-1].content}."


def writer_script(messages: list[Message]) -> str:
    ticket = messages[-1].content
    findings = ticket.split("Findings: ", 1)[-1].strip() or "We are looking into it."
    return f"Thanks for reaching out. {findings} We will keep you posted."


def build() -> Workflow:
    b = WorkflowBuilder("triage", state=Ticket)
    b.add_agent("classify", ScriptedModel(classifier_script, name="classifier"),
                instructions="Classify the support ticket as Billing, Outage or Other.",
                input_key="body", output=(Billing, Outage, Other), history="none")
    b.add_agent("investigate", ScriptedModel(investigator_script, name="investigator"),
                instructions="You investigate outages of {service} (severity {severity}).",
                input_template="Customer wrote: {body}", output_key="findings",
                tools=[service_status])
    b.add_transform("billing_note", default(
        findings="Billing questions are answered within one business day."))
    b.add_agent("write", ScriptedModel(writer_script, name="writer"),
                instructions="Write a short, kind reply about this {matched_type} ticket.",
                input_template="Ticket: {body}\nSummary: {summary}\nFindings: {findings}",
                output_key="reply", history="none")
    b.set_entry("classify")
    b.route_by_type("classify", {Outage: "investigate", Billing: "billing_note"}, default="write")
    b.add_edge("investigate", "write")
    b.add_edge("billing_note", "write")
    b.add_edge("write", END)
    return b.build()


async def main() -> list[Ticket]:
    workflow = build()
    print(workflow.explain())
    done = []
    async with Runtime(MemoryStore()) as rt:
        for body in ("My email is down since this morning!",
                     "I was charged twice on my last invoice.",
                     "Do you have a student discount?"):
            result = await rt.run(workflow, {"body": body})
            result.raise_for_status()
            state = result.state
            assert isinstance(state, Ticket)
            print(f"\n{body}\n  -> {state.matched_type}: {state.summary}\n  reply: {state.reply}")
            done.append(state)
    return done


if __name__ == "__main__":
    asyncio.run(main())
