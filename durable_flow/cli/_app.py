"""The typer application: global options, one-line errors, command registration."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Annotated, Any

import typer

from .. import __version__
from ..errors import DurableFlowError
from . import _control, _events, _reading, _running, _tools, _ui, _worker
from ._support import DEFAULT_DB, CliError, CliOptions, describe_error, fail, options

__all__ = ["app", "main"]

_HELP = """Run, inspect and answer durable-flow workflows.

Exit codes: 0 success (a run that completed or waits for input), 1 an error
or a failed run, 2 a usage error, 130 interrupted.

A WORKFLOW is MODULE:NAME (imported with the current directory on the path),
path/to/file.py:NAME, or a declarative .json/.yaml file (with --registry). A
run started by `durable-flow run` records its workflow; `resume`, `respond`
and `fork` import that recorded workflow when --workflow is not given, so use
them only on databases you trust or pass --workflow.

A CHECKPOINT is its id, a unique end of one, or @SUPERSTEP (@3; @3/review@2
inside the sub-workflow review that ran during superstep 3).

Logs go to standard error: warnings and errors by default, run and request
events with --log-json (as JSON lines), everything with --debug.
"""

app = typer.Typer(name="durable-flow", help=_HELP, no_args_is_help=True, add_completion=False,
                  pretty_exceptions_show_locals=False)
db_app = typer.Typer(name="db", help="Create, upgrade and prune the database.",
                     no_args_is_help=True)
app.add_typer(db_app, name="db")


def _show_version(value: bool) -> None:
    if value:
        print(f"durable-flow {__version__}")
        raise typer.Exit()


@app.callback()
def _global_options(
    ctx: typer.Context,
    db: Annotated[str, typer.Option(
        "--db", envvar="DURABLE_FLOW_DB", metavar="PATH|URL",
        help="SQLite file (PATH or sqlite:///PATH) or postgresql:// URL.")] = DEFAULT_DB,
    log_json: Annotated[bool, typer.Option(
        "--log-json", help="Write log lines to stderr as JSON, from level INFO (runs, "
                           "requests, retries, failures with their tracebacks).")] = False,
    debug: Annotated[bool, typer.Option(
        "--debug", help="Log everything (supersteps, nodes, leases) and show tracebacks "
                        "of errors and failed nodes.")] = False,
    version: Annotated[bool, typer.Option(
        "--version", callback=_show_version, is_eager=True,
        help="Print the version and exit.")] = False,
) -> None:
    del version
    ctx.obj = CliOptions(db=db, log_json=log_json, debug=debug)


def _guarded(fn: Callable[..., None]) -> Callable[..., None]:
    """Turn any error into one ``error: ...`` line and exit 1 (130 for Ctrl-C), unless --debug."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        debug = options(kwargs["ctx"]).debug  # every command takes ctx
        try:
            fn(*args, **kwargs)
        except (typer.Exit, typer.Abort):
            raise
        except KeyboardInterrupt:
            if debug:
                raise
            fail("interrupted", 130)
        except Exception as exc:
            if debug:
                raise
            if isinstance(exc, CliError | DurableFlowError):
                fail(describe_error(exc))
            fail(f"{type(exc).__name__}: {describe_error(exc)} (--debug shows the traceback)")

    return wrapper


def _register(group: typer.Typer, name: str, fn: Callable[..., None]) -> None:
    group.command(name)(_guarded(fn))


_COMMANDS: list[tuple[str, Callable[..., None]]] = [
    ("run", _running.run), ("runs", _reading.runs), ("show", _reading.show),
    ("history", _reading.history), ("diff", _reading.diff), ("inbox", _reading.inbox),
    ("respond", _running.respond), ("resume", _running.resume), ("fork", _running.fork),
    ("send-event", _events.send_event),
    ("cancel", _control.cancel), ("recover", _control.recover), ("graph", _tools.graph),
    ("validate", _tools.validate), ("worker", _worker.worker), ("ui", _ui.ui),
]
for _name, _fn in _COMMANDS:
    _register(app, _name, _fn)
_register(db_app, "upgrade", _tools.upgrade)
_register(db_app, "prune", _tools.prune)


def main() -> None:
    """Console-script entry point of ``durable-flow``."""
    app(prog_name="durable-flow")
