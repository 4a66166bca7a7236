"""Acting on many runs at once: cancel, pause, unpause, retry and resume over ids or filters.

Each command takes run ids, or the filters of ``durable-flow runs``
(``--status``, ``--workflow``, ``--label k=v``, ``--since 2d``,
``--error-type T``). ``--dry-run`` lists the runs and changes nothing;
``--yes`` is needed to act on more than one. Each run is changed in a
transaction of its own (``Runtime.cancel``/``pause``/``unpause``/``retry``),
with a progress bar; the summary counts the runs done, those skipped because
their status did not allow it (so running the same command again is safe),
and those that failed. The command exits 1 when any failed.

``resume`` over several runs hands each to the workers (``durable-flow
resume RUN``, one run, executes it here with its workflow, ``_running.py``):
a paused run is unpaused, a failed one queued again (``retry``); a run
waiting for an answer, an event or a timer has nothing to resume with: it is
left as it is and counted as waiting, not as done.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.text import Text

from ..errors import DurableFlowError
from ..model._records import RunInfo, RunStatus
from ._db import opened
from ._filters import ErrorTypeOpt, LabelOpt, SinceOpt, parse_labels, parse_since
from ._options import JsonOpt, StatusOpt, WorkflowNameOpt
from ._output import emit_json, make_console, runs_table, status_text
from ._support import CliOptions, fail, options

if TYPE_CHECKING:
    from ..runtime._runtime import Runtime

__all__ = ["ACTIONS", "ByOpt", "DryRunOpt", "Outcome", "RunIdsArg", "YesOpt", "bulk", "cancel",
           "pause", "retry", "unpause"]

RunIdsArg = Annotated[list[str] | None, typer.Argument(
    metavar="[RUN]...", show_default=False,
    help="Run ids (see `durable-flow runs`); or select runs with the filters instead.")]
DryRunOpt = Annotated[bool, typer.Option(
    "--dry-run", help="List the runs it would act on; change nothing.")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Act on more than one run.")]
ReasonOpt = Annotated[str | None, typer.Option(
    "--reason", metavar="TEXT", show_default=False, help="Why (recorded with the decision).")]
ByOpt = Annotated[str | None, typer.Option(
    "--by", metavar="WHO", show_default=False,
    help="Who acts (recorded with the decision; default: runtime).")]

@dataclass
class Outcome:
    """What a bulk command did: the runs done, skipped and failed (with why).

    ``waiting`` (``resume`` only): waiting runs left as they were, with nothing
    to resume them with (no answer, event or due timer yet).
    """

    action: str
    done: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    waiting: list[str] = field(default_factory=list)

    def line(self) -> str:
        """The summary line."""
        idle = (f", {len(self.waiting)} waiting (nothing to resume them with yet)"
                if self.action == "resume" else "")
        return (f"{self.action}: {len(self.done)} done, {len(self.skipped)} skipped "
                f"(status did not allow it){idle}, {len(self.failed)} failed")

    def as_json(self) -> dict[str, Any]:
        """The ``--json`` summary."""
        out: dict[str, Any] = {"action": self.action, "done": self.done,
                               "skipped": self.skipped}
        if self.action == "resume":
            out["waiting"] = self.waiting
        return {**out, "failed": self.failed}


@dataclass(frozen=True, slots=True)
class _Action:
    allowed: Callable[[RunInfo], bool]
    act: Callable[[Runtime, str, str | None, str | None], Awaitable[Any]]
    #: runs the act would leave as they are (counted as ``waiting``, not skipped)
    idle: Callable[[RunInfo], bool] = lambda _r: False


def _cancel(rt: Runtime, run_id: str, reason: str | None, by: str | None) -> Awaitable[Any]:
    return rt.cancel(run_id, by=by, via="cli", comment=reason)


def _pause(rt: Runtime, run_id: str, reason: str | None, by: str | None) -> Awaitable[Any]:
    return rt.pause(run_id, reason=reason, by=by)


def _unpause(rt: Runtime, run_id: str, _reason: str | None, by: str | None) -> Awaitable[Any]:
    return rt.unpause(run_id, by=by)


def _retry(rt: Runtime, run_id: str, _reason: str | None, by: str | None) -> Awaitable[Any]:
    return rt.retry(run_id, by=by)


async def _resume(rt: Runtime, run_id: str, _reason: str | None, by: str | None) -> Any:
    # for workers: a paused run (an operator's pause or a dead letter) is unpaused,
    # a failed one queued again; both recorded as Runtime.unpause / retry record them
    if (await rt.get_run(run_id)).status is RunStatus.PAUSED:
        return await rt.unpause(run_id, by=by)
    return await rt.retry(run_id, by=by)


_LIVE = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING)
#: each command: which runs its status allows, and the act (one transaction per run)
ACTIONS: dict[str, _Action] = {
    "cancel": _Action(lambda r: not r.status.is_final, _cancel),
    "pause": _Action(lambda r: r.status in _LIVE, _pause),
    "unpause": _Action(lambda r: r.status is RunStatus.PAUSED, _unpause),
    "retry": _Action(lambda r: r.status is RunStatus.FAILED or (
        r.status is RunStatus.PAUSED and r.error is not None), _retry),
    "resume": _Action(lambda r: r.status in (RunStatus.PAUSED, RunStatus.FAILED), _resume,
                      idle=lambda r: r.status is RunStatus.WAITING),
}


async def _selected(rt: Runtime, ids: Sequence[str], status: RunStatus | None,
                    workflow: str | None, labels: dict[str, str] | None,
                    since: datetime | None, error_type: str | None) -> list[RunInfo]:
    if ids:
        return [await rt.get_run(run_id) for run_id in dict.fromkeys(ids)]
    found = await rt.select_runs(status=status, workflow_name=workflow, labels=labels,
                                 since=since, error_type=error_type)
    return [await rt.get_run(run_id) for run_id in found]


async def _apply(rt: Runtime, name: str, runs: Sequence[RunInfo], reason: str | None,
                 by: str | None, show: bool) -> Outcome:
    action, outcome = ACTIONS[name], Outcome(name)
    columns = (TextColumn(f"{name}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=Console(stderr=True), disable=not show,
                  transient=True) as bar:
        task = bar.add_task(name, total=len(runs))
        for info in runs:
            try:
                current = await rt.get_run(info.run_id)  # as it is now, not when listed
                if action.idle(current):
                    outcome.waiting.append(info.run_id)
                elif not action.allowed(current):
                    outcome.skipped.append(info.run_id)
                else:
                    await action.act(rt, info.run_id, reason, by)
                    outcome.done.append(info.run_id)
            except DurableFlowError as exc:
                outcome.failed[info.run_id] = f"{type(exc).__name__}: {exc}"
            bar.advance(task)
    return outcome


def bulk(ctx: typer.Context, name: str, ids: Sequence[str] | None, status: RunStatus | None,
         workflow: str | None, label: Sequence[str] | None, since: str | None,
         error_type: str | None, dry_run: bool, yes: bool, as_json: bool,
         reason: str | None = None, by: str | None = None,
         workflow_flag: str = "--workflow") -> None:
    """Run bulk command ``name`` over ``ids`` or the filters (see the module's docstring)."""
    opts: CliOptions = options(ctx)
    labels, after = parse_labels(label), parse_since(since)
    filtered = any(v is not None for v in (status, workflow, labels, after, error_type))
    if ids and filtered:
        fail(f"{name} takes run ids or filters, not both", 2)
    if not ids and not filtered:
        fail(f"{name} needs run ids or filters (--status, {workflow_flag}, --label, --since, "
             f"--error-type)", 2)
    if ids and len(ids) == 1 and not dry_run:
        return _one(opts, name, ids[0], reason, by, as_json)

    async def go() -> tuple[list[RunInfo], Outcome | None]:
        async with opened(opts) as rt:
            runs = await _selected(rt, ids or [], status, workflow, labels, after, error_type)
            if dry_run or (len(runs) > 1 and not yes):
                return runs, None
            return runs, await _apply(rt, name, runs, reason, by, not as_json)

    runs, outcome = asyncio.run(go())
    _report(name, runs, outcome, dry_run, as_json)


def _one(opts: CliOptions, name: str, run_id: str, reason: str | None, by: str | None,
         as_json: bool) -> None:
    async def go() -> RunInfo:
        async with opened(opts) as rt:
            await ACTIONS[name].act(rt, run_id, reason, by)
            return await rt.get_run(run_id)

    info = asyncio.run(go())
    if as_json:
        emit_json(info)
    else:
        make_console().print(Text.assemble(f"run {info.run_id} ", status_text(info.status)))


def _report(name: str, runs: list[RunInfo], outcome: Outcome | None, dry_run: bool,
            as_json: bool) -> None:
    console = make_console()
    if outcome is None:
        if as_json:
            emit_json({"action": name, "dry_run": True, "runs": runs})
        elif runs:
            console.print(runs_table(runs))
        if dry_run:
            if not as_json:
                console.print(Text(f"{name}: {len(runs)} run(s) selected; --dry-run changed "
                                   f"nothing"))
            return
        fail(f"{name} would act on {len(runs)} runs: pass --yes to go ahead "
             f"(or --dry-run to list them)")
    if as_json:
        emit_json(outcome.as_json())
    else:
        console.print(Text(outcome.line()))
        for run_id, why in outcome.failed.items():
            console.print(Text(f"  {run_id}: {why}", style="red"))
    if outcome.failed:
        raise typer.Exit(1)


def cancel(ctx: typer.Context, runs: RunIdsArg = None, status: StatusOpt = None,
           workflow: WorkflowNameOpt = None, label: LabelOpt = None, since: SinceOpt = None,
           error_type: ErrorTypeOpt = None, reason: ReasonOpt = None, by: ByOpt = None,
           dry_run: DryRunOpt = False, yes: YesOpt = False, as_json: JsonOpt = False) -> None:
    """Cancel runs (ids or filters); they keep their checkpoints and can be forked.

    Each is recorded as a ``cancel`` decision ``by`` WHO ``via`` ``cli``.
    """
    bulk(ctx, "cancel", runs, status, workflow, label, since, error_type, dry_run, yes,
         as_json, reason, by)


def pause(ctx: typer.Context, runs: RunIdsArg = None, status: StatusOpt = None,
          workflow: WorkflowNameOpt = None, label: LabelOpt = None, since: SinceOpt = None,
          error_type: ErrorTypeOpt = None, reason: ReasonOpt = None, by: ByOpt = None,
          dry_run: DryRunOpt = False, yes: YesOpt = False, as_json: JsonOpt = False) -> None:
    """Pause runs (ids or filters): not claimed until unpaused; a running one stops after its superstep."""
    bulk(ctx, "pause", runs, status, workflow, label, since, error_type, dry_run, yes,
         as_json, reason, by)


def unpause(ctx: typer.Context, runs: RunIdsArg = None, status: StatusOpt = None,
            workflow: WorkflowNameOpt = None, label: LabelOpt = None, since: SinceOpt = None,
            error_type: ErrorTypeOpt = None, by: ByOpt = None, dry_run: DryRunOpt = False,
            yes: YesOpt = False, as_json: JsonOpt = False) -> None:
    """Unpause paused runs (ids or filters): workers take them again."""
    bulk(ctx, "unpause", runs, status, workflow, label, since, error_type, dry_run, yes,
         as_json, None, by)


def retry(ctx: typer.Context, runs: RunIdsArg = None, status: StatusOpt = None,
          workflow: WorkflowNameOpt = None, label: LabelOpt = None, since: SinceOpt = None,
          error_type: ErrorTypeOpt = None, by: ByOpt = None, dry_run: DryRunOpt = False,
          yes: YesOpt = False, as_json: JsonOpt = False) -> None:
    """Queue failed and dead-lettered runs again (ids or filters): workers resume them from their heads."""
    bulk(ctx, "retry", runs, status, workflow, label, since, error_type, dry_run, yes,
         as_json, None, by)

