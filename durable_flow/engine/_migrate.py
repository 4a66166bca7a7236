"""Moving a paused run onto another version of its workflow (``resume(..., migrate=True)``).

:func:`plan_migration` reads the run's head and checks everything before
anything is written: the new version declares a migration from the run's
version, every next task and every recorded wait names a node the new
version has (after the migration's renames), no sub-workflow is in flight,
the finished tasks' saved writes fit the new blackboard, and the migration's
values validate. :func:`commit_migration` then writes, under the run's lease
and in one commit, a checkpoint with source ``"migrate"`` holding the new
values (replacing the old ones, not through the reducers), moves what the
superstep in progress recorded onto it (``Carry``), and records the run's new
version and graph signature.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import CheckpointCorruptedError, InvalidInputError, WorkflowMismatchError
from ..model._clock import utcnow
from ..model._frozen import FrozenList
from ..model._graph import Workflow
from ..model._ids import new_checkpoint_id
from ..model._messages import Message
from ..model._records import RunStatus
from ..model._serde import decode, encode
from ..model._task_id import TaskId
from ..model._versions import Migration
from ..store._protocols import (
    Carry,
    CheckpointMeta,
    CheckpointWrite,
    CommitParts,
    LoadedCheckpoint,
    ParkedRow,
    RunRecord,
    RunUpdate,
)
from ._histories import MESSAGES
from ._instances import task_arg
from ._loop import RunContext
from ._state import (
    HISTORY_PREFIX,
    REWRITTEN,
    ThreadState,
    decode_raw,
    encode_field,
    input_values,
    log_channels,
)
from ._task import TaskResult

__all__ = ["MigrationPlan", "commit_migration", "plan_migration"]

_WRITER = "<migrate>"


@dataclass(frozen=True)
class MigrationPlan:
    """A migration checked and built, ready to commit as the run's new head."""

    write: CheckpointWrite
    state: ThreadState
    carry: Carry


def _mismatch(workflow: Workflow, record: RunRecord, difference: str,
              hint: str | None = None) -> WorkflowMismatchError:
    return WorkflowMismatchError(record.run_id, record.signature, workflow.signature,
                                 run_version=record.workflow_version,
                                 workflow_version=workflow.version, difference=difference,
                                 hint=hint or "nothing was written")


async def plan_migration(rc: RunContext, workflow: Workflow, record: RunRecord) -> MigrationPlan:
    """Check and build the migration of ``record`` onto ``workflow``; writes nothing.

    Raises ``WorkflowMismatchError`` (no migration from the run's version, a
    node the new version lacks, a sub-workflow in flight, a finished task's
    write the new blackboard rejects, an instance's arg its node now rejects) or
    ``InvalidInputError`` (the migration failed or its values do not fit).
    """
    migration = workflow.migrations.get(record.workflow_version)
    if migration is None:
        raise _mismatch(workflow, record,
                        f"version {workflow.version!r} declares no migration from version "
                        f"{record.workflow_version!r}",
                        "declare one with builder.migrate(from_version, fn); nothing was written")
    store, head = rc.store, record.head_checkpoint_id or ""
    loaded = await store.load_checkpoint(record.run_id, head)
    meta = loaded.meta
    renames = await _check_nodes(rc, workflow, record, migration, meta)
    raw, histories = decode_raw(loaded)
    values = _migrated_values(workflow, record, migration, raw)
    write, state = _checkpoint(workflow, record, migration, loaded, raw, histories, values)
    for task in write.meta.next_tasks:  # each instance's arg must fit its node's new arg_type
        _fits(workflow, record, write.meta, task)
    return MigrationPlan(write, state, Carry(meta.id, renames))


def _fits(workflow: Workflow, record: RunRecord, meta: CheckpointMeta, stored: str) -> None:
    task = TaskId.parse(stored)
    try:
        task_arg(meta, workflow.nodes[task.node], task)
    except CheckpointCorruptedError as exc:
        raise _mismatch(workflow, record, f"the arg of {stored!r} does not fit version "
                        f"{workflow.version!r} ({exc.reason})") from None


