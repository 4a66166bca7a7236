"""``durable-flow ui``: the web inbox and run inspector over the ``--db`` store."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from ._db import display_db, open_store
from ._output import make_console
from ._support import CliError, options, resolve_workflow

__all__ = ["ui"]

TargetsArg = Annotated[list[str] | None, typer.Argument(
    metavar="MODULE:WORKFLOW", show_default=False,
    help="Workflows this server runs itself: answered runs of them continue here, and their "
         "runs can be forked. Without them a separate `durable-flow worker` continues runs.")]


def ui(
    ctx: typer.Context,
    targets: TargetsArg = None,
    host: Annotated[str, typer.Option(
        help="Address to listen on; anything but loopback needs --token.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8765,
    token: Annotated[str | None, typer.Option(
        envvar="DURABLE_FLOW_UI_TOKEN", show_default=False,
        help="Require this token on every request (Authorization: Bearer, or the login form). "
             "Also read from DURABLE_FLOW_UI_TOKEN.")] = None,
) -> None:
    """Serve the web inbox (answer requests in a browser) and the run inspector.

    Pages: / (the inbox), /runs, /runs/RUN; the JSON API is described at
    /api/openapi.json. Stop with Ctrl-C.
    """
    try:
        from ..ui._security import check_bind
        from ..ui._serve import serve
    except ImportError as exc:  # the optional dependencies are missing
        raise CliError(f"the web UI needs the 'ui' extra: pip install 'durable-flow[ui]' "
                       f"({exc.name} is missing)") from None
    try:
        check_bind(host, token)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    opts = options(ctx)
    workflows = [resolve_workflow(t) for t in targets or []]
    console = make_console()

    def ready(url: str) -> None:
        names = ", ".join(f"{wf.name}@{wf.version}" for wf in workflows) or "none (use a worker)"
        console.print(Text(f"durable-flow ui on {url} over {display_db(opts.db)}; runs here: "
                           f"{names}{'; token required' if token else ''}"), soft_wrap=True)

    serve(open_store(opts.db, create=True), workflows=workflows, host=host, port=port,
          token=token, on_ready=ready)
