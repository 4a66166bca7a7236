"""What every command shares: options, one-line errors, JSON arguments, imports.

Imports happen only for ``MODULE:NAME`` references (dotted Python names on
each side, nothing else) typed on the command line, or recorded on a run by
``durable-flow run`` (the default of resume/respond/fork, see
``_db.workflow_for_run``). No other value read from the database is imported.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import orjson
import typer

from ..errors import InvalidResponseError, WorkflowValidationError

if TYPE_CHECKING:  # imported where used: a command that only reads needs neither
    from pydantic import ValidationError as PydanticValidationError

    from ..model._graph import Workflow

__all__ = [
    "DEFAULT_DB",
    "CliError",
    "CliOptions",
    "UsageError",
    "compact",
    "describe_error",
    "fail",
    "jsonable",
    "load_object",
    "note",
    "options",
    "preview_json",
    "read_json",
    "read_json_object",
    "resolve_workflow",
    "scrub",
]

DEFAULT_DB = "durable_flow.db"
_REF = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")


class CliError(Exception):
    """A problem with what the user typed; printed as one line, exit code 1 (refused)."""

    exit_code = 1


class UsageError(CliError):
    """A malformed command line (such as JSON that does not parse): one line, exit code 2."""

    exit_code = 2


@dataclass(frozen=True, slots=True)
class CliOptions:
    """The global options, shared by every command through ``ctx.obj``."""

    db: str = DEFAULT_DB
    log_json: bool = False
    debug: bool = False

    def setup_logging(self, *, info: bool = False) -> None:
        """Route log lines to standard error, as ``--log-json`` and ``--debug`` ask.

        Called by the commands that execute runs only: importing structlog
        costs more than a command that reads the database takes. ``info``
        (a worker) writes INFO lines (claims, runs) without ``--log-json``.
        """
        from ..runtime.observability._logging import configure_logging

        level = "DEBUG" if self.debug else "INFO" if self.log_json or info else "WARNING"
        configure_logging(json=self.log_json, level=level, tracebacks=self.debug or self.log_json)

    @property
    def db_args(self) -> list[str]:
        """``["--db", db]`` when a printed command needs it to reach the same database."""
        if self.db in (DEFAULT_DB, os.environ.get("DURABLE_FLOW_DB")):
            return []
        return ["--db", self.db]


def options(ctx: typer.Context) -> CliOptions:
    """The global options of this invocation."""
    obj = ctx.find_root().obj
    return obj if isinstance(obj, CliOptions) else CliOptions()


def note(message: str) -> None:
    """Tell the user something on standard error (never mixed into JSON output)."""
    print(message, file=sys.stderr)


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``error: message`` as one line on standard error and exit with ``code``."""
    print(f"error: {' '.join(message.split())}", file=sys.stderr)
    raise typer.Exit(code)


def jsonable(value: Any) -> Any:
    """Fallback for orjson: pydantic models by their JSON dump, other types as pydantic would."""
    model, to_jsonable_python = _pydantic()
    if isinstance(value, model):
        return value.model_dump(mode="json")
    return to_jsonable_python(value, fallback=repr)


@functools.cache
def _pydantic() -> tuple[type[Any], Callable[..., Any]]:
    from pydantic import BaseModel
    from pydantic_core import to_jsonable_python

    return BaseModel, to_jsonable_python


def compact(value: Any) -> str:
    """One-line JSON for messages and table cells."""
    return orjson.dumps(value, default=jsonable, option=orjson.OPT_NON_STR_KEYS).decode()


def describe_error(exc: BaseException) -> str:
    """A one-line description of an error, with what the user needs to fix it.

    Validation details are given as ``field: problem (got JSON)``, never as
    pydantic's multi-line dump with documentation links and Python reprs, and
    hints that name a Python argument (``allow_mismatch=True``) name the
    command-line option instead (``--allow-mismatch``).
    """
    if isinstance(exc, WorkflowValidationError):
        head = str(exc).split("\n", 1)[0].rstrip(":")
        return f"{head}: {'; '.join(exc.problems)}"
    text = _explained(exc)
    if isinstance(exc, InvalidResponseError) and exc.schema is not None:
        text += f"; expected JSON schema: {compact(exc.schema)}"
    text = text.replace("(pass by=PRINCIPAL)", "(answer as one of them with --by USER)")
    return _PY_ARGUMENT.sub(lambda m: f"pass --{m.group(1).replace('_', '-')}", text)


