"""Opening the store named by ``--db`` and looking runs up through the Runtime."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from ..errors import RunNotFoundError
from ..model._graph import Workflow
from ..model._records import RunInfo
from ..runtime._runtime import Runtime
from ..store._protocols import CheckpointStore
from ._support import CliError, CliOptions, resolve_workflow

__all__ = [
    "display_db",
    "find_run",
    "open_store",
    "opened",
    "parse_db",
    "resolve_checkpoint",
    "workflow_for_run",
]

_POSTGRES_SCHEMES = ("postgresql", "postgres")


def parse_db(db: str) -> tuple[str, str]:
    """Split ``--db`` into ``("sqlite", path)`` or ``("postgresql", url)``.

    A plain path and ``sqlite:///path`` (``sqlite:////abs/path``) are SQLite
    files; ``postgresql://...`` is PostgreSQL.
    """
    scheme, sep, rest = db.partition("://")
    if not sep:
        return "sqlite", db
    base = scheme.lower().split("+", 1)[0]
    if base == "sqlite":
        if not rest.startswith("/") or rest == "/":
            raise CliError(f"{db!r} names no file; write sqlite:///relative.db or sqlite:////abs.db")
        return "sqlite", rest[1:]
    if base in _POSTGRES_SCHEMES:
        return "postgresql", db
    raise CliError(f"unsupported database {scheme}://...; use a file path, sqlite:///PATH "
                   "or postgresql://...")


def display_db(db: str) -> str:
    """``--db`` for messages: a URL's password is hidden."""
    parts = urlsplit(db)
    if parts.password is None:
        return db
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def open_store(db: str, *, create: bool = False) -> CheckpointStore:
    """The store behind ``--db``; a SQLite file must exist unless ``create``."""
    kind, target = parse_db(db)
    if kind == "postgresql":
        return _postgres_store(target)
    path = Path(target).expanduser()
    if not path.exists():
        if not create:
            raise CliError(f"no database at {path}; start a run with `durable-flow run`, "
                           "or pass --db PATH / set DURABLE_FLOW_DB")
        if not path.parent.is_dir():
            raise CliError(f"cannot create database {path}: no directory {path.parent}")
    from ..store._sqlite import SqliteStore

    return SqliteStore(str(path), synchronous="full")


def _postgres_store(url: str) -> CheckpointStore:
    # Imported here: SQLite users never load the PostgreSQL driver module.
    from ..store._postgres import PostgresStore

    return PostgresStore(url)


@asynccontextmanager
async def opened(opts: CliOptions, *, create: bool = False) -> AsyncIterator[Runtime]:
    """A set-up :class:`Runtime` on the ``--db`` store, closed afterwards."""
    async with Runtime(open_store(opts.db, create=create)) as rt:
        yield rt


async def find_run(rt: Runtime, run_id: str) -> RunInfo:
    """The run's :class:`RunInfo`, or ``RunNotFoundError``."""
    for info in await rt.list_runs():
        if info.run_id == run_id:
            return info
    raise RunNotFoundError(run_id)


async def workflow_for_run(rt: Runtime, run_id: str,
                           ref: str | None) -> tuple[Workflow, str | None]:
    """The workflow to continue ``run_id`` with, and the recorded ref if that was used.

    ``--workflow`` (``ref``) wins; otherwise the ``MODULE:WORKFLOW`` that
    ``durable-flow run`` recorded on the run is imported, like a reference
    typed on the command line (same strict ``MODULE:NAME`` form). Only point
    the CLI at databases you trust, or pass ``--workflow``.
    """
    info = await find_run(rt, run_id)
    if ref is not None:
        return resolve_workflow(ref), None
    if not info.workflow_ref:
        raise CliError(f"run {run_id} has no recorded workflow (it was not started by "
                       "`durable-flow run`); pass --workflow MODULE:WORKFLOW")
    return resolve_workflow(info.workflow_ref), info.workflow_ref


async def resolve_checkpoint(rt: Runtime, run_id: str, ref: str, namespace: str = "") -> str:
    """A checkpoint id from an exact id or a unique prefix of one in ``namespace``."""
    ids = [c.id for c in await rt.history(run_id, namespace=namespace)]
    if ref in ids:
        return ref
    matches = [i for i in ids if i.startswith(ref)]
    if len(matches) > 1:
        raise CliError(f"checkpoint prefix {ref!r} is ambiguous in run {run_id}: "
                       f"{', '.join(matches[:5])}{', ...' if len(matches) > 5 else ''}")
    return matches[0] if matches else ref

