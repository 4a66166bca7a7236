"""Commands that execute runs: run, resume, respond, fork."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from ..errors import UnknownRequestError
from ..model._approvals import Principal
from ..model._graph import Workflow
from ..model._records import RunInfo, RunResult, RunStatus
from ..runtime._runtime import Runtime
from ._bulk import ByOpt, DryRunOpt, RunIdsArg, YesOpt, bulk
from ._db import inspected, opened, resolve_checkpoint, workflow_for_run
from ._filters import ErrorTypeOpt, LabelOpt, SinceOpt
from ._follow import execute, finish
from ._options import (
    AllowMismatchOpt,
    CheckpointArg,
    JsonOpt,
    MigrateOpt,
    RegistryOpt,
    RunArg,
    StatusOpt,
    TargetArg,
    WorkflowOpt,
)
from ._output import emit_json, make_console, status_text
from ._progress import Tracker, follow
from ._support import CliError, CliOptions, UsageError, options, read_json, read_json_object
from ._targets import load_runnable

__all__ = ["fork", "respond", "resume", "run"]

InputOpt = Annotated[str | None, typer.Option(
    "--input", "-i", metavar="JSON|@FILE", show_default=False,
    help="The run's input: a JSON object, @file.json, or @- for standard input.")]
NewRunIdOpt = Annotated[str | None, typer.Option(
    "--run-id", show_default=False, help="Id for the new run (default: a new uuid7).")]


def run(
    ctx: typer.Context,
    target: TargetArg,
    input: InputOpt = None,
    run_id: NewRunIdOpt = None,
    max_supersteps: Annotated[int | None, typer.Option(
        "--max-supersteps", min=1, show_default=False,
        help="Fail the run after this many supersteps (default: the workflow's).")] = None,
    registry: RegistryOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Start a run of a workflow and follow it until it completes, waits or fails.

    The workflow is MODULE:NAME, path/to/file.py:NAME, or a declarative
    .json/.yaml file (with --registry). The run records it, so `resume`,
    `respond` and `fork` need no --workflow later. Exit code 0 when the run
    completed or waits for input, 1 when it failed, 130 when interrupted.
    """
    opts = options(ctx)
    values = read_json_object(input, "--input") if input is not None else {}
    found = load_runnable(target, registry)
    console, tracker = make_console(), Tracker(f"running {found.workflow.name}", run_id)

    async def go(rt: Runtime) -> RunResult:
        events = rt.stream(found.workflow, values, run_id=run_id, max_supersteps=max_supersteps,
                           workflow_ref=found.recorded)
        return await follow(events, tracker, console, live=not as_json)

    result = execute(opts, go, tracker, create=True)
    finish(opts, result, console, as_json=as_json, tracker=tracker)


WorkflowNameFilterOpt = Annotated[str | None, typer.Option(
    "--workflow-name", metavar="NAME", show_default=False,
    help="Only runs of this workflow (its name, as given to WorkflowBuilder).")]


def resume(ctx: typer.Context, runs: RunIdsArg = None, workflow: WorkflowOpt = None,
           migrate: MigrateOpt = False, allow_mismatch: AllowMismatchOpt = False,
           status: StatusOpt = None, workflow_name: WorkflowNameFilterOpt = None,
           label: LabelOpt = None, since: SinceOpt = None, error_type: ErrorTypeOpt = None,
           by: ByOpt = None, dry_run: DryRunOpt = False, yes: YesOpt = False,
           as_json: JsonOpt = False) -> None:
    """Continue a run from its latest checkpoint (after a crash, a fix, or answers).

    One RUN is executed here, with its workflow. With --migrate, a run
    started on an older version of the workflow moves onto the version given
    first. Several runs, or the filters of `durable-flow runs`
    (--workflow-name for the workflow's name), are handed to the workers:
    paused runs unpaused, failed runs queued again; a waiting run has nothing
    to resume it with and is left waiting (counted as such). --dry-run lists
    them, --yes is needed for more than one.
    """
    filtered = any(v is not None for v in (status, workflow_name, label, since, error_type))
    if runs and len(runs) == 1 and not filtered and not dry_run:
        return _resume_here(ctx, runs[0], workflow, migrate, allow_mismatch, by, as_json)
    if workflow is not None or migrate or allow_mismatch:
        raise UsageError("--workflow, --migrate and --allow-mismatch resume one run here; "
                         "several runs are handed to the workers")
    bulk(ctx, "resume", runs, status, workflow_name, label, since, error_type, dry_run, yes,
         as_json, None, by, workflow_flag="--workflow-name")


