"""``export`` and ``import``: a run as one JSON document, moved between databases."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.text import Text

from ._db import opened
from ._options import RunArg
from ._output import make_console
from ._support import CliError, options

__all__ = ["export_run", "import_run"]


def export_run(
    ctx: typer.Context,
    run_id: RunArg,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", metavar="FILE", help="Write to FILE instead of standard output.")] = None,
) -> None:
    """Print a run as one JSON document: every checkpoint, request, step, task write and event.

    Signed (HMAC) under DURABLE_FLOW_SECRET when it is set.

    `durable-flow import FILE` loads it into another database (SQLite or
    PostgreSQL); attach it to a bug report to show a run as it was.
    """
    opts = options(ctx)

    async def go() -> dict[str, Any]:
        from ..runtime._transfer import export_run as export

        async with opened(opts, logs=False) as rt:
            return await export(rt.store, run_id)

    data = orjson.dumps(asyncio.run(go()), option=orjson.OPT_INDENT_2) + b"\n"
    if output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        output.write_bytes(data)


def import_run(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(metavar="FILE", show_default=False,
                                         help="A document written by `durable-flow export`.")],
    unsigned: Annotated[bool, typer.Option(
        "--unsigned", help="Accept a document without a signature (or one that cannot be "
        "checked without DURABLE_FLOW_SECRET): only from a source you trust.")] = False,
    keep_workflow_refs: Annotated[bool, typer.Option(
        "--keep-workflow-refs", help="Keep the run's recorded MODULE:WORKFLOW, so later "
        "commands without --workflow import that code: only for documents you made.")] = False,
) -> None:
    """Load a run written by `durable-flow export` (one transaction; its id must be free).

    Every row, the decision chain and (with DURABLE_FLOW_SECRET set) the
    signature are checked first; on any problem nothing is written.
    """
    opts = options(ctx)
    try:
        document = orjson.loads(file.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise CliError(f"cannot read {file}: {exc}") from None

    async def go() -> Any:
        from ..runtime._transfer import import_run as load

        async with opened(opts, create=True, logs=False) as rt:
            return await load(rt.store, document, unsigned=unsigned,
                              keep_workflow_refs=keep_workflow_refs, via="cli")

    info = asyncio.run(go())
    make_console().print(Text(f"imported run {info.run_id} ({info.status.value}, workflow "
                              f"{info.workflow_name!r})"), soft_wrap=True)
