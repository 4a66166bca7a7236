"""Which workflow may continue a run: its version and its graph, told apart node by node.

A run records the version and the graph signature of the workflow that
started it; the store keeps each graph's description by signature
(``Graphs``), so a changed graph is reported by its first differing node or
edge, not just by two hashes.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..errors import WorkflowMismatchError
from ..model._graph import Workflow
from ..model._versions import first_difference, only_new_defaults
from ..store._protocols import CheckpointStore, RunRecord

__all__ = ["GraphBook", "check_graph"]


class GraphBook:
    """Keeps the description of every graph a runtime starts runs with (once per signature)."""

    def __init__(self, store: CheckpointStore) -> None:
        self.store = store
        self._kept: set[str] = set()

    async def keep(self, workflow: Workflow) -> None:
        """Store the workflow's graph description unless this runtime already did."""
        signature = workflow.signature
        if signature in self._kept:
            return
        description = orjson.dumps(workflow.describe(), option=orjson.OPT_SORT_KEYS)
        await self.store.put_graph(signature, workflow.name, workflow.version, description)
        self._kept.add(signature)


async def check_graph(store: CheckpointStore, workflow: Workflow, record: RunRecord, *,
                      allow_mismatch: bool = False, migrate: bool = False) -> None:
    """``WorkflowMismatchError`` unless ``workflow`` may continue ``record``.

    Another version needs ``migrate`` (the caller then migrates the run);
    within one version the graph must be the same, except for new state
    fields with defaults (their default applies to the run). ``allow_mismatch``
    skips both checks.
    """
    if allow_mismatch:
        return
    if record.workflow_version != workflow.version:
        if migrate:
            return
        raise WorkflowMismatchError(record.run_id, record.signature, workflow.signature,
                                    run_version=record.workflow_version,
                                    workflow_version=workflow.version,
                                    difference=await _difference(store, record, workflow))
    if record.signature != workflow.signature and not await _compatible(store, record, workflow):
        raise WorkflowMismatchError(record.run_id, record.signature, workflow.signature,
                                    run_version=record.workflow_version,
                                    workflow_version=workflow.version,
                                    difference=await _difference(store, record, workflow))


async def _compatible(store: CheckpointStore, record: RunRecord, workflow: Workflow) -> bool:
    """Whether the run's kept graph differs from ``workflow`` only by new defaulted fields."""
    old = await _kept(store, record)
    return old is not None and only_new_defaults(old, workflow)


async def _kept(store: CheckpointStore, record: RunRecord) -> dict[str, Any] | None:
    """The description of the run's graph, when the store kept it readable."""
    kept = await store.get_graph(record.signature)
    if kept is None:
        return None
    try:
        old: Any = orjson.loads(kept)
    except orjson.JSONDecodeError:
        return None
    return old if isinstance(old, dict) else None


async def _difference(store: CheckpointStore, record: RunRecord, workflow: Workflow) -> str | None:
    """The first node or edge the run's graph and ``workflow`` differ in, when the graph is kept."""
    if record.signature == workflow.signature:
        return None
    old = await _kept(store, record)
    return first_difference(old, workflow.describe()) if old is not None else None
