"""Commands about workflows and the database: graph, validate, db upgrade, db prune."""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from ..errors import WorkflowValidationError
from ..model._graph import Workflow
from ._db import display_db, find_run, opened
from ._options import DiagramFormat, JsonOpt, RegistryOpt, TargetArg
from ._output import byte_size, emit_json, make_console
from ._prune import plan_prune, prune_notices, reclaim_disk
from ._support import fail, options
from ._targets import load_file, load_target

__all__ = ["graph", "prune", "upgrade", "validate"]


def _render(workflow: Workflow, fmt: DiagramFormat) -> str:
    from ..building._diagram import to_dot, to_mermaid

    return to_dot(workflow) if fmt is DiagramFormat.DOT else to_mermaid(workflow)


def graph(
    ctx: typer.Context,
    target: TargetArg,
    fmt: Annotated[DiagramFormat, typer.Option(
        "--format", "-f", case_sensitive=False, help="Diagram language.")] = DiagramFormat.MERMAID,
    registry: RegistryOpt = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print the graph's structure as JSON instead of a diagram.")] = False,
) -> None:
    """Print the workflow's graph as a Mermaid (default) or Graphviz dot diagram."""
    workflow = load_target(target, registry).workflow
    if as_json:
        emit_json(workflow.describe())
        return
    text = _render(workflow, fmt)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def validate(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(metavar="FILE", show_default=False,
                                         help="A declarative .json/.yaml workflow file.")],
    registry: RegistryOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check a declarative workflow file; every problem is listed at once.

    Without --registry the file's agent names are not checked.
    """
    notes: list[str] = []
    try:
        workflow: Workflow | None = load_file(file, registry, notes)
        problems: list[str] = []
    except WorkflowValidationError as exc:
        workflow, problems = None, exc.problems
    if registry is None and not notes:
        notes.append("no registry given: agent names were not checked")
    if as_json:
        emit_json({"file": str(file), "valid": workflow is not None,
                   "workflow": workflow.name if workflow else None,
                   "nodes": sorted(workflow.nodes) if workflow else [],
                   "problems": problems, "notes": notes})
    else:
        if workflow is not None:
            make_console().print(Text(f"{file}: workflow {workflow.name!r} is valid "
                                      f"({len(workflow.nodes)} nodes)"), soft_wrap=True)
        for problem in problems:
            sys.stdout.write(f"- {problem}\n")
        for remark in notes:
            sys.stdout.write(f"note: {remark}\n")
    if workflow is None:
        fail(f"{file} is invalid: {len(problems)} problem(s)")


def upgrade(ctx: typer.Context) -> None:
    """Create the database, or upgrade its schema to this version's."""
    opts = options(ctx)

    async def go() -> None:
        async with opened(opts, create=True):
            pass

    asyncio.run(go())
    try:
        from ..store.sql._migrate import head_revision

        revision = f" (schema revision {head_revision()})"
    except ImportError:  # pragma: no cover - stores without alembic migrations
        revision = ""
    make_console().print(Text(f"database {display_db(opts.db)} is up to date{revision}"),
                         soft_wrap=True)


def prune(
    ctx: typer.Context,
    keep_last: Annotated[int | None, typer.Option(
        "--keep-last", min=1, show_default=False,
        help="Keep this many newest checkpoints of each run and sub-workflow.")] = None,
    older_than_days: Annotated[float | None, typer.Option(
        "--older-than-days", min=0, show_default=False,
        help="Only remove checkpoints older than this many days; delivered "
             "notifications older than that go too (not with --run).")] = None,
    run_id: Annotated[str | None, typer.Option(
        "--run", metavar="RUN", show_default=False, help="Only this run.")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Count what would be removed; change nothing.")] = False,
    vacuum: Annotated[bool, typer.Option(
        "--vacuum/--no-vacuum",
        help="On SQLite, give the freed space back to the file system (VACUUM) afterwards.")
    ] = True,
    as_json: JsonOpt = False,
) -> None:
    """Remove old checkpoints; never a head, a pending request or data a kept one needs.

    With --older-than-days (and no --run) it also removes the notifications
    delivered before that cut-off; never one not delivered yet, nor one about
    a request still open.

    On SQLite the file then shrinks (VACUUM; --no-vacuum skips it, and the
    freed pages are reused by later runs instead). PostgreSQL reclaims the
    space itself (autovacuum).
    """
    opts = options(ctx)
    if keep_last is None and older_than_days is None:
        fail("db prune needs --keep-last N, --older-than-days D, or both")
    older = timedelta(days=older_than_days) if older_than_days is not None else None
    # notifications are the whole store's: a prune of one run leaves them alone
    notices_too = older is not None and run_id is None

    async def go() -> tuple[int, int]:
        async with opened(opts) as rt:
            if run_id is not None:
                await find_run(rt, run_id)
            if dry_run:
                removed = await plan_prune(rt, run_id, keep_last, older)
            else:
                removed = await rt.prune(run_id, keep_last=keep_last, older_than=older)
            notices = await prune_notices(rt, older, dry_run=dry_run) \
                if notices_too and older is not None else 0
            return removed, notices

    removed, notices = asyncio.run(go())
    disk = reclaim_disk(opts.db) if vacuum and not dry_run and (removed or notices) else None
    if as_json:
        emit_json({"removed": removed, "dry_run": dry_run,
                   **({"notifications": notices} if notices_too else {}),
                   **({"bytes_before": disk[0], "bytes_after": disk[1]} if disk else {})})
        return
    verb = "would remove" if dry_run else "removed"
    line = f"{verb} {removed} checkpoint(s)"
    if notices_too:
        line += f" and {notices} delivered notification(s)"
    if disk is not None:
        line += f"; {display_db(opts.db)}: {byte_size(disk[0])} → {byte_size(disk[1])}"
    make_console().print(Text(line), soft_wrap=True)
