"""Commands that stop or rescue runs: cancel, recover."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from ..errors import RunLockedError, RunNotResumableError
from ..model._clock import utcnow
from ..model._records import RunResult, RunStatus
from ..runtime._runtime import Runtime
from ._db import opened
from ._follow import result_data
from ._options import JsonOpt, RegistryOpt, RunArg, TargetArg
from ._output import cell, emit_json, make_console, status_text
from ._progress import Tracker, follow
from ._support import CliOptions, fail, options
from ._targets import load_runnable

__all__ = ["Held", "cancel", "recover"]


def cancel(ctx: typer.Context, run_id: RunArg, as_json: JsonOpt = False,
           by: Annotated[str | None, typer.Option(
               "--by", metavar="USER", show_default=False,
               help="Who cancels (recorded in the run's decisions).")] = None) -> None:
    """Cancel a queued, running or waiting run; it keeps its checkpoints and can be forked.

    Recorded as a ``cancel`` decision (``--by``, via ``cli``).
    """
    opts = options(ctx)

    async def go() -> Any:
        async with opened(opts) as rt:
            return await rt.cancel(run_id, by=by, via="cli")

    info = asyncio.run(go())
    if as_json:
        emit_json(info)
    else:
        make_console().print(Text.assemble(f"run {info.run_id} ", status_text(info.status)))


@dataclass(frozen=True, slots=True)
class Held:
    """A ``running`` run whose lease is still live: its holder may be alive."""

    run_id: str
    owner: str
    expires_in: float


def recover(ctx: typer.Context, target: TargetArg, registry: RegistryOpt = None,
            as_json: JsonOpt = False) -> None:
    """Resume every `running` run of a workflow whose process died (its lease expired).

    A run whose lease is still live is left alone (its process may still be
    working on it, or died less than a lease ago): the command says for how
    long, so you can try again then.
    """
    opts = options(ctx)
    workflow = load_runnable(target, registry).workflow
    results, held = asyncio.run(_recover(opts, workflow, as_json))
    if as_json:
        emit_json({"recovered": [result_data(r) for r in results], "held": held})
    else:
        _report(workflow.name, results, held)
    failed = [r.run_id for r in results if r.status is RunStatus.FAILED]
    if failed:
        fail(f"{len(failed)} of {len(results)} recovered run(s) failed: {', '.join(failed)}")


async def _recover(opts: CliOptions, workflow: Any,
                   as_json: bool) -> tuple[list[RunResult], list[Held]]:
    console = make_console()
    results: list[RunResult] = []
    held: list[Held] = []
    async with opened(opts) as rt:
        for record in await rt.store.list_runs(status=RunStatus.RUNNING,
                                               workflow_name=workflow.name):
            left = _lease_left(record.lease_expires_at)
            if left > 0:
                held.append(Held(record.run_id, record.lease_owner or "another process", left))
                continue
            try:
                results.append(await _resume_one(rt, workflow, record.run_id, console, as_json))
            except RunLockedError as exc:  # another process took it over meanwhile
                held.append(Held(record.run_id, exc.owner, exc.expires_in))
            except RunNotResumableError:
                continue  # another process finished or cancelled it since the listing
    return results, held


async def _resume_one(rt: Runtime, workflow: Any, run_id: str, console: Any,
                      as_json: bool) -> RunResult:
    tracker = Tracker(f"recovering {run_id}", run_id)
    return await follow(rt.stream_resume(workflow, run_id), tracker, console, live=not as_json)


def _lease_left(expires_at: Any) -> float:
    return 0.0 if expires_at is None else (expires_at - utcnow()).total_seconds()


def _report(name: str, results: list[RunResult], held: list[Held]) -> None:
    console = make_console()
    if results:
        table = Table("run", "status", "pending requests", header_style="bold")
        for r in results:
            table.add_row(cell(r.run_id), status_text(r.status), str(len(r.pending_requests)))
        console.print(table)
    for h in held:
        console.print(Text(f"run {h.run_id} is still held by {h.owner} for {h.expires_in:.0f}s "
                           "(its process may still be running it); try again then"),
                      soft_wrap=True)
    if not results and not held:
        console.print(Text(f"no run of {name} needed recovery"))
