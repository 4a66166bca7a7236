"""Opening the store named by ``--db`` and looking runs up through the Runtime.

The Runtime (and with it the engine and the workflow models) is imported by
the commands that need it: listing runs reads through the inspection views.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from ..model._records import RunInfo
from ..runtime._inspect import Inspector
from ..store._protocols import CheckpointMeta, CheckpointStore
from ._support import CliError, CliOptions
from ._targets import load_runnable, parse_recorded

if TYPE_CHECKING:
    from ..model._graph import Workflow
    from ..runtime._runtime import Runtime

__all__ = [
    "display_db",
    "find_run",
    "inspected",
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


#: How long a command a person waits for gives a PostgreSQL server that is down;
#: long-lived processes (``worker``, ``ui``) keep the store's own, longer default.
INTERACTIVE_RECONNECT = 5.0


def open_store(db: str, *, create: bool = False, serving: bool = False) -> CheckpointStore:
    """The store behind ``--db``; a SQLite file must exist unless ``create``.

    ``serving``: for a long-lived process, which rides out a database restart;
    other commands give a PostgreSQL server that is down a few seconds.
    """
    kind, target = parse_db(db)
    if kind == "postgresql":
        return _postgres_store(target, None if serving else INTERACTIVE_RECONNECT)
    path = Path(target).expanduser()
    if not path.exists():
        if not create:
            raise CliError(f"no database at {path}; start a run with `durable-flow run`, "
                           "or pass --db PATH / set DURABLE_FLOW_DB")
        if not path.parent.is_dir():
            raise CliError(f"cannot create database {path}: no directory {path.parent}")
    from ..store.sqlite._sqlite import SqliteStore

    return SqliteStore(str(path), synchronous="full")


def _postgres_store(url: str, reconnect_timeout: float | None) -> CheckpointStore:
    # Imported here: SQLite users never load the PostgreSQL driver module.
    from ..store.postgres._postgres import PostgresStore

    if reconnect_timeout is None:
        return PostgresStore(url)
    return PostgresStore(url, reconnect_timeout=reconnect_timeout)


@asynccontextmanager
async def opened(opts: CliOptions, *, create: bool = False,
                 logs: bool = True) -> AsyncIterator[Runtime]:
    """A set-up :class:`Runtime` on the ``--db`` store, closed afterwards.

    ``logs=False`` (the read-only commands, which log nothing) leaves logging
    unconfigured, so that structlog is never imported.
    """
    from ..runtime._runtime import Runtime

    if logs:
        opts.setup_logging()
    async with Runtime(open_store(opts.db, create=create)) as rt:
        yield rt


@asynccontextmanager
async def inspected(opts: CliOptions) -> AsyncIterator[Inspector]:
    """The ``--db`` store's inspection views, set up, closed afterwards.

    What ``Runtime``'s listings read (``Runtime.list_runs`` is ``Inspector.runs``),
    for a command that only lists: the engine and the workflow models are never imported.
    """
    store = open_store(opts.db)
    await store.setup()
    try:
        yield Inspector(store)
    finally:
        await store.close()


async def find_run(rt: Runtime, run_id: str) -> RunInfo:
    """The run's :class:`RunInfo`, or ``RunNotFoundError``."""
    return await rt.get_run(run_id)


async def workflow_for_run(rt: Runtime, run_id: str,
                           ref: str | None) -> tuple[Workflow, str | None]:
    """The workflow to continue ``run_id`` with, and the recorded target if that was used.

    ``--workflow`` (``ref``) wins; otherwise the target that ``durable-flow
    run`` recorded on the run (``MODULE:NAME``, a Python file, or a
    declarative file with its registry) is loaded, like one typed on the
    command line. Only point the CLI at databases you trust, or pass
    ``--workflow``.
    """
    info = await find_run(rt, run_id)
    if ref is not None:
        return load_runnable(ref).workflow, None
    if not info.workflow_ref:
        raise CliError(f"run {run_id} has no recorded workflow (it was not started by "
                       "`durable-flow run`); pass --workflow MODULE:WORKFLOW")
    target, registry = parse_recorded(info.workflow_ref)
    return load_runnable(target, registry).workflow, info.workflow_ref


