"""Every argument and option, declared once and shared by the commands."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from ..model._records import RunStatus

__all__ = [
    "AllowMismatchOpt",
    "CheckpointArg",
    "DiagramFormat",
    "JsonOpt",
    "MigrateOpt",
    "NamespaceOpt",
    "RegistryOpt",
    "RunArg",
    "StatusOpt",
    "TargetArg",
    "WorkflowNameOpt",
    "WorkflowOpt",
    "WorkflowRefArg",
]


class DiagramFormat(str, Enum):
    """Output formats of ``graph``."""

    MERMAID = "mermaid"
    DOT = "dot"


RunArg = Annotated[str, typer.Argument(metavar="RUN", help="Run id (see `durable-flow runs`).",
                                       show_default=False)]
WorkflowRefArg = Annotated[str, typer.Argument(
    metavar="MODULE:WORKFLOW", show_default=False,
    help="The workflow object: MODULE is imported with the current directory on the path.")]
TargetArg = Annotated[str, typer.Argument(
    metavar="WORKFLOW", show_default=False,
    help="MODULE:NAME (imported with the current directory on the path), "
         "path/to/file.py:NAME, or a declarative .json/.yaml file (with --registry).")]
CheckpointArg = Annotated[str, typer.Argument(
    metavar="CHECKPOINT", show_default=False,
    help="A checkpoint id, a unique end of one, or @SUPERSTEP (@3; @3/review@2 inside the "
         "sub-workflow review that ran during superstep 3). See `durable-flow history`.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
WorkflowOpt = Annotated[str | None, typer.Option(
    "--workflow", "-w", metavar="WORKFLOW", show_default=False,
    help="Workflow to continue with (MODULE:NAME or file.py:NAME). Default: the workflow "
         "recorded when the run was started by `durable-flow run` (it is imported; use "
         "trusted databases).")]
WorkflowNameOpt = Annotated[str | None, typer.Option(
    "--workflow", "-w", metavar="NAME", show_default=False,
    help="Only this workflow (its name, as given to WorkflowBuilder).")]
StatusOpt = Annotated[RunStatus | None, typer.Option(
    "--status", "-s", show_default=False, case_sensitive=False, help="Only runs with this status.")]
NamespaceOpt = Annotated[str, typer.Option(
    "--namespace", "-n", metavar="NS",
    help="Sub-workflow namespace (e.g. review.legal); the top level is ''.")]
AllowMismatchOpt = Annotated[bool, typer.Option(
    "--allow-mismatch", help="Continue even if the workflow's graph changed since the run began.")]
MigrateOpt = Annotated[bool, typer.Option(
    "--migrate", help="Move a run of an older version onto the workflow's version first "
                      "(its builder.migrate).")]
RegistryOpt = Annotated[str | None, typer.Option(
    "--registry", "-r", metavar="MODULE:NAME", show_default=False,
    help="For a .json/.yaml workflow: the mapping of agents and functions it names "
         "(MODULE:NAME or file.py:NAME; imported).")]
