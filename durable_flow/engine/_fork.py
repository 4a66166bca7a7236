"""Forking a run from any checkpoint, and writing state updates through reducers."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..errors import CheckpointNotFoundError
from ..model._clock import utcnow
from ..model._graph import Workflow
from ..model._ids import new_checkpoint_id
from ..model._records import CheckpointRef, RunStatus
from ..model._routing import Completed, Routed, route
from ..model._serde import encode
from ..store._protocols import CheckpointMeta, CheckpointWrite, LoadedCheckpoint, RunRecord
from ._loop import RunContext, ThreadRunner
from ._state import ThreadState, decode_checkpoint, encode_field, log_items

__all__ = ["apply_update", "prepare_fork", "write_update"]


def apply_update(
    workflow: Workflow, state: ThreadState, update: Mapping[str, Any], writer: str
) -> tuple[dict[str, Any], dict[str, bytes | None], dict[str, list[bytes]]]:
    """Merge ``update`` into ``state`` through the reducers, as ``writer`` would."""
    schema = workflow.schema
    values = dict(state.values)
    changed: dict[str, bytes | None] = {}
    appended: dict[str, list[bytes]] = {}
    for name, raw in update.items():
        value = schema.validate_update(writer, name, raw)
        spec = schema.field(writer, name)
        if spec.is_log:
            values[name] = [*values.get(name, []), *value]
            appended[name] = [encode_field(writer, name, value)]
        elif spec.is_lww:
            values[name] = value
            changed[name] = encode_field(writer, name, value)
        else:
            values[name] = schema.reduce(writer, name, values.get(name), value)
            changed[name] = None
    return values, changed, appended


async def prepare_fork(
    rc: RunContext, workflow: Workflow, source: RunRecord, checkpoint_id: str,
    update: Mapping[str, Any],
) -> ThreadState:
    """Create the forked run (``rc.run_id``) and return its top-level state.

    Forking from a checkpoint inside a sub-workflow copies the chain of
    anchors above it, so the new run resumes inside the nested workflow.
    """
    store = rc.store
    chain: list[CheckpointMeta] = []
    meta = await store.get_checkpoint(source.run_id, checkpoint_id)
    if meta is None:
        raise CheckpointNotFoundError(source.run_id, checkpoint_id)
    while True:
        chain.append(meta)
        if meta.thread == "":
            break
        anchor_id = meta.thread.rsplit("/", 1)[0]
        parent = await store.get_checkpoint(source.run_id, anchor_id)
        if parent is None:
            raise CheckpointNotFoundError(source.run_id, anchor_id)
        meta = parent
    chain.reverse()
    writes: list[CheckpointWrite] = []
    thread, target_wf = "", workflow
    for depth, m in enumerate(chain):
        loaded = await store.load_checkpoint(source.run_id, m.id)
        if depth == len(chain) - 1 and update:
            loaded = _with_update(target_wf, loaded, update)
        write = _copy(loaded, rc.run_id, thread)
        writes.append(write)
        if depth + 1 < len(chain):
            node = chain[depth + 1].thread.rsplit("/", 1)[1]
            thread = f"{write.meta.id}/{node}"
            sub = target_wf.nodes[node].subworkflow
            if sub is not None:
                target_wf = sub.workflow
    now = utcnow()
    record = RunRecord(
        run_id=rc.run_id, workflow_name=workflow.name, status=RunStatus.RUNNING,
        created_at=now, updated_at=now, head_checkpoint_id=writes[0].meta.id,
        signature=source.signature, max_supersteps=source.max_supersteps,
        forked_from=CheckpointRef(source.run_id, checkpoint_id), workflow_ref=source.workflow_ref)
    await store.create_run(record, writes, rc.lease)
    top = LoadedCheckpoint(meta=writes[0].meta, values=writes[0].values,
                           logs={ch: [b] for ch, b in writes[0].appends.items()})
    return decode_checkpoint(top, workflow.schema)


def _with_update(wf: Workflow, loaded: LoadedCheckpoint,
                 update: Mapping[str, Any]) -> LoadedCheckpoint:
    state = decode_checkpoint(loaded, wf.schema)
    values, _changed, _appended = apply_update(wf, state, update, "<fork>")
    runner_values = {name: encode_field("<fork>", name, v) for name, v in values.items()
                     if not wf.schema.field("<fork>", name).is_log}
    logs = {name: [encode_field("<fork>", name, values[name])] for name in values
            if wf.schema.field("<fork>", name).is_log}
    lengths = dict(loaded.meta.log_lengths) | {name: len(values[name]) for name in logs}
    for ch, chunks in loaded.logs.items():
        logs.setdefault(ch, chunks)
    meta = _replace(loaded.meta, log_lengths=lengths,
                    value_versions=dict.fromkeys(runner_values, loaded.meta.seq))
    return LoadedCheckpoint(meta=meta, values=runner_values, logs=logs)


def _copy(loaded: LoadedCheckpoint, run_id: str, thread: str) -> CheckpointWrite:
    """A self-contained copy (every channel written) as the first checkpoint of a thread."""
    m = loaded.meta
    appends: dict[str, bytes] = {}
    for ch in m.log_lengths:
        appends[ch] = encode(log_items(loaded, ch))
    meta = _replace(
        m, id=new_checkpoint_id(), run_id=run_id, thread=thread, parent_id=None, seq=0,
        created_at=utcnow(), source="fork",
        status=RunStatus.RUNNING if m.next_tasks else RunStatus.COMPLETED,
        value_versions=dict.fromkeys(loaded.values, 0), error=None,
        size=sum(map(len, loaded.values.values())) + sum(map(len, appends.values())))
    return CheckpointWrite(meta=meta, values=dict(loaded.values), appends=appends)


def _replace(meta: CheckpointMeta, **changes: Any) -> CheckpointMeta:
    return dataclasses.replace(meta, **changes)


async def write_update(
    rc: RunContext, workflow: Workflow, record: RunRecord, values: Mapping[str, Any],
    as_node: str | None,
) -> str:
    """Commit ``values`` as a new head of ``record``'s run (the lease is held by ``rc``).

    With ``as_node`` the next tasks are routed as if that node had just run;
    without it the head's next tasks stay. Open requests of the old head are
    dropped in the same transaction; the run is left ``waiting`` (resumable)
    or ``completed``.
    """
    runner = ThreadRunner(rc, workflow)
    state = await runner.load(record.head_checkpoint_id or "")
    new_values, changed, appended = apply_update(workflow, state, values, as_node or "<update>")
    if as_node is not None:
        routed = route(workflow, workflow.schema.build(new_values), [Completed(as_node)],
                       state.meta.joins)
    else:
        routed = Routed(state.meta.next_tasks, dict(state.meta.joins), None)
    new = await runner.commit_state(
        state, state.meta.superstep + 1, new_values, state.histories, changed, appended,
        routed, (as_node,) if as_node else (), source="update", pause=True)
    return new.meta.id



