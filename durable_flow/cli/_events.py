"""``send-event``: deliver an event to a run from the command line (a webhook, a script)."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer
from rich.text import Text

from ..model._records import RunInfo
from ._db import opened
from ._options import JsonOpt, RunArg
from ._output import emit_json, make_console, status_text
from ._support import options, read_json

__all__ = ["send_event"]


def send_event(
    ctx: typer.Context,
    run_id: RunArg,
    name: Annotated[str, typer.Argument(
        metavar="NAME", show_default=False, help="The event's name, as the node waits for it.")],
    value: Annotated[str, typer.Option(
        "--value", "-v", metavar="JSON|@FILE", show_default=False,
        help="The event's payload as JSON (`null` for none); checked against the type "
             "of the node waiting for it.")],
    as_json: JsonOpt = False,
) -> None:
    """Send the event NAME to RUN; the node waiting for it (now or later) gets its payload.

    Nothing is executed here: a run waiting for the event becomes queued for
    a worker (or a later `resume`). A payload that does not fit the type of
    the node waiting for it is refused, and nothing is stored.
    """
    opts = options(ctx)
    payload = read_json(value, "--value")

    async def go() -> RunInfo:
        async with opened(opts) as rt:
            await rt.send_event(run_id, name, payload)
            return await rt.get_run(run_id)

    info = asyncio.run(go())
    if as_json:
        emit_json(info)
    else:
        make_console().print(Text.assemble(f"sent {name} to run {run_id}: now ",
                                           status_text(info.status)))
