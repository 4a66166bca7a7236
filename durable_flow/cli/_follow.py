"""Executing a run from the command line: the event loop, Ctrl-C, and the final report."""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Awaitable, Callable
from typing import Any

from rich.console import Console
from rich.text import Text

from ..model._records import RunResult, RunStatus
from ..runtime._runtime import Runtime
from ._db import opened
from ._output import emit_json, requests_table, respond_command, status_text
from ._progress import Tracker
from ._support import CliOptions, fail, note, scrub

__all__ = ["execute", "finish", "result_data"]


def execute(opts: CliOptions, body: Callable[[Runtime], Awaitable[RunResult]], tracker: Tracker,
            *, create: bool = False) -> RunResult:
    """Run ``body`` on the ``--db`` runtime; note the head superstep for the summary.

    Ctrl-C stops the execution like a crash would, except that the run's
    lease is released at once: the run stays ``running`` at its last
    checkpoint, and the message says how to continue or cancel it.
    """

    async def go() -> RunResult:
        async with opened(opts, create=create) as rt:
            result = await body(rt)
            head = await rt.history(result.run_id, limit=1)
            tracker.head = head[0].superstep if head else None
            return result

    try:
        return asyncio.run(go())
    except KeyboardInterrupt:
        if not tracker.run_id:
            raise
        fail(interrupted_message(opts, tracker.run_id), 130)


def interrupted_message(opts: CliOptions, run_id: str) -> str:
    """What became of a run whose command was interrupted (read back from the store)."""

    async def status() -> RunStatus:
        async with opened(opts) as rt:
            return (await rt.get_run(run_id)).status

    try:
        now = asyncio.run(status())
    except (Exception, KeyboardInterrupt):
        return f"interrupted; see `{_command(opts, 'show', run_id)}`"
    if now is not RunStatus.RUNNING:
        return f"interrupted: run {run_id} is {now.value}"
    return (f"interrupted: run {run_id} stopped at its last checkpoint and is still running "
            f"(not cancelled; the superstep in progress runs again): "
            f"`{_command(opts, 'resume', run_id)}` continues it, "
            f"`{_command(opts, 'cancel', run_id)}` ends it")


def _command(opts: CliOptions, *args: str) -> str:
    return shlex.join(["durable-flow", *opts.db_args, *args])


def result_data(result: RunResult) -> dict[str, Any]:
    """A RunResult as JSON-ready data (contract field names)."""
    return {"run_id": result.run_id, "status": result.status, "checkpoint_id": result.checkpoint_id,
            "state": result.state, "pending_requests": result.pending_requests,
            "error": result.error}


def finish(opts: CliOptions, result: RunResult, console: Console, *, as_json: bool,
           tracker: Tracker | None = None) -> None:
    """Report where the run stopped; exit non-zero when it failed or was cancelled.

    With ``--debug`` a failed run's traceback (the node's, as recorded) is
    printed to standard error before the one-line error.
    """
    if as_json:
        emit_json(result_data(result))
    else:
        _report(opts, result, console, tracker)
    if result.status is RunStatus.FAILED:
        err = result.error
        if opts.debug and err is not None and err.traceback:
            note(err.traceback.rstrip())
        where = f" in node {err.node}" if err and err.node else ""
        what = f"{err.type}: {scrub(err.message)}" if err else "unknown error"
        hint = "" if opts.debug else "; --debug shows the traceback"
        fail(f"run {result.run_id} failed{where}: {what} (fix the cause, then "
             f"`{_command(opts, 'resume', result.run_id)}`{hint})")
    if result.status is RunStatus.CANCELLED:
        fail(f"run {result.run_id} was cancelled")


def _report(opts: CliOptions, result: RunResult, console: Console,
            tracker: Tracker | None) -> None:
    if tracker is not None:
        console.print(tracker.summary(result))
    else:
        console.print(Text.assemble(f"run {result.run_id} ", status_text(result.status)))
    if result.status is RunStatus.WAITING and result.pending_requests:
        console.print(requests_table(result.pending_requests, with_run=False))
        console.print(Text("answer with:"))
        for request in result.pending_requests:
            console.print(Text(f"  {respond_command(opts, request)}"), soft_wrap=True)
    elif result.status is RunStatus.COMPLETED:
        console.print(Text(f"inspect with: {_command(opts, 'show', result.run_id)}"),
                      soft_wrap=True)
