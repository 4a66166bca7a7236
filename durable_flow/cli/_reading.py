"""Read-only commands: runs, show, history, diff, inbox. None needs workflow code."""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.table import Table
from rich.text import Text

from ..model._records import PendingRequest, RunInfo, RunStatus
from ._db import find_run, inspected, opened, resolve_checkpoint
from ._filters import ErrorTypeOpt, LabelOpt, SinceOpt, parse_labels, parse_since
from ._options import JsonOpt, NamespaceOpt, RunArg, StatusOpt, WorkflowNameOpt
from ._output import (
    cell,
    emit_json,
    history_table,
    make_console,
    preview,
    requests_table,
    runs_table,
    snapshot_view,
)
from ._support import CliOptions, options

if TYPE_CHECKING:
    from ..runtime._limits import LimitWait
    from ..runtime._runtime import Runtime

__all__ = ["diff", "diff_values", "history", "inbox", "runs", "show"]

T = TypeVar("T")


def _read(opts: CliOptions, body: Callable[[Runtime], Awaitable[T]]) -> T:
    async def go() -> T:
        async with opened(opts, logs=False) as rt:
            return await body(rt)

    return asyncio.run(go())


def runs(ctx: typer.Context, status: StatusOpt = None, workflow: WorkflowNameOpt = None,
         label: LabelOpt = None, since: SinceOpt = None, error_type: ErrorTypeOpt = None,
         as_json: JsonOpt = False) -> None:
    """List runs, newest first (filtered by status, workflow, labels, age, error type)."""
    labels, after = parse_labels(label), parse_since(since)

    async def listing() -> list[RunInfo]:
        # Runtime.list_runs, read without loading the engine: a short command starts sooner
        async with inspected(options(ctx)) as views:
            found = await views.runs(status, workflow, labels, after)
        if error_type is None:
            return found
        return [r for r in found if r.error is not None and r.error.type == error_type]

    found = asyncio.run(listing())
    if as_json:
        emit_json(found)
    elif not found:
        make_console().print(Text("no runs"))
    else:
        make_console().print(runs_table(found))