async def resolve_checkpoint(rt: Runtime, run_id: str, ref: str) -> str:
    """The id of the checkpoint ``ref`` names in run ``run_id``.

    ``ref`` is a checkpoint id, a unique suffix (or prefix) of one, or
    ``@SUPERSTEP`` (the newest top-level checkpoint of that superstep), with
    ``/NODE@SUPERSTEP`` steps into sub-workflows: ``@3/review@2`` is the
    checkpoint of inner superstep 2 of the sub-workflow ``review`` that ran
    during top-level superstep 3 (the numbering of request ids such as
    ``review@3/legal@2/sign@1#0``).
    """
    await find_run(rt, run_id)
    if ref.startswith("@"):
        return await _by_superstep(rt.store, run_id, ref)
    if await rt.store.get_checkpoint(run_id, ref) is not None:
        return ref
    # two matches are enough to call it ambiguous: a long run's ids are not all read
    matches = await rt.store.checkpoint_ids(run_id, ref, limit=2)
    if len(matches) > 1:
        raise CliError(f"checkpoint {ref!r} is ambiguous in run {run_id}: it ends more than "
                       f"one checkpoint id ({', '.join(matches)}, ...); "
                       "give more characters, or @SUPERSTEP")
    if not matches:
        raise CliError(f"run {run_id} has no checkpoint {ref!r} (give an id, a unique end of "
                       "one, or @SUPERSTEP; see `durable-flow history`)")
    return matches[0]


_STEP = re.compile(r"^(?P<node>[^@/]*)@(?P<superstep>\d+)$")
_PAGE = 200  # checkpoints read at a time while looking for a superstep


def _steps(ref: str) -> list[tuple[str, int]]:
    """``@3/review@2`` as ``[("", 3), ("review", 2)]``."""
    steps = []
    for i, part in enumerate(ref.split("/")):
        m = _STEP.match(part)
        if m is None or bool(m["node"]) != (i > 0):
            raise CliError(f"{ref!r} is not a superstep reference (for example @3 or @3/review@2)")
        steps.append((m["node"], int(m["superstep"])))
    return steps


async def _by_superstep(store: CheckpointStore, run_id: str, ref: str) -> str:
    [(_, superstep), *inner] = _steps(ref)
    return await _find(store, run_id, "", "the run", superstep, inner, ref)


async def _find(store: CheckpointStore, run_id: str, thread: str, where: str, superstep: int,
                inner: list[tuple[str, int]], ref: str) -> str:
    """The checkpoint of ``superstep`` in ``thread``, or of the ``inner`` steps below it.

    A sub-workflow that ran during a superstep may have several threads: a
    resume inside it goes on in a copy under a newer checkpoint of the same
    superstep. They are tried newest first.
    """
    if inner:
        (node, inner_superstep), rest = inner[0], inner[1:]
        first: CliError | None = None
        async for sub in _subthreads(store, run_id, thread, superstep, node):
            try:
                return await _find(store, run_id, sub, f"sub-workflow {node} of superstep "
                                   f"{superstep}", inner_superstep, rest, ref)
            except CliError as exc:
                first = first or exc
        raise first or CliError(
            f"{ref!r}: no sub-workflow {node!r} ran during superstep {superstep}")
    async for meta in _newest_first(store, run_id, thread):
        if meta.superstep == superstep:  # the checkpoint of that superstep on the current chain
            return meta.id
    oldest = await store.first_checkpoint(run_id, thread)
    head = await store.thread_head(run_id, thread)
    span = f"{oldest.superstep} to {head.superstep}" if oldest and head else "none"
    raise CliError(f"{ref!r}: {where} has no checkpoint at superstep {superstep} "
                   f"(its supersteps: {span})")


async def _subthreads(store: CheckpointStore, run_id: str, thread: str, superstep: int,
                      node: str) -> AsyncIterator[str]:
    """The threads of sub-workflow ``node`` run during ``superstep`` of ``thread``, newest first."""
    async for base in _newest_first(store, run_id, thread):
        if base.superstep == superstep - 1 and node in base.next_tasks:
            sub = f"{base.id}/{node}"
            if await store.thread_head(run_id, sub) is not None:
                yield sub


async def _newest_first(store: CheckpointStore, run_id: str,
                        thread: str) -> AsyncIterator[CheckpointMeta]:
    """The checkpoints of ``thread``, newest first, a page at a time.

    A reference to a recent superstep of a long run reads a page or two, not
    every checkpoint of the run.
    """
    before: str | None = None
    while True:
        page = await store.list_checkpoints(run_id, thread=thread, before=before,
                                            limit=_PAGE)
        for meta in page:
            yield meta
        if len(page) < _PAGE:
            return
        before = page[-1].id