_PY_ARGUMENT = re.compile(r"pass ([a-z_]+)=True")
_PYDANTIC_LINK = re.compile(r"\s*For further information visit \S+")
_PYDANTIC_DETAIL = re.compile(r"\s*\[type=[^\]]*\]")


def _explained(exc: BaseException) -> str:
    """``str(exc)`` with the validation error it wraps (its context) rewritten."""
    from pydantic import ValidationError as PydanticValidationError

    text = str(exc)
    inner = exc.__cause__ or exc.__context__
    if isinstance(inner, PydanticValidationError):
        text = text.replace(str(inner), _pydantic_problems(inner))
    elif type(inner).__name__ == "ValidationError" and hasattr(inner, "instance") \
            and isinstance(message := getattr(inner, "message", None), str):
        # jsonschema's: the answer checked against a request's schema
        text = text.replace(message, _schema_problem(inner))
    return scrub(text) or type(exc).__name__


def scrub(text: str) -> str:
    """One line of ``text``, without pydantic's documentation links and repr details."""
    return " ".join(_PYDANTIC_DETAIL.sub("", _PYDANTIC_LINK.sub("", text)).split())


def _pydantic_problems(error: PydanticValidationError) -> str:
    problems = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"])
        got = f" (got {preview_json(item['input'])})" if "input" in item else ""
        problems.append(f"{where + ': ' if where else ''}{item['msg']}{got}")
    return "; ".join(problems)


def _schema_problem(error: Any) -> str:
    """A JSON Schema error with the value as JSON rather than a Python repr."""
    message: str = error.message.replace(repr(error.instance), preview_json(error.instance))
    message = re.sub(r"'([^'\s]*)'", r'"\1"', message)
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return f"at {path.lstrip('.')}: {message}" if path else message


def preview_json(value: Any, limit: int = 80) -> str:
    """Compact JSON of ``value`` for messages, cut at ``limit`` characters."""
    try:
        text = compact(value)
    except TypeError:
        text = type(value).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def read_json(text: str, option: str) -> Any:
    """Parse ``text`` as JSON; ``@path`` reads the file, ``@-`` standard input."""
    raw: str | bytes = text
    if text.startswith("@"):
        source = text[1:]
        try:
            raw = sys.stdin.read() if source == "-" else Path(source).read_bytes()
        except OSError as exc:
            raise UsageError(f"{option}: cannot read {source}: {exc.strerror or exc}") from None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"{option} is not valid JSON: {exc}") from None


def read_json_object(text: str, option: str) -> dict[str, Any]:
    """Like :func:`read_json`, requiring a JSON object."""
    value = read_json(text, option)
    if not isinstance(value, dict):
        raise UsageError(f"{option} must be a JSON object, got {type(value).__name__}")
    return value


def load_object(ref: str, what: str = "MODULE:NAME") -> Any:
    """Import ``MODULE`` (the current directory first on the path) and return ``NAME``."""
    if not _REF.match(ref):
        raise CliError(f"{ref!r} is not a {what} reference (for example myflows:workflow)")
    module_name, _, attr = ref.partition(":")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name + ".").startswith(exc.name + "."):
            raise CliError(f"cannot import {module_name!r}: no such module in {cwd} "
                           "or on the Python path") from None
        raise CliError(f"importing {module_name!r} failed: {exc}") from exc
    except Exception as exc:  # the user's module raised while importing
        raise CliError(f"importing {module_name!r} failed: "
                       f"{type(exc).__name__}: {describe_error(exc)}") from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise CliError(f"module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def resolve_workflow(ref: str) -> Workflow:
    """The :class:`Workflow` named by ``MODULE:WORKFLOW``, or a clear ``CliError``."""
    from ..building._builder import WorkflowBuilder
    from ..model._graph import Workflow

    obj = load_object(ref, "MODULE:WORKFLOW")
    if isinstance(obj, Workflow):
        return obj
    if isinstance(obj, WorkflowBuilder):
        raise CliError(f"{ref} is a WorkflowBuilder; point at the built workflow "
                       "(the result of builder.build())")
    raise CliError(f"{ref} is not a durable_flow Workflow (it is of type {type(obj).__name__})")
