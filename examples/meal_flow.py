"""The meal flow, defined in meal_flow.json, run on an in-memory store.

Greeter -> meal (skipped when flags.skip_meal) -> glucose (a sub-workflow
from glucose_check.json, skipped when flags.skip_glucose) -> alert when the
reading is high (first matching connection wins) -> feedback.

    python examples/meal_flow.py
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from durable_flow import MemoryStore, NodeContext, RunResult, Runtime, load_workflow, to_mermaid

HERE = Path(__file__).parent


def greeter(state: Any) -> dict[str, Any]:
    return {"greeting": f"Hello {state.user}!", "log": ["greeted"]}


def meal_logger(state: Any) -> dict[str, Any]:
    return {"meal": "oatmeal with berries", "log": ["meal logged"]}


async def glucose_meter(state: Any, ctx: NodeContext) -> dict[str, Any]:
    if state.reading is not None:
        return {"notes": [f"reading given: {state.reading}"]}
    # A durable side effect: after a crash the recorded reading is reused.
    reading = await ctx.step("read_sensor", lambda: 5.4)
    return {"reading": reading, "notes": [f"sensor read: {reading}"]}


def glucose_classifier(state: Any) -> dict[str, Any]:
    status = "low" if state.reading < 4.0 else "normal" if state.reading <= 7.8 else "high"
    return {"status": status, "notes": [f"glucose {status}"]}


def alert(state: Any) -> dict[str, Any]:
    return {"log": ["alert: glucose is high"]}


def feedback(state: Any) -> dict[str, Any]:
    # This node sees only the keys its connections pass (context_passed).
    meal = state.meal or "no meal logged"
    glucose = state.glucose_status or "not checked"
    return {"feedback": f"{state.user}: {meal}; glucose {glucose}"}


REGISTRY = {
    "greeter": greeter, "meal_logger": meal_logger, "glucose_meter": glucose_meter,
    "glucose_classifier": glucose_classifier, "alert": alert, "feedback": feedback,
}

SCENARIOS: dict[str, dict[str, Any]] = {
    "everything": {"user": "Ann", "glucose": 9.1},
    "skip meal": {"user": "Bo", "flags": {"skip_meal": True}},
    "skip glucose": {"user": "Cy", "flags": {"skip_glucose": True}},
}


async def main() -> dict[str, RunResult]:
    workflow = load_workflow(HERE / "meal_flow.json", REGISTRY)
    results = {}
    async with Runtime(MemoryStore()) as runtime:
        for name, data in SCENARIOS.items():
            result = await runtime.run(workflow, data)
            result.raise_for_status()
            results[name] = result
            print(f"{name:>13}: {result.state.feedback}  log={result.state.log}")
    print()
    print(to_mermaid(workflow))
    return results


if __name__ == "__main__":
    asyncio.run(main())
