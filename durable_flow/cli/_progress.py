"""Following a run: a live line while it executes, a summary when it stops."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..model._records import Event, RunResult, RunStatus
from ._output import cell, status_text

__all__ = ["NodeStats", "Tracker", "follow"]


@dataclass
class NodeStats:
    """What one node (qualified path) did during this invocation."""

    runs: int = 0
    retries: int = 0
    seconds: float = 0.0
    outcome: str = "running"
    started: float | None = None


class Tracker:
    """Folds a run's events into what the live display and the summary show.

    ``superstep`` is the top-level superstep in progress; ``written`` counts
    the top-level checkpoints this command wrote (a new run's input
    checkpoint included), so after ``run`` it equals what ``history`` lists.
    ``head`` is the superstep of the run's head checkpoint once it stopped,
    the number ``show`` prints.
    """

    def __init__(self, label: str, run_id: str | None = None) -> None:
        self.label = label
        self.started = time.monotonic()
        self.ended: float | None = None
        self.run_id = run_id or ""
        self.superstep = 0
        self.written = 0
        self.head: int | None = None
        self.nodes: dict[str, NodeStats] = {}

    @property
    def elapsed(self) -> float:
        """Seconds since the command started following the run."""
        return (self.ended or time.monotonic()) - self.started

    def add(self, event: Event) -> None:
        """Account for one event."""
        self.run_id = event.run_id or self.run_id
        top = event.namespace == ""
        if event.kind == "run_started" and "input" in event.data:
            self.written += 1  # the input checkpoint, committed with the new run
        elif event.kind == "superstep_started" and top:
            self.superstep = event.superstep
        elif event.kind == "checkpoint_saved" and top:
            self.written += 1
        elif event.node is not None:
            self._node_event(event.kind, event.node)
        if event.result is not None:
            self._finish(event.result.status)

    def _node_event(self, kind: str, node: str) -> None:
        stats = self.nodes.setdefault(node, NodeStats())
        now = time.monotonic()
        if kind == "node_started":
            stats.runs += 1
            stats.started, stats.outcome = now, "running"
        elif kind == "node_retrying":
            stats.retries += 1
        elif kind in ("node_completed", "node_failed", "request_issued"):
            if stats.started is not None:
                stats.seconds += now - stats.started
                stats.started = None
            stats.outcome = {"node_completed": "completed", "node_failed": "failed",
                             "request_issued": "waiting for input"}[kind]

    def _finish(self, status: RunStatus) -> None:
        self.ended = time.monotonic()
        for stats in self.nodes.values():
            if stats.started is not None:
                stats.seconds += self.ended - stats.started
                stats.started = None
                stats.outcome = "waiting" if status is RunStatus.WAITING else status.value

    def running(self) -> list[str]:
        """Nodes started and not yet finished."""
        return [n for n, s in self.nodes.items() if s.started is not None]

    def __rich__(self) -> RenderableType:
        line = (f"{self.label} · superstep {self.superstep} · "
                f"{self.written} checkpoint(s) written · {self.elapsed:.1f}s")
        from rich.spinner import Spinner

        running = ", ".join(self.running()) or "(between supersteps)"
        return Group(Spinner("dots", text=Text(line)),
                     Text(f"  run {self.run_id or '…'}\n  running: {running}", style="dim"))

    def summary(self, result: RunResult) -> RenderableType:
        """The end-of-run report: one status line and a table of nodes."""
        at = ""
        if self.head is not None and result.status in (RunStatus.WAITING, RunStatus.FAILED):
            # the superstep that stopped, as request ids (approve@2#0) and logs number it
            at = f" in superstep {self.head + 1}"
        elif self.head is not None:
            at = f" at superstep {self.head}"
        head = Text.assemble(
            f"run {result.run_id} ", status_text(result.status),
            f"{at} · {self.written} checkpoint(s) written · {self.elapsed:.2f}s")
        if not self.nodes:
            return head
        table = Table(header_style="bold")
        for name in ("node", "runs", "retries", "time", "outcome"):
            table.add_column(name, overflow="fold")
        for node, s in self.nodes.items():
            style = {"failed": "red", "completed": "green"}.get(s.outcome, "yellow")
            table.add_row(cell(node), str(s.runs), str(s.retries), f"{s.seconds:.2f}s",
                          Text(s.outcome, style=style))
        return Group(head, table)


async def follow(events: AsyncIterator[Event], tracker: Tracker, console: Console,
                 *, live: bool) -> RunResult:
    """Consume a run's event stream, showing progress when ``live``; return the result."""
    from rich.live import Live  # a terminal only

    result: RunResult | None = None
    display = Live(tracker, console=console, transient=True, refresh_per_second=8) \
        if live and console.is_terminal else None
    if display is not None:
        display.start()
    try:
        async for event in events:
            tracker.add(event)
            result = event.result or result
    finally:
        if display is not None:
            display.stop()
    if result is None:  # pragma: no cover - the runtime always ends with a result
        raise RuntimeError("the run ended without a result")
    return result
