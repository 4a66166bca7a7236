"""Commands that execute runs: run, resume, respond, fork, cancel, recover."""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Coroutine
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..errors import UnknownRequestError
from ..model._graph import Workflow
from ..model._records import RunResult, RunStatus
from ..runtime._runtime import Runtime
from ._db import opened, resolve_checkpoint, workflow_for_run
from ._options import AllowMismatchOpt, JsonOpt, MigrateOpt, RunArg, WorkflowOpt, WorkflowRefArg
from ._output import cell, emit_json, make_console, requests_table, respond_command, status_text
from ._progress import Tracker, follow
from ._support import (
    CliError,
    CliOptions,
    fail,
    options,
    read_json,
    read_json_object,
    resolve_workflow,
)

__all__ = ["cancel", "fork", "recover", "respond", "resume", "run"]

InputOpt = Annotated[str | None, typer.Option(
    "--input", "-i", metavar="JSON|@FILE", show_default=False,
    help="The run's input: a JSON object, @file.json, or @- for standard input.")]


def run(
    ctx: typer.Context,
    target: WorkflowRefArg,
    input: InputOpt = None,
    run_id: Annotated[str | None, typer.Option(
        "--run-id", show_default=False, help="Id for the new run (default: a new uuid7).")] = None,
    max_supersteps: Annotated[int | None, typer.Option(
        "--max-supersteps", min=1, show_default=False,
        help="Fail the run after this many supersteps (default: the workflow's).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Start a run of MODULE:WORKFLOW and follow it until it completes, waits or fails.

    The run records MODULE:WORKFLOW, so `resume`, `respond` and `fork` need
    no --workflow later. Exit code 0 when the run completed or waits for
    input, 1 when it failed.
    """
    opts = options(ctx)
    values = read_json_object(input, "--input") if input is not None else {}
    workflow = resolve_workflow(target)
    console, tracker = make_console(), Tracker(f"running {workflow.name}")

    async def go() -> RunResult:
        async with opened(opts, create=True) as rt:
            events = rt.stream(workflow, values, run_id=run_id, max_supersteps=max_supersteps,
                               workflow_ref=target)
            return await follow(events, tracker, console, live=not as_json)

    finish(opts, _drive(go(), tracker), console, as_json=as_json, tracker=tracker)


def resume(ctx: typer.Context, run_id: RunArg, workflow: WorkflowOpt = None,
           migrate: MigrateOpt = False, allow_mismatch: AllowMismatchOpt = False,
           as_json: JsonOpt = False) -> None:
    """Continue a run from its latest checkpoint (after a crash, a fix, or answers).

    With --migrate, a run started on an older version of the workflow moves
    onto the version given first.
    """
    opts = options(ctx)
    console, tracker = make_console(), Tracker("resuming")

    async def go() -> RunResult:
        async with opened(opts) as rt:
            wf = await _workflow(rt, run_id, workflow, console, as_json)
            events = rt.stream_resume(wf, run_id, migrate=migrate, allow_mismatch=allow_mismatch)
            return await follow(events, tracker, console, live=not as_json)

    finish(opts, _drive(go(), tracker), console, as_json=as_json, tracker=tracker)


def respond(
    ctx: typer.Context,
    run_id: RunArg,
    request_id: Annotated[str, typer.Argument(
        metavar="REQUEST_ID", show_default=False, help="Request id (see `durable-flow inbox`).")],
    value: Annotated[str, typer.Option(
        "--value", "-v", metavar="JSON|@FILE", show_default=False,
        help="The answer as JSON (validated against the request's schema).")],
    workflow: WorkflowOpt = None,
    allow_mismatch: AllowMismatchOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Answer a pending request, then resume the run.

    A value that does not fit the request's JSON schema is refused (the
    schema is printed) and nothing is written.
    """
    opts = options(ctx)
    answer = read_json(value, "--value")
    console, tracker = make_console(), Tracker("resuming")

    async def go() -> RunResult:
        async with opened(opts) as rt:
            wf = await _workflow(rt, run_id, workflow, console, as_json)
            events = rt.stream_resume(wf, run_id, responses={request_id: answer},
                                      allow_mismatch=allow_mismatch)
            try:
                return await follow(events, tracker, console, live=not as_json)
            except UnknownRequestError as exc:
                ids = [r.id for r in await rt.pending_requests() if r.run_id == run_id]
                pending = f"pending: {', '.join(ids)}" if ids else "it has no pending requests"
                raise CliError(f"{exc}; {pending}") from None

    finish(opts, _drive(go(), tracker), console, as_json=as_json, tracker=tracker)


def fork(
    ctx: typer.Context,
    run_id: RunArg,
    checkpoint: Annotated[str, typer.Argument(
        metavar="CHECKPOINT", show_default=False,
        help="Checkpoint id, or a unique prefix of one (see `durable-flow history`).")],
    update: Annotated[str | None, typer.Option(
        "--update", "-u", metavar="JSON|@FILE", show_default=False,
        help="Blackboard values to write (through the reducers) before running.")] = None,
    workflow: WorkflowOpt = None,
    allow_mismatch: AllowMismatchOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Start a new run from a checkpoint of RUN; the original run is untouched."""
    opts = options(ctx)
    values = read_json_object(update, "--update") if update is not None else None
    console = make_console()

    async def go() -> RunResult:
        async with opened(opts) as rt:
            wf = await _workflow(rt, run_id, workflow, console, as_json)
            checkpoint_id = await resolve_checkpoint(rt, run_id, checkpoint)
            return await rt.fork(wf, run_id, checkpoint_id, update=values,
                                 allow_mismatch=allow_mismatch)

    result = asyncio.run(go())
    if not as_json:
        console.print(Text(f"forked run {run_id} at {checkpoint} into {result.run_id}"))
    finish(opts, result, console, as_json=as_json)


def cancel(ctx: typer.Context, run_id: RunArg, as_json: JsonOpt = False) -> None:
    """Cancel a run; it keeps its checkpoints and can still be forked."""
    opts = options(ctx)

    async def go() -> Any:
        async with opened(opts) as rt:
            return await rt.cancel(run_id)

    info = asyncio.run(go())
    if as_json:
        emit_json(info)
    else:
        make_console().print(Text.assemble(f"run {info.run_id} ", status_text(info.status)))


def recover(ctx: typer.Context, target: WorkflowRefArg, as_json: JsonOpt = False) -> None:
    """Resume every `running` run of MODULE:WORKFLOW whose process died (lease expired)."""
    opts = options(ctx)
    workflow = resolve_workflow(target)

    async def go() -> list[RunResult]:
        async with opened(opts) as rt:
            return await rt.recover(workflow)

    results = asyncio.run(go())
    if as_json:
        emit_json([result_data(r) for r in results])
    elif not results:
        make_console().print(Text(f"no run of {workflow.name} needed recovery"))
    else:
        table = Table("run", "status", "pending requests", header_style="bold")
        for r in results:
            table.add_row(cell(r.run_id), status_text(r.status), str(len(r.pending_requests)))
        make_console().print(table)
    failed = [r.run_id for r in results if r.status is RunStatus.FAILED]
    if failed:
        fail(f"{len(failed)} of {len(results)} recovered run(s) failed: {', '.join(failed)}")


def _drive(body: Coroutine[Any, Any, RunResult], tracker: Tracker) -> RunResult:
    """Run ``body``; on Ctrl-C say which run the Runtime cancelled."""
    try:
        return asyncio.run(body)
    except KeyboardInterrupt:
        if not tracker.run_id:
            raise
        fail(f"interrupted: run {tracker.run_id} was cancelled (Ctrl-C cancels the run it "
             f"executes; `durable-flow fork {tracker.run_id} CHECKPOINT` continues from a "
             "checkpoint)", 130)


async def _workflow(rt: Runtime, run_id: str, ref: str | None, console: Console,
                    as_json: bool) -> Workflow:
    workflow, recorded = await workflow_for_run(rt, run_id, ref)
    if recorded is not None and not as_json:
        console.print(Text(f"using {recorded}, recorded on the run (--workflow overrides)"),
                      soft_wrap=True)
    return workflow


def result_data(result: RunResult) -> dict[str, Any]:
    """A RunResult as JSON-ready data (contract field names)."""
    return {"run_id": result.run_id, "status": result.status, "checkpoint_id": result.checkpoint_id,
            "state": result.state, "pending_requests": result.pending_requests,
            "error": result.error}


def finish(opts: CliOptions, result: RunResult, console: Console, *, as_json: bool,
           tracker: Tracker | None = None) -> None:
    """Report where the run stopped; exit non-zero when it failed or was cancelled."""
    if as_json:
        emit_json(result_data(result))
    else:
        _report(opts, result, console, tracker)
    if result.status is RunStatus.FAILED:
        err = result.error
        where = f" in node {err.node}" if err and err.node else ""
        what = f"{err.type}: {err.message}" if err else "unknown error"
        resume = shlex.join(["durable-flow", *opts.db_args, "resume", result.run_id])
        fail(f"run {result.run_id} failed{where}: {what} (fix the cause, then `{resume}`)")
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
        show = shlex.join(["durable-flow", *opts.db_args, "show", result.run_id])
        console.print(Text(f"inspect with: {show}"), soft_wrap=True)
