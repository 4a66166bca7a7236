"""The typer application: global options, one-line errors, command registration.

A command's module is imported when the application that has it is built.
``main`` (the console script) builds one with only the command named on the
command line, when the options before it are plain: the other commands'
modules are never imported nor their options built (a short command such as
``durable-flow runs`` starts sooner). Anything else (``--help``, no command,
an unknown one) gets the whole application, :data:`app`.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer
from typer.core import TyperGroup

from .._version import __version__
from ..errors import DurableFlowError
from ._support import DEFAULT_DB, CliError, CliOptions, describe_error, fail, options

if TYPE_CHECKING:
    app: typer.Typer  # the whole application (module __getattr__)

__all__ = ["app", "build_app", "command_named", "main"]

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

def _show_version(value: bool) -> None:
    if value:
        print(f"durable-flow {__version__}")
        raise typer.Exit()


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
            if isinstance(exc, CliError):
                fail(describe_error(exc), exc.exit_code)
            if isinstance(exc, DurableFlowError):
                fail(describe_error(exc))
            fail(f"{type(exc).__name__}: {describe_error(exc)} (--debug shows the traceback)")

    return wrapper


def _register(group: typer.Typer, name: str, fn: Callable[..., None]) -> None:
    group.command(name)(_guarded(fn))


# name, module of this package, function; in the order of the help
_COMMANDS = [
    ("run", "_running", "run"), ("runs", "_reading", "runs"), ("show", "_reading", "show"),
    ("history", "_reading", "history"), ("diff", "_reading", "diff"),
    ("inbox", "_reading", "inbox"), ("respond", "_running", "respond"),
    ("resume", "_running", "resume"), ("fork", "_running", "fork"),
    ("send-event", "_events", "send_event"), ("follow", "_stream", "follow"),
    ("cancel", "_bulk", "cancel"), ("pause", "_bulk", "pause"),
    ("unpause", "_bulk", "unpause"), ("retry", "_bulk", "retry"),
    ("recover", "_control", "recover"), ("graph", "_tools", "graph"),
    ("validate", "_tools", "validate"), ("worker", "_worker", "worker"), ("ui", "_ui", "ui"),
    ("check-upgrade", "_upgrade", "check_upgrade"), ("export", "_transfer", "export_run"),
    ("import", "_transfer", "import_run"), ("audit", "_approvals", "audit"),
    ("link", "_approvals", "link"),
]
_DB_COMMANDS = [("upgrade", "_tools", "upgrade"), ("prune", "_tools", "prune")]
_USERS_COMMANDS = [("add", "_approvals", "users_add"), ("list", "_approvals", "users_list"),
                   ("remove", "_approvals", "users_remove"),
                   ("set-roles", "_approvals", "users_set_roles"),
                   ("set-password", "_approvals", "users_set_password")]
_SCHEDULES_COMMANDS = [(name, "_schedules", f"schedules_{name}")
                       for name in ("list", "add", "remove", "pause", "resume")]
_GROUPS = {"db", "users", "schedules"}
# global options before the command: those taking a value, and flags
_VALUED, _FLAGS = {"--db"}, {"--log-json", "--debug"}


def _command(module: str, name: str) -> Callable[..., None]:
    return cast("Callable[..., None]", getattr(importlib.import_module(f"{__package__}.{module}"),
                                               name))


# click's UsageError and ClickException, whether typer vendors click or imports it
_USAGE_ERROR: type[Any] = typer.BadParameter.__mro__[1]
_CLICK_ERROR: type[Any] = _USAGE_ERROR.__mro__[1]


class _OneLineUsage(TyperGroup):
    """The root command: a command line it cannot parse is one line on stderr, exit 2.

    Click (through rich) would draw the problem in a box under the usage; a
    user, and a script reading stderr, gets ``error: ...`` and where help is.
    """

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             windows_expand_args: bool = True, **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, windows_expand_args,
                                **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, windows_expand_args,
                                **extra)
        except _USAGE_ERROR as exc:
            where = exc.ctx.command_path if exc.ctx is not None else prog_name or "durable-flow"
            print(f"error: {exc.format_message()} (see '{where} --help')", file=sys.stderr)
            sys.exit(exc.exit_code)
        except _CLICK_ERROR as exc:
            print(f"error: {exc.format_message()}", file=sys.stderr)
            sys.exit(exc.exit_code)
        except typer.Abort:
            print("error: aborted", file=sys.stderr)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


def build_app(only: str | None = None) -> typer.Typer:
    """The application with every command, or with command (or group) ``only`` alone."""
    root = typer.Typer(name="durable-flow", help=_HELP, no_args_is_help=True, cls=_OneLineUsage,
                       add_completion=False, pretty_exceptions_show_locals=False)
    if only in (None, "db"):
        db_app = typer.Typer(name="db", help="Create, upgrade and prune the database.",
                             no_args_is_help=True)
        root.add_typer(db_app, name="db")
        for name, module, fn in _DB_COMMANDS:
            _register(db_app, name, _command(module, fn))
    if only in (None, "users"):
        users_app = typer.Typer(name="users", help="The web app's people: add, list, remove, "
                                "set their roles.", no_args_is_help=True)
        root.add_typer(users_app, name="users")
        for name, module, fn in _USERS_COMMANDS:
            _register(users_app, name, _command(module, fn))
    if only in (None, "schedules"):
        schedules_app = typer.Typer(name="schedules", help="Cron schedules that workers start "
                                    "runs of: list, add, remove, pause, resume.",
                                    no_args_is_help=True)
        root.add_typer(schedules_app, name="schedules")
        for name, module, fn in _SCHEDULES_COMMANDS:
            _register(schedules_app, name, _command(module, fn))
    root.callback()(_global_options)
    for name, module, fn in _COMMANDS:
        if only in (None, name):
            _register(root, name, _command(module, fn))
    return root


def command_named(args: Sequence[str]) -> str | None:
    """The command ``args`` run, when only plain global options come before it."""
    known = {name for name, _, _ in _COMMANDS} | _GROUPS
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in _VALUED:
            i += 2
        elif arg in _FLAGS or arg.split("=", 1)[0] in _VALUED:
            i += 1
        else:
            return arg if arg in known else None  # --help, --version, ...: the whole app
    return None


@functools.cache
def _whole_app() -> typer.Typer:
    return build_app()


def __getattr__(name: str) -> typer.Typer:
    if name == "app":  # the whole application, built on first use
        return _whole_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Console-script entry point of ``durable-flow``."""
    only = command_named(sys.argv[1:])
    (build_app(only) if only else _whole_app())(prog_name="durable-flow")