async def _check_nodes(rc: RunContext, workflow: Workflow, record: RunRecord,
                       migration: Migration, meta: CheckpointMeta) -> dict[str, str]:
    """Every node the head still needs exists in the new version; nothing nested is in flight.

    Returns the renames of the task ids recorded at the head (instances keep
    their index), for the ``Carry`` that moves their rows.
    """
    store = rc.store
    for node in meta.next_tasks:
        if await store.thread_head(record.run_id, f"{meta.id}/{node}") is not None:
            raise _mismatch(workflow, record,
                            f"the sub-workflow node {node!r} is in flight",
                            f"finish it on version {record.workflow_version!r} first; "
                            "nothing was written")
    for p in meta.parked:  # a parked sub-workflow's thread would need migrating too
        if await store.thread_head(record.run_id, f"{p.anchor}/{p.task}") is not None:
            raise _mismatch(workflow, record,
                            f"the parked sub-workflow node {p.task!r} is in flight",
                            f"finish it on version {record.workflow_version!r} first; "
                            "nothing was written")
    rows = await store.get_requests(record.run_id, checkpoint_id=meta.id)
    writes = await store.get_task_writes(record.run_id, meta.id)
    needed = {*meta.next_tasks, *(r.node for r in rows), *(w.node for w in writes)}
    parked = {p.task for p in meta.parked}
    missing = sorted({migration.node(TaskId.parse(n).node) for n in needed | parked}
                     - set(workflow.nodes))
    if missing:
        raise _mismatch(workflow, record,
                        f"version {workflow.version!r} has no node "
                        + ", ".join(map(repr, missing))
                        + " (needed by the run's next tasks, parked tasks or pending requests; "
                        "map renamed nodes with migrate(..., nodes={old: new}))")
    for write in writes:
        renamed = dataclasses.replace(write, node=migration.task(write.node))
        try:
            TaskResult.from_write(renamed, workflow.schema)
        except CheckpointCorruptedError as exc:
            raise _mismatch(workflow, record,
                            f"the finished task {write.node!r} wrote what version "
                            f"{workflow.version!r} cannot take ({exc.reason})",
                            f"finish the superstep on version {record.workflow_version!r} "
                            "first; nothing was written") from None
    return {n: migration.task(n) for n in needed if migration.task(n) != n}


def _migrated_values(workflow: Workflow, record: RunRecord, migration: Migration,
                     raw: dict[str, Any]) -> dict[str, Any]:
    """The migration's values, validated into the new blackboard (typed, read-only)."""
    try:
        out = migration.fn(dict(raw))
    except Exception as exc:
        raise InvalidInputError(
            f"the migration of run {record.run_id} from version {migration.from_version!r} "
            f"failed: {type(exc).__name__}: {exc}; nothing was written") from exc
    if not isinstance(out, Mapping):
        raise InvalidInputError(f"a migration returns the new values as a dict, "
                                f"got {type(out).__name__}; nothing was written")
    try:
        return input_values(workflow.schema, out)
    except ValueError as exc:
        raise InvalidInputError(
            f"the migration's values do not fit {workflow.state.__name__} of version "
            f"{workflow.version!r}: {exc}; nothing was written") from None


def _checkpoint(workflow: Workflow, record: RunRecord, migration: Migration,
                loaded: LoadedCheckpoint, raw: dict[str, Any],
                histories: dict[str, list[Message]], values: dict[str, Any],
                ) -> tuple[CheckpointWrite, ThreadState]:
    """The ``migrate`` checkpoint: every value channel written, log channels extended.

    A log whose old items the migration changed starts over in a channel of its
    own (``_log``); when that is ``messages``, the node histories referring to
    it are written whole too.
    """
    meta, seq = loaded.meta, loaded.meta.seq + 1
    vals: dict[str, bytes] = {}
    appends: dict[str, bytes] = {}
    lengths: dict[str, int] = {}
    rewritten: set[str] = set()
    for name, value in values.items():
        spec = workflow.schema.fields.get(name)
        if spec is None or not spec.is_log:
            vals[name] = encode_field(_WRITER, name, value)
        elif _log(name, list(value), raw, log_channels(meta), seq, appends, lengths):
            rewritten.add(name)
    moved = _histories(workflow, record, migration, meta, histories, appends, lengths,
                       whole=MESSAGES in rewritten)
    routed_joins = {migration.node(t): tuple(migration.node(s) for s in sources)
                    for t, sources in meta.joins.items()}
    next_tasks = tuple(migration.task(n) for n in meta.next_tasks)
    args = {migration.task(n): data for n, data in meta.task_args.items()}
    new = CheckpointMeta(
        id=new_checkpoint_id(), run_id=record.run_id, thread="", namespace="", parent_id=meta.id,
        seq=seq, superstep=meta.superstep + 1, created_at=utcnow(),
        status=RunStatus.RUNNING if next_tasks or meta.parked else RunStatus.COMPLETED,
        source="migrate", parked=_renamed_parked(migration, meta),
        routing_reason=f"migrated from version {record.workflow_version} to {workflow.version}",
        next_tasks=next_tasks, joins=routed_joins, value_versions=dict.fromkeys(vals, seq),
        log_lengths=lengths, task_args=args,
        size=sum(map(len, vals.values())) + sum(map(len, appends.values()))
        + sum(map(len, args.values())))
    state = ThreadState(meta=new, values=values, histories=moved, value_bytes=vals)
    return CheckpointWrite(new, vals, appends), state


