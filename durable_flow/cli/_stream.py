"""``follow``: print what a run's agents stream (model text, tool calls) as it is stored."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shlex
import sys
from typing import Annotated, Any

import orjson
import typer

from ..model._records import RunStatus, StreamEntry
from ._db import opened
from ._options import RunArg
from ._output import when
from ._support import fail, jsonable, options

__all__ = ["follow"]


def _line(entry: StreamEntry, last: list[tuple[str, int, int]]) -> str:
    """The text to print for one entry; a new node or attempt starts a new line."""
    key = (entry.node, entry.epoch, int(entry.data.get("attempt", 1)))
    head = "" if last and last[0] == key else f"\n[{entry.node}] " if last else f"[{entry.node}] "
    if last and last[0][0] == entry.node and key > last[0] and entry.kind == "model_delta":
        head = f"\n[{entry.node}] (asked again) "
    last[:] = [key]
    if entry.kind == "model_delta":
        return head + str(entry.data.get("text", ""))
    if entry.kind == "tool_started":
        return f"{head}\n  -> {entry.data.get('tool')}({entry.data.get('arguments')})\n"
    outcome = entry.data.get("result", entry.data.get("error", ""))
    return f"{head}  <- {entry.data.get('tool')}: {outcome}\n"


def follow(
    ctx: typer.Context,
    run_id: RunArg,
    after: Annotated[int, typer.Option(
        "--after", min=0, help="Start after this entry (the last one a reader saw).")] = 0,
    as_json: Annotated[bool, typer.Option(
        "--json", help="One JSON object per entry and line (seq, kind, node, data, ...).")] = False,
) -> None:
    """Print what RUN's agents stream, live, until the run stops running.

    Reading again with --after N prints what came after entry N: nothing is
    missed across a reconnection. A run whose process died (its lease
    expired) is executed by nobody: follow stops and says how to go on
    (exit 1).
    """
    opts = options(ctx)

    async def go() -> Any:
        last: list[tuple[str, int, int]] = []
        async with opened(opts) as rt:
            async for entry in rt.follow_stream(run_id, after=after):
                sys.stdout.write(_json_line(entry) if as_json else _line(entry, last))
                sys.stdout.flush()
            if last:
                sys.stdout.write("\n")
            return await rt.store.get_run(run_id)

    try:
        record = asyncio.run(go())
    except BrokenPipeError:  # a reader such as `head` went away: nothing left to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return
    if record is not None and record.status is RunStatus.RUNNING:
        resume = shlex.join(["durable-flow", *opts.db_args, "resume", run_id])
        fail(f"run {run_id} is running but nobody executes it (its lease expired at "
             f"{when(record.lease_expires_at)}: the process holding it stopped); "
             f"`{resume}` continues it")


def _json_line(entry: StreamEntry) -> str:
    return orjson.dumps(dataclasses.asdict(entry), default=jsonable).decode() + "\n"
