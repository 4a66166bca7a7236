"""``durable-flow ui``: the web inbox and run inspector over the ``--db`` store."""

from __future__ import annotations

import errno
import socket
from typing import Annotated

import typer
from rich.text import Text

from ._db import display_db, open_store
from ._options import RegistryOpt
from ._output import make_console
from ._support import CliError, options
from ._targets import load_targets

__all__ = ["ui"]

TargetsArg = Annotated[list[str] | None, typer.Argument(
    metavar="WORKFLOW...", show_default=False,
    help="Workflows this server runs itself (MODULE:NAME, path/to/file.py:NAME, or a "
         ".json/.yaml file with --registry): answered runs of them continue here, and their "
         "runs can be forked. Without them a separate `durable-flow worker` continues runs.")]


def ui(
    ctx: typer.Context,
    targets: TargetsArg = None,
    host: Annotated[str, typer.Option(
        help="Address to listen on; anything but loopback needs --token.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8765,
    registry: RegistryOpt = None,
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
    _check_free(host, port)
    opts = options(ctx)
    workflows = [t.workflow for t in load_targets(targets or [], registry)]
    console = make_console()

    def ready(url: str) -> None:
        names = ", ".join(f"{wf.name}@{wf.version}" for wf in workflows) or "none (use a worker)"
        console.print(Text(f"durable-flow ui on {url} over {display_db(opts.db)}; runs here: "
                           f"{names}{'; token required' if token else ''}"), soft_wrap=True)

    serve(open_store(opts.db, create=True, serving=True), workflows=workflows, host=host, port=port,
          token=token, on_ready=ready)


def _check_free(host: str, port: int) -> None:
    """One line, before anything starts, when the address cannot be listened on."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            probe.bind((host, port))
    except OSError as exc:
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}"
                       f"{' (is another server on it? pass --port)' if exc.errno == errno.EADDRINUSE else ''}"
                       ) from None
