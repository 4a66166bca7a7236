"""Commands of schedules: ``schedules list|add|remove|pause|resume``.

A thin layer over ``Runtime.schedule``, ``unschedule``, ``schedules`` and
``pause_schedule``; the runs of the ticks are started by workers that have
the schedule's workflow (``durable-flow worker``).
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer
from rich.table import Table

from ..model._schedules import CATCH_UP_MODES, ScheduleInfo
from ._db import opened
from ._options import JsonOpt, TargetArg
from ._output import emit_json, make_console, when
from ._support import CliError, options, read_json_object
from ._targets import load_runnable

__all__ = ["schedules_add", "schedules_list", "schedules_pause", "schedules_remove",
           "schedules_resume"]

ScheduleArg = Annotated[str, typer.Argument(metavar="SCHEDULE", show_default=False,
                                            help="The schedule's id.")]


def schedules_add(
    ctx: typer.Context,
    schedule_id: ScheduleArg,
    target: TargetArg,
    cron: Annotated[str, typer.Option(
        "--cron", metavar="EXPR", show_default=False,
        help="A cron expression: 5 fields (minute hour day month weekday), or 6 with seconds last.")],
    input: Annotated[str | None, typer.Option(
        "--input", "-i", metavar="JSON|@FILE", show_default=False,
        help="Each run's input: a JSON object, @file.json, or @- for standard input.")] = None,
    timezone: Annotated[str, typer.Option(
        "--timezone", "--tz", metavar="ZONE", help="The IANA time zone the cron is read in.")
    ] = "UTC",
    catch_up: Annotated[str, typer.Option(
        "--catch-up", metavar="one|skip|all",
        help="Ticks missed while no worker ran: start the latest, none, or each.")] = "one",
    as_json: JsonOpt = False,
) -> None:
    """Create (or replace) a schedule: workers start a run of WORKFLOW at every tick.

    Each tick's run is SCHEDULE@TICK (ISO 8601 UTC), started once across the fleet.
    """
    if catch_up not in CATCH_UP_MODES:
        raise CliError(f"--catch-up must be one of {', '.join(CATCH_UP_MODES)}, got {catch_up!r}")
    opts = options(ctx)
    values = read_json_object(input, "--input") if input is not None else {}
    found = load_runnable(target)

    async def go() -> ScheduleInfo:
        async with opened(opts, create=True) as rt:
            return await rt.schedule(found.workflow, cron=cron, input=values,
                                     schedule_id=schedule_id, timezone=timezone,
                                     catch_up=catch_up)  # checked above

    info = asyncio.run(go())
    if as_json:
        emit_json(_as_json(info))
        return
    make_console().print(f"schedule {info.schedule_id} saved; next tick {when(info.next_tick)}")


def schedules_list(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """List the schedules: cron, time zone, next and last tick, paused or not."""
    opts = options(ctx)

    async def go() -> list[ScheduleInfo]:
        async with opened(opts, logs=False) as rt:
            return await rt.schedules()

    found = asyncio.run(go())
    if as_json:
        emit_json([_as_json(s) for s in found])
        return
    table = Table("schedule", "workflow", "cron", "zone", "catch up", "next tick", "last tick",
                  "state")
    for s in found:
        table.add_row(s.schedule_id, f"{s.workflow_name}@{s.workflow_version}", s.cron,
                      s.timezone, s.catch_up, when(s.next_tick), when(s.last_tick),
                      "paused" if s.paused else "active")
    make_console().print(table)


def schedules_remove(ctx: typer.Context, schedule_id: ScheduleArg) -> None:
    """Remove a schedule (the runs it started stay)."""
    opts = options(ctx)

    async def go() -> bool:
        async with opened(opts) as rt:
            return await rt.unschedule(schedule_id)

    if not asyncio.run(go()):
        raise CliError(f"no schedule {schedule_id!r}")
    make_console().print(f"schedule {schedule_id} removed")


def schedules_pause(ctx: typer.Context, schedule_id: ScheduleArg) -> None:
    """Stop a schedule's ticks until `schedules resume`."""
    _set_paused(ctx, schedule_id, True)


def schedules_resume(ctx: typer.Context, schedule_id: ScheduleArg) -> None:
    """Restart a paused schedule; ticks that fell while it was paused are not started."""
    _set_paused(ctx, schedule_id, False)


def _set_paused(ctx: typer.Context, schedule_id: str, paused: bool) -> None:
    opts = options(ctx)

    async def go() -> ScheduleInfo:
        async with opened(opts) as rt:
            return await rt.pause_schedule(schedule_id, paused=paused)

    info = asyncio.run(go())
    state = "paused" if paused else f"resumed; next tick {when(info.next_tick)}"
    make_console().print(f"schedule {schedule_id} {state}")


def _as_json(s: ScheduleInfo) -> dict[str, Any]:
    def iso(moment: Any) -> str | None:
        return None if moment is None else moment.isoformat()

    return {"schedule_id": s.schedule_id, "workflow_name": s.workflow_name,
            "workflow_version": s.workflow_version, "cron": s.cron, "timezone": s.timezone,
            "catch_up": s.catch_up, "input": s.input, "labels": s.labels, "paused": s.paused,
            "next_tick": iso(s.next_tick), "last_tick": iso(s.last_tick),
            "created_at": iso(s.created_at), "updated_at": iso(s.updated_at)}
