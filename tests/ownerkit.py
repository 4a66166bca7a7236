"""Helpers for ownership tests: a store seen through a faulty connection, and a journal.

``Faulty`` wraps a store object and makes the calls a test names stall (never
return, like a frozen connection), fail, or run slowly, while every other
call goes through. ``Journal`` records when each execution of a node starts
and stops, tagged by who ran it, so a test can count overlapping executions.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from durable_flow import END, Blackboard, WorkflowBuilder


class Faulty:
    """``inner`` with chosen methods stalled, failed or delayed; everything else unchanged.

    ``stall``: method names that never return while ``stalled`` is set.
    ``delay_after``: method name -> seconds slept after the real call returned
    (a reply that is slow to come back). ``calls`` counts calls by name.
    """

    def __init__(self, inner: Any, *, stall: tuple[str, ...] = (),
                 delay_after: dict[str, float] | None = None,
                 on_call: dict[str, Callable[[Any], Awaitable[Any]]] | None = None) -> None:
        self._inner = inner
        self._stall = set(stall)
        self._delay_after = delay_after or {}
        self._on_call = on_call or {}
        self.stalled = asyncio.Event()
        self.stalled.set()
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr) or name.startswith("_"):
            return attr
        if name not in self._stall and name not in self._delay_after and name not in self._on_call:
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            if name in self._stall and self.stalled.is_set():
                await asyncio.Event().wait()  # a frozen connection: no reply, ever
            result = await attr(*args, **kwargs)
            if name in self._on_call:
                result = await self._on_call[name](result)
            if name in self._delay_after:
                await asyncio.sleep(self._delay_after[name])
            return result

        return call


@dataclass
class Journal:
    """When each execution of a node ran, by who; and side effects counted by name."""

    spans: list[tuple[str, str, float, float | None]] = field(default_factory=list)
    effects: dict[str, int] = field(default_factory=dict)

    def start(self, who: str, node: str) -> int:
        self.spans.append((who, node, time.monotonic(), None))
        return len(self.spans) - 1

    def stop(self, index: int) -> None:
        who, node, began, _ = self.spans[index]
        self.spans[index] = (who, node, began, time.monotonic())

    def effect(self, name: str) -> None:
        self.effects[name] = self.effects.get(name, 0) + 1

    def overlaps(self) -> list[tuple[str, str]]:
        """Pairs of executions of one node (by anyone) that ran at the same time."""
        found = []
        spans = [(w, n, b, e if e is not None else float("inf")) for w, n, b, e in self.spans]
        for i, (w1, n1, b1, e1) in enumerate(spans):
            for w2, n2, b2, e2 in spans[i + 1:]:
                if n1 == n2 and b1 < e2 and b2 < e1:
                    found.append((w1, w2))
        return found


class Charge(Blackboard):
    charged: int = 0
    shipped: bool = False


def charging(journal: Journal, who: str, *, hold: float) -> Any:
    """One node that charges a card (a durable step), works for ``hold`` seconds, then ships."""
    b = WorkflowBuilder("charging", state=Charge)

    @b.node()
    async def charge(state: Charge, ctx: Any) -> dict[str, Any]:
        span = journal.start(who, "charge")
        try:
            await ctx.step("charge card", lambda: journal.effect("charge card") or 1)
            await asyncio.sleep(hold)
            await ctx.step("ship", lambda: journal.effect("ship") or 1)
        finally:
            journal.stop(span)
        return {"charged": 1, "shipped": True}

    b.set_entry("charge").add_edge("charge", END)
    return b.build()
