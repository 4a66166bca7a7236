"""Whether new code can continue the runs that are unfinished now (``Runtime.check_upgrade``).

For each run of the workflow's name that is not completed or cancelled:
on the same version the graph must be the same (``check_graph``); on another
version the code must declare a migration from the run's version, and that
migration is planned on the run's head exactly as ``resume(...,
migrate=True)`` would plan it (``plan_migration``: its values validate, the
next tasks and pending requests name nodes the code has, no sub-workflow in
flight, the finished tasks' writes fit), writing nothing. A check for CI
before a deploy.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..engine import RunReader
from ..errors import CheckpointCorruptedError, InvalidInputError, WorkflowMismatchError
from ..model._graph import Workflow
from ..model._records import RunStatus
from ..store._protocols import CheckpointStore, RunRecord
from ._inputs import check_workflow
from ._versions import check_graph

__all__ = ["UpgradeProblem", "check_upgrade"]

_UNWRITTEN = "; nothing was written"


@dataclass(frozen=True, slots=True)
class UpgradeProblem:
    """An unfinished run that the workflow given could not continue, and why.

    ``run_version`` is the version the run is on, ``workflow_version`` the
    version of the code checked; ``reason`` says what would break.
    """

    run_id: str
    status: RunStatus
    run_version: str
    workflow_version: str
    reason: str


async def check_upgrade(store: CheckpointStore, workflow: Workflow) -> list[UpgradeProblem]:
    """The unfinished runs of ``workflow.name`` that ``workflow`` could not continue, oldest first."""
    check_workflow(workflow)
    problems = []
    runs = await store.list_runs(workflow_name=workflow.name)
    for record in sorted(runs, key=lambda r: (r.created_at, r.run_id)):
        if record.status.is_final:
            continue
        reason = await _reason(store, workflow, record)
        if reason is not None:
            problems.append(UpgradeProblem(record.run_id, record.status,
                                           record.workflow_version, workflow.version, reason))
    return problems


async def _reason(store: CheckpointStore, workflow: Workflow, record: RunRecord) -> str | None:
    """Why ``workflow`` could not continue ``record``, or None when it could."""
    if record.workflow_version == workflow.version:
        try:
            await check_graph(store, workflow, record)
        except WorkflowMismatchError as exc:
            return (f"the graph changed without a new version: {exc.difference}"
                    if exc.difference else "the graph changed without a new version")
        return None
    try:
        await RunReader(store, workflow).plan_migration(record)
    except WorkflowMismatchError as exc:
        return exc.difference or str(exc)
    except (InvalidInputError, CheckpointCorruptedError) as exc:
        return str(exc).removesuffix(_UNWRITTEN)
    return None