def show(
    ctx: typer.Context,
    run_id: RunArg,
    checkpoint: Annotated[str | None, typer.Option(
        "--checkpoint", "-c", show_default=False,
        help="Show this checkpoint instead of the latest: an id, a unique end of one, "
             "or @SUPERSTEP (@3/review@2 inside a sub-workflow).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a run: status, blackboard, pending requests and nested sub-workflow state."""
    from ..runtime._limits import limit_waits  # only show needs it

    async def body(rt: Runtime) -> tuple[Any, Any, list[LimitWait]]:
        info = await find_run(rt, run_id)
        cp = await resolve_checkpoint(rt, run_id, checkpoint) if checkpoint else None
        return info, await rt.get_state(run_id, cp), await limit_waits(rt.store, run_id)

    info, snap, waits = _read(options(ctx), body)
    if as_json:
        emit_json({"run": info, "snapshot": snap,
                   "limit_waits": [{"limit": w.limit, "node": w.node, "in_use": w.in_use,
                                    "capacity": w.capacity} for w in waits]})
    else:
        console = make_console()
        console.print(snapshot_view(snap, info))
        for wait in waits:
            console.print(wait.describe())


def history(
    ctx: typer.Context, run_id: RunArg, namespace: NamespaceOpt = "",
    limit: Annotated[int | None, typer.Option(
        "--limit", min=1, show_default=False, help="At most this many (the newest).")] = None,
    before: Annotated[str | None, typer.Option(
        "--before", metavar="CHECKPOINT", show_default=False,
        help="Only checkpoints older than this one (to page on from the last one shown).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List a run's checkpoints, newest first: superstep, nodes, routing reason, size.

    Any checkpoint can be named by @SUPERSTEP (top level) or by a unique end
    of its id, wherever a command takes one.
    """

    async def body(rt: Runtime) -> list[Any]:
        cp = await resolve_checkpoint(rt, run_id, before) if before else None
        return await rt.history(run_id, namespace=namespace, limit=limit, before=cp)

    found = _read(options(ctx), body)
    if as_json:
        emit_json(found)
    elif not found:
        make_console().print(Text(f"run {run_id} has no checkpoints in namespace {namespace!r}"))
    else:
        make_console().print(history_table(found))


def diff(
    ctx: typer.Context,
    run_id: RunArg,
    a: Annotated[str, typer.Argument(
        metavar="A", show_default=False,
        help="The earlier checkpoint: an id, a unique end of one, or @SUPERSTEP.")],
    b: Annotated[str, typer.Argument(
        metavar="B", show_default=False,
        help="The later checkpoint: an id, a unique end of one, or @SUPERSTEP.")],
    as_json: JsonOpt = False,
) -> None:
    """Show how the blackboard changed from checkpoint A to checkpoint B."""

    async def body(rt: Runtime) -> tuple[str, str, dict[str, Any]]:
        first = await resolve_checkpoint(rt, run_id, a)
        second = await resolve_checkpoint(rt, run_id, b)
        old = await rt.get_state(run_id, first)
        new = await rt.get_state(run_id, second)
        return first, second, diff_values(old.values, new.values)

    first, second, changes = _read(options(ctx), body)
    if as_json:
        emit_json({"run_id": run_id, "from": first, "to": second, **changes})
        return
    console = make_console()
    if not any(changes.values()):
        console.print(Text(f"no blackboard changes from {first} to {second}"))
        return
    console.print(Text(f"blackboard changes from {first} to {second}"), soft_wrap=True)
    table = Table("", "field", "change", header_style="bold")
    for key, value in changes["added"].items():
        table.add_row(Text("+", "green"), cell(key), cell(f"added: {preview(value)}"))
    for key, value in changes["removed"].items():
        table.add_row(Text("-", "red"), cell(key), cell(f"removed (was {preview(value)})"))
    for key, items in changes["appended"].items():
        table.add_row(Text("+", "green"), cell(key),
                      cell(f"{len(items)} item(s) appended: {preview(items)}"))
    for key, change in changes["changed"].items():
        table.add_row(Text("~", "yellow"), cell(key),
                      cell(f"{preview(change['before'], 60)} → {preview(change['after'], 60)}"))
    console.print(table)


def diff_values(old: dict[str, Any], new: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Added, removed, changed keys, and lists that only grew (``appended``: the new items)."""
    changes: dict[str, dict[str, Any]] = {"added": {}, "removed": {}, "changed": {},
                                          "appended": {}}
    for key in new:
        if key not in old:
            changes["added"][key] = new[key]
    for key in old:
        if key not in new:
            changes["removed"][key] = old[key]
            continue
        before, after = old[key], new[key]
        if before == after:
            continue
        if (isinstance(before, list) and isinstance(after, list)
                and len(after) > len(before) and after[: len(before)] == before):
            changes["appended"][key] = after[len(before):]
        else:
            changes["changed"][key] = {"before": before, "after": after}
    return changes


def inbox(ctx: typer.Context, workflow: WorkflowNameOpt = None, as_json: JsonOpt = False) -> None:
    """List every pending request across all runs and nesting levels, oldest first."""
    opts = options(ctx)

    async def body(rt: Runtime) -> tuple[list[PendingRequest], dict[str, RunStatus]]:
        requests = await rt.pending_requests(workflow_name=workflow)
        statuses: dict[str, RunStatus] = {}
        if as_json:
            return requests, statuses
        for run_id in dict.fromkeys(r.run_id for r in requests):
            # a request can be open while its run still runs (a task parked by waits="branch")
            statuses[run_id] = (await rt.get_run(run_id)).status
        return requests, statuses

    found, statuses = _read(opts, body)
    if as_json:
        emit_json(found)
        return
    console = make_console()
    if not found:
        console.print(Text("no pending requests"))
        return
    console.print(requests_table(found, statuses=statuses))
    db = shlex.join(["durable-flow", *opts.db_args])
    console.print(Text(f"answer with: {db} respond RUN REQUEST_ID --value JSON"), soft_wrap=True)