def _resume_here(ctx: typer.Context, run_id: str, workflow: str | None, migrate: bool,
                 allow_mismatch: bool, by: str | None, as_json: bool) -> None:
    opts = options(ctx)
    console, tracker = make_console(), Tracker(f"resuming {run_id}", run_id)

    async def go(rt: Runtime) -> RunResult:
        wf = await _workflow(rt, run_id, workflow, console, as_json)
        events = rt.stream_resume(wf, run_id, migrate=migrate, allow_mismatch=allow_mismatch,
                                  by=by, via="cli")
        return await follow(events, tracker, console, live=not as_json)

    finish(opts, execute(opts, go, tracker), console, as_json=as_json, tracker=tracker)


def respond(
    ctx: typer.Context,
    run_id: RunArg,
    request_id: Annotated[str, typer.Argument(
        metavar="REQUEST_ID", show_default=False,
        help="Request id, e.g. approve@2#0 or review@3/legal@2/sign@1#0 (see `inbox`).")],
    value: Annotated[str, typer.Option(
        "--value", "-v", metavar="JSON|@FILE", show_default=False,
        help="The answer as JSON (validated against the request's schema).")],
    workflow: WorkflowOpt = None,
    by: Annotated[str | None, typer.Option(
        "--by", metavar="USER", show_default=False,
        help="Who answers (a principal id; a user of the web app answers with their roles). "
             "A request assigned to others is refused.")] = None,
    comment: Annotated[str | None, typer.Option(
        "--comment", metavar="TEXT", show_default=False,
        help="Why: recorded with the decision (see `audit`).")] = None,
    no_resume: Annotated[bool, typer.Option(
        "--no-resume", help="Only record the answer (no workflow code needed): a worker, or "
                            "a later `resume`, continues the run.")] = False,
    allow_mismatch: AllowMismatchOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Answer a pending request, then resume the run with its workflow.

    The workflow is --workflow, or the one `durable-flow run` recorded on the
    run. A run with neither (one submitted for workers), or --no-resume, is
    only answered: no workflow code runs here, and once nothing else is
    pending the run is queued for a worker. A value that does not fit the
    request's JSON schema is refused (the schema is printed) and nothing is
    written. The answer is a decision `by` USER `via` cli, with the
    --comment (`durable-flow audit RUN`); a USER who may not answer the
    request is refused and nothing is written.
    """
    opts = options(ctx)
    answer = read_json(value, "--value")
    if no_resume and workflow is not None:
        raise UsageError("--no-resume records the answer only; it takes no --workflow")
    if no_resume or (workflow is None and not _recorded_workflow(opts, run_id)):
        _record_answer(opts, run_id, request_id, answer, as_json, by, comment)
        return
    console, tracker = make_console(), Tracker(f"resuming {run_id}", run_id)

    async def go(rt: Runtime) -> RunResult:
        wf, recorded = await workflow_for_run(rt, run_id, workflow)
        events = rt.stream_resume(wf, run_id, responses={request_id: answer},
                                  allow_mismatch=allow_mismatch, by=await _who(rt, by),
                                  comment=comment, via="cli")
        try:
            result = await follow(events, tracker, console, live=not as_json)
        except UnknownRequestError as exc:
            raise CliError(await _pending_hint(rt, run_id, exc)) from None
        _using(console, recorded, as_json)
        return result

    finish(opts, execute(opts, go, tracker), console, as_json=as_json, tracker=tracker)


def _recorded_workflow(opts: CliOptions, run_id: str) -> bool:
    """Whether ``durable-flow run`` recorded the run's workflow (RunNotFoundError if no run)."""

    async def go() -> bool:
        async with inspected(opts) as views:
            return bool((await views.record(run_id)).workflow_ref)

    return asyncio.run(go())


async def _who(rt: Runtime, by: str | None) -> Principal | None:
    """``--by``: a user of the web app answers with their roles; any other id with none."""
    if by is None:
        return None
    user = await rt.store.get_user(by)
    return Principal(by, user.roles if user is not None else ())


def _record_answer(opts: CliOptions, run_id: str, request_id: str, answer: Any,
                   as_json: bool, by: str | None, comment: str | None) -> None:
    """``Runtime.respond``: record the answer, execute nothing."""

    async def go() -> RunInfo:
        async with opened(opts) as rt:
            try:
                return await rt.respond(run_id, {request_id: answer}, by=await _who(rt, by),
                                        comment=comment, via="cli")
            except UnknownRequestError as exc:
                raise CliError(await _pending_hint(rt, run_id, exc)) from None

    info = asyncio.run(go())
    if as_json:
        emit_json(info)
        return
    after = "a worker (or `durable-flow resume`) continues it" \
        if info.status is RunStatus.QUEUED else "it waits for more"
    make_console().print(Text.assemble(f"answered {request_id} on run {run_id}: now ",
                                       status_text(info.status), f" ({after})"), soft_wrap=True)


async def _pending_hint(rt: Runtime, run_id: str, exc: UnknownRequestError) -> str:
    ids = [r.id for r in await rt.pending_requests() if r.run_id == run_id]
    pending = f"pending: {', '.join(ids)}" if ids else "it has no pending requests"
    return f"{exc}; {pending}"


def fork(
    ctx: typer.Context,
    run_id: RunArg,
    checkpoint: CheckpointArg,
    update: Annotated[str | None, typer.Option(
        "--update", "-u", metavar="JSON|@FILE", show_default=False,
        help="Blackboard values to write (through the reducers) before running.")] = None,
    new_run_id: NewRunIdOpt = None,
    workflow: WorkflowOpt = None,
    allow_mismatch: AllowMismatchOpt = False,
    as_json: JsonOpt = False,
    by: Annotated[str | None, typer.Option(
        "--by", metavar="USER", show_default=False,
        help="Who forks (the fork's started_by and its first decision).")] = None,
) -> None:
    """Start a new run from a checkpoint of RUN and follow it; the original run is untouched.

    The fork's decisions start with a ``fork`` decision (``--by``, via ``cli``).
    """
    opts = options(ctx)
    values = read_json_object(update, "--update") if update is not None else None
    console, tracker = make_console(), Tracker(f"forking {run_id} at {checkpoint}", new_run_id)

    async def go(rt: Runtime) -> RunResult:
        wf = await _workflow(rt, run_id, workflow, console, as_json)
        checkpoint_id = await resolve_checkpoint(rt, run_id, checkpoint)
        events = rt.stream_fork(wf, run_id, checkpoint_id, update=values,
                                allow_mismatch=allow_mismatch, new_run_id=new_run_id,
                                by=by, via="cli")
        result = await follow(events, tracker, console, live=not as_json)
        if not as_json:
            console.print(Text(f"forked run {run_id} at {checkpoint_id} into {result.run_id}"),
                          soft_wrap=True)
        return result

    finish(opts, execute(opts, go, tracker), console, as_json=as_json, tracker=tracker)


async def _workflow(rt: Runtime, run_id: str, ref: str | None, console: Console,
                    as_json: bool) -> Workflow:
    workflow, recorded = await workflow_for_run(rt, run_id, ref)
    _using(console, recorded, as_json)
    return workflow


def _using(console: Console, recorded: str | None, as_json: bool) -> None:
    if recorded is not None and not as_json:
        console.print(Text(f"using {recorded}, recorded on the run (--workflow overrides)"),
                      soft_wrap=True)
