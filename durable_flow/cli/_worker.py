"""``durable-flow worker``: serve runs from the store until SIGTERM or Ctrl-C."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
from typing import Annotated

import typer
from rich.text import Text

from .._logs import get_logger
from ..model._graph import Workflow
from ..runtime._worker import Worker
from ._db import display_db, open_store
from ._limits import parse_limits
from ._options import RegistryOpt
from ._output import make_console
from ._support import CliOptions, options
from ._targets import load_targets
from ._ui import notifiers_from

__all__ = ["freeze_startup_heap", "worker"]

_log = get_logger()

TargetsArg = Annotated[list[str], typer.Argument(
    metavar="WORKFLOW...", show_default=False,
    help="The workflows this worker runs (each name and version it is given): MODULE:NAME, "
         "path/to/file.py:NAME, or a declarative .json/.yaml file (with --registry).")]


def worker(
    ctx: typer.Context,
    targets: TargetsArg,
    concurrency: Annotated[int, typer.Option(help="Runs executed at once.")] = 8,
    lease_ttl: Annotated[float, typer.Option(
        help="Seconds a run's lease lives without renewal (renewed every third).")] = 30.0,
    poll_interval: Annotated[float, typer.Option(
        help="Seconds between looks at the queue when nothing wakes the worker.")] = 1.0,
    grace_period: Annotated[float, typer.Option(
        help="Seconds running supersteps get to finish on stop.")] = 10.0,
    name: Annotated[str | None, typer.Option(help="This worker's name in leases and logs.")] = None,
    registry: RegistryOpt = None,
    notify_webhook: Annotated[str | None, typer.Option(
        "--notify-webhook", metavar="URL", show_default=False,
        help="Deliver the notification outbox to this webhook (JSON, Slack-compatible).")] = None,
    smtp: Annotated[str | None, typer.Option(
        "--smtp", metavar="HOST:PORT", show_default=False,
        help="Deliver the notification outbox by email through this SMTP server.")] = None,
    smtp_from: Annotated[str, typer.Option("--smtp-from", metavar="ADDR",
                                           help="The sender of those emails.")
                         ] = "durable-flow@localhost",
    base_url: Annotated[str | None, typer.Option(
        "--base-url", metavar="URL", show_default=False,
        help="Where `durable-flow ui` is reached, for signed links in notifications.")] = None,
    limit: Annotated[list[str] | None, typer.Option(
        "--limit", metavar="NAME=SPEC", show_default=False,
        help="A limit nodes with uses=(NAME,) share across the fleet, e.g. "
             "api=concurrency:4,per_minute:60 (repeat for more).")] = None,
) -> None:
    """Claim queued and abandoned runs of these workflows and execute them.

    SIGTERM or Ctrl-C stops gracefully (running supersteps finish within the
    grace period; what is left goes back to the queue); a second one stops at once.
    It logs at INFO to standard error: each claim (run_claimed, with
    takeover=True for a run taken from a worker whose lease expired), each
    execution and each run's outcome.
    """
    opts = options(ctx)
    opts.setup_logging(info=True)  # a worker says what it claims and runs
    workflows = [t.workflow for t in load_targets(targets, registry)]
    made = Worker(open_store(opts.db, create=True, serving=True), workflows, concurrency=concurrency,
                  lease_ttl=lease_ttl, poll_interval=poll_interval, grace_period=grace_period,
                  name=name, notifiers=notifiers_from(notify_webhook, smtp, smtp_from),
                  base_url=base_url, limits=parse_limits(limit or ()))
    asyncio.run(_serve(opts, made, workflows))


def freeze_startup_heap() -> int:
    """Leave what the process holds when it starts serving out of later full collections.

    The modules, the workflows and the store's statements stay alive as long
    as the process; a full collection walks every object it tracks, and no
    superstep of any run moves meanwhile (what it costs: bench/RESULTS.md,
    the scale bench's frozen figure). ``gc.freeze`` after one collection
    moves them to the permanent generation: later collections walk only what
    the runs allocate. Returns how many objects were frozen.
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


async def _serve(opts: CliOptions, w: Worker, workflows: list[Workflow]) -> None:
    console = make_console()
    async with w:
        # a worker process is ours: what it holds now lives as long as it does
        _log.info("worker_heap_frozen", worker=w.name, objects=freeze_startup_heap())
        serving = asyncio.create_task(w.serve())
        loop = asyncio.get_running_loop()
        stops: list[asyncio.Task[None]] = []

        def on_signal() -> None:
            if not stops:
                console.print(Text(f"stopping: {len(w.running)} run(s) get "
                                   f"{w.grace_period:g}s to finish (again to stop now)"))
                stops.append(asyncio.create_task(w.stop()))
            else:
                serving.cancel()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal)
        names = ", ".join(f"{wf.name}@{wf.version}" for wf in workflows)
        console.print(Text(f"worker {w.name} serving {names} on {display_db(opts.db)} "
                           f"(concurrency {w.concurrency})"), soft_wrap=True)
        with contextlib.suppress(asyncio.CancelledError):
            await serving
        for task in stops:
            with contextlib.suppress(asyncio.CancelledError):
                await task
    console.print(Text(f"worker {w.name} stopped after {len(w.results)} execution(s)"))