def _renamed_parked(migration: Migration, meta: CheckpointMeta) -> tuple[ParkedRow, ...]:
    """Parked tasks under their new ids; they go on where they were anchored.

    Their rows stay at their anchors under the id they were recorded with
    (``ParkedRow.recorded``), so a re-run still finds its answers and steps.
    """
    out = []
    for p in meta.parked:
        new = migration.task(p.task)
        out.append(p if new == p.task else dataclasses.replace(
            p, task=new, recorded=p.recorded or p.task))
    return tuple(out)


def _log(name: str, items: list[Any], raw: dict[str, Any], channels: dict[str, str], seq: int,
         appends: dict[str, bytes], lengths: dict[str, int]) -> bool:
    """Write the log ``name`` of the migrate checkpoint (at ``seq``); True if it was rewritten.

    Items that keep the old ones and add new ones are appended; otherwise the
    migration's items replace the old ones (not through the reducer): they are
    written whole to ``<name>#<seq>``, a channel older checkpoints never read.
    """
    stored = channels.get(name)
    kept = len(raw[name]) if stored is not None and isinstance(raw.get(name), list) else 0
    rewritten = bool(kept) and _plain(items[:kept]) != _plain(raw[name])
    channel, start = (f"{name}{REWRITTEN}{seq}", 0) if rewritten else (stored or name, kept)
    if len(items) > start:
        appends[channel] = encode_field(_WRITER, name, items[start:])
    lengths[channel] = len(items)
    return rewritten


def _histories(workflow: Workflow, record: RunRecord, migration: Migration,
               meta: CheckpointMeta, histories: dict[str, list[Message]],
               appends: dict[str, bytes], lengths: dict[str, int], *,
               whole: bool) -> dict[str, list[Message]]:
    """Node histories under the new task ids; a renamed task's history moves to a new channel.

    ``whole`` (the ``messages`` log was rewritten, so references into it no
    longer hold): every history is written whole to a channel of its own.
    """
    channels, seq = log_channels(meta), meta.seq + 1
    moved: dict[str, list[Message]] = {}
    for node, messages in histories.items():
        new = migration.task(node)
        name = HISTORY_PREFIX + new
        channel = channels.get(name, name)
        if new != node and (name in channels or new in moved):
            raise _mismatch(workflow, record,
                            f"node {node!r} is renamed to {new!r}, which has a history "
                            "of its own already")
        if whole or new != node:
            channel = f"{name}{REWRITTEN}{seq}" if whole else name
            appends[channel] = encode_field(new, "history", list(messages))
        lengths[channel] = len(messages)
        moved[new] = FrozenList(messages)
    return moved


def _plain(items: list[Any]) -> Any:
    """Items as stored (JSON, tags read back), to compare typed and stored items."""
    return decode(encode(items))


async def commit_migration(rc: RunContext, workflow: Workflow, plan: MigrationPlan) -> None:
    """Write the planned migration under ``rc``'s lease: the new head, the moves, the version."""
    write = plan.write
    await rc.commit(CommitParts(
        checkpoint=write, extends=write.meta.parent_id, carry=plan.carry,
        run=RunUpdate(RunStatus.RUNNING, head_checkpoint_id=write.meta.id,
                      workflow_version=workflow.version, signature=workflow.signature)))
    rc.emit("checkpoint_saved", "", write.meta.superstep, checkpoint_id=write.meta.id,
            nodes=[], size=write.meta.size)
