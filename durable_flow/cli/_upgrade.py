"""``check-upgrade``: whether this code can continue the runs that are unfinished now."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Annotated, Any

import typer
from rich.text import Text

from ..runtime._upgrade import UpgradeProblem
from ._db import opened
from ._options import JsonOpt, RegistryOpt, TargetArg
from ._output import emit_json, make_console
from ._support import options
from ._targets import load_target

__all__ = ["check_upgrade"]

_SHOWN = 10  # run ids listed per reason (--json lists every run)


def _grouped(problems: list[UpgradeProblem]) -> dict[tuple[str, str], list[UpgradeProblem]]:
    """The problems by the version they are on and why they would break, first seen first."""
    groups: dict[tuple[str, str], list[UpgradeProblem]] = {}
    for p in problems:
        groups.setdefault((p.run_version, p.reason), []).append(p)
    return groups


def check_upgrade(
    ctx: typer.Context,
    target: TargetArg,
    registry: RegistryOpt = None,
    as_json: JsonOpt = False,
    db: Annotated[str | None, typer.Option(
        "--db", metavar="PATH|URL", show_default=False,
        help="The database to check (the global --db, given after the command).")] = None,
) -> None:
    """Check every unfinished run of the workflow against this code, writing nothing.

    A run on the same version needs the same graph; a run on another version
    needs a migration from its version whose result validates, and nodes for
    its next tasks and pending requests. Exits 1 listing each run that would
    break and why: a check for CI before a deploy.
    """
    opts = options(ctx)
    if db is not None:
        opts = dataclasses.replace(opts, db=db)
    workflow = load_target(target, registry).workflow

    async def go() -> Any:
        async with opened(opts, logs=False) as rt:
            return await rt.check_upgrade(workflow)

    problems = asyncio.run(go())
    if as_json:
        emit_json({"workflow": workflow.name, "version": workflow.version, "problems": problems})
    else:
        console = make_console()
        for (version, reason), runs in _grouped(problems).items():
            console.print(Text(f"version {version}: {reason}"), soft_wrap=True)
            shown = ", ".join(f"{p.run_id} ({p.status.value})" for p in runs[:_SHOWN])
            more = f" and {len(runs) - _SHOWN} more" if len(runs) > _SHOWN else ""
            console.print(Text(f"  {len(runs)} run(s): {shown}{more}"), soft_wrap=True)
        console.print(Text(f"{len(problems)} unfinished run(s) of {workflow.name!r} would break on "
                           f"version {workflow.version!r}" if problems else
                           f"every unfinished run of {workflow.name!r} can continue on version "
                           f"{workflow.version!r}"), soft_wrap=True)
    if problems:
        raise typer.Exit(1)
