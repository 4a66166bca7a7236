"""Forking a run from any checkpoint, and writing state updates through reducers."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import CheckpointNotFoundError, InvalidInputError
from ..model._clock import utcnow
from ..model._frozen import freeze, freeze_appended
from ..model._graph import Workflow
from ..model._records import CheckpointRef, RunStatus
from ..model._routing import Completed, Routed, route
from ..model._serde import decode
from ..model._task_id import TaskId
from ..store._approval_rows import DecisionDraft
from ..store._protocols import (
    CheckpointMeta,
    CheckpointStore,
    CheckpointWrite,
    LoadedCheckpoint,
    RequestRow,
    RunRecord,
    StepRow,
    TaskWrite,
)
from ._loop import RunContext, ThreadRunner
from ._parked import parked_open_ids, ready_parked
from ._state import (
    DAMAGE,
    ThreadState,
    corrupted,
    decode_checkpoint,
    encode_field,
    log_name,
    self_contained,
)
from ._task import TaskResult

__all__ = [
    "UpdatePlan", "apply_update", "check_no_recorded_work", "commit_update", "plan_update",
    "prepare_fork",
]


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
            values[name] = freeze_appended(values.get(name, ()), value)
            appended[name] = [encode_field(writer, name, value)]
        elif spec.is_lww:
            values[name] = freeze(value)
            changed[name] = encode_field(writer, name, value)
        else:
            values[name] = freeze(schema.reduce(writer, name, values.get(name), value))
            changed[name] = None
    return values, changed, appended


@dataclass
class _Copies:
    """Everything a forked run starts with; created in one transaction."""

    checkpoints: list[CheckpointWrite] = field(default_factory=list)
    task_writes: list[TaskWrite] = field(default_factory=list)
    steps: list[StepRow] = field(default_factory=list)
    requests: list[RequestRow] = field(default_factory=list)


async def prepare_fork(
    rc: RunContext, workflow: Workflow, source: RunRecord, checkpoint_id: str,
    update: Mapping[str, Any], *, started_by: str | None = None,
    decisions: Sequence[DecisionDraft] = (),
) -> ThreadState:
    """Create the forked run (``rc.run_id``) and return its top-level state.

    The fork keeps the source's budget, labels and concurrency key (with its
    ``max_per_key``) and records ``started_by``; its
    decision chain starts with ``decisions`` (the ``"fork"`` decision), in
    the transaction that creates it.

    The fork starts from a self-contained copy of the checkpoint and, for one
    inside a sub-workflow, of every anchor above it, so it resumes inside the
    nested workflow. A copied checkpoint that is still the head of its thread
    brings what was recorded for its superstep in progress: finished tasks'
    writes, step results, requests (open and answered) and the sub-workflows
    it runs (their heads, at any depth); so a fork of the id a waiting run
    reports continues exactly where the run paused. An older checkpoint, whose
    superstep has since merged, and the checkpoint given an ``update`` run
    their superstep afresh. A missing checkpoint, or a missing anchor above
    it, raises ``CheckpointNotFoundError`` naming ``checkpoint_id``.
    """
    store = rc.store
    chain = await _anchors(store, source.run_id, checkpoint_id)
    copies = _Copies()
    thread, target_wf = "", workflow
    for depth, meta in enumerate(chain):
        last = depth == len(chain) - 1
        loaded = await _load(store, meta, checkpoint_id)
        decode_checkpoint(loaded, target_wf.schema)  # damage stops the fork before it writes
        if last and update:
            loaded = _with_update(target_wf, loaded, update)
        carry = not (last and update) and await _is_head(store, meta)
        write = self_contained(loaded, rc.run_id, thread, carried=carry)
        at = len(copies.checkpoints)  # parked sub-workflows' threads go after it
        node = None if last else chain[depth + 1].thread.partition("/")[2]
        write = await _fork_parked(store, target_wf, meta, write, copies, checkpoint_id,
                                   skip=node)
        copies.checkpoints.insert(at, write)
        if carry:
            await _carry(store, target_wf, meta, write.meta, copies, checkpoint_id, skip=node)
        if node is not None:
            thread = f"{write.meta.id}/{node}"
            sub = target_wf.nodes[TaskId.parse(node).node].subworkflow
            if sub is not None:
                target_wf = sub.workflow
    top = copies.checkpoints[0]
    now = utcnow()
    done = not top.meta.next_tasks and not top.meta.parked
    record = RunRecord(
        run_id=rc.run_id, workflow_name=workflow.name,
        status=RunStatus.COMPLETED if done else RunStatus.RUNNING,
        created_at=now, updated_at=now, head_checkpoint_id=top.meta.id,
        signature=source.signature, max_supersteps=source.max_supersteps,
        forked_from=CheckpointRef(source.run_id, checkpoint_id), workflow_ref=source.workflow_ref,
        workflow_version=source.workflow_version, budget=source.budget, started_by=started_by,
        operators=workflow.operators, viewers=workflow.viewers, labels=dict(source.labels),
        concurrency_key=source.concurrency_key, max_per_key=source.max_per_key)
    await store.create_run(record, copies.checkpoints, None if done else rc.lease,
                           task_writes=copies.task_writes,
                           steps=copies.steps, requests=copies.requests, decisions=decisions)
    loaded = LoadedCheckpoint(meta=top.meta, values=top.values,
                              logs={ch: [b] for ch, b in top.appends.items()})
    return decode_checkpoint(loaded, workflow.schema)


async def _anchors(store: CheckpointStore, run_id: str, checkpoint_id: str
                   ) -> list[CheckpointMeta]:
    """The checkpoint and the anchors it hangs from, the top-level one first."""
    chain: list[CheckpointMeta] = []
    meta = await store.get_checkpoint(run_id, checkpoint_id)
    while meta is not None:
        chain.append(meta)
        if meta.thread == "":
            return chain[::-1]
        # "<anchor checkpoint id>/<node>": checkpoint ids hold no "/", node ids may.
        meta = await store.get_checkpoint(run_id, meta.thread.partition("/")[0])
    # The caller named this id; an anchor gone missing above it is an internal detail.
    raise CheckpointNotFoundError(run_id, checkpoint_id)


async def _load(store: CheckpointStore, meta: CheckpointMeta, given: str) -> LoadedCheckpoint:
    try:
        return await store.load_checkpoint(meta.run_id, meta.id)
    except CheckpointNotFoundError:  # pruned while the fork was reading
        raise CheckpointNotFoundError(meta.run_id, given) from None


async def _is_head(store: CheckpointStore, meta: CheckpointMeta) -> bool:
    """Whether ``meta``'s superstep is still in progress (nothing merged after it).

    A resume inside a sub-workflow moves the top level's superstep in progress
    onto a newer checkpoint of the same superstep (``_resume``); the older one
    still stands for its nested state, which is copied (what its superstep
    recorded moved on with the run, so those tasks run again).
    """
    head = await store.thread_head(meta.run_id, meta.thread)
    return head is not None and (head.id == meta.id or (
        meta.thread == "" and head.superstep == meta.superstep))


async def _carry(store: CheckpointStore, wf: Workflow, src: CheckpointMeta,
                 new: CheckpointMeta, copies: _Copies, given: str, *, skip: str | None) -> None:
    """Copy what ``src``'s superstep in progress recorded onto its copy ``new``.

    ``wf`` is the workflow of ``src``'s thread. ``skip`` is the sub-workflow
    node the fork descends into: the chain down to the forked checkpoint is
    copied instead of that node's head, and the node must run again, so a
    write it saved is left behind. Everything copied is decoded first, so
    damaged data stops the fork before it writes anything.
    """
    run_id = src.run_id
    writes = [w for w in await store.get_task_writes(run_id, src.id) if w.node != skip]
    requests = await store.get_requests(run_id, checkpoint_id=src.id)
    for w in writes:
        TaskResult.from_write(w, wf.schema)
    for r in requests:
        _check_bytes(run_id, src.id, r.payload, f"the payload of {r.id!r}")
        _check_bytes(run_id, src.id, r.response_schema, f"the response schema of {r.id!r}",
                     want=dict)
        if r.answer is not None:
            _check_bytes(run_id, src.id, r.answer, f"the answer to {r.id!r}")
    copies.task_writes.extend(
        dataclasses.replace(w, run_id=new.run_id, checkpoint_id=new.id) for w in writes)
    copies.requests.extend(
        dataclasses.replace(r, run_id=new.run_id, thread=new.thread, checkpoint_id=new.id)
        for r in requests)
    for node in src.next_tasks:
        if node == skip:
            continue
        qual = f"{src.namespace}.{node}" if src.namespace else node
        now = utcnow()
        for name, data in (await store.get_steps(run_id, src.id, qual)).items():
            _check_bytes(run_id, src.id, data, f"the step {name!r} of {qual!r}")
            copies.steps.append(StepRow(new.run_id, new.id, qual, name, data, now))
        head = await store.thread_head(run_id, f"{src.id}/{node}")
        spec = wf.nodes.get(TaskId.parse(node).node)
        sub = spec.subworkflow if spec is not None else None
        if head is not None and sub is not None:
            loaded = await _load(store, head, given)
            decode_checkpoint(loaded, sub.workflow.schema)
            write = self_contained(loaded, new.run_id, f"{new.id}/{node}", carried=True)
            copies.checkpoints.append(write)
            await _carry(store, sub.workflow, head, write.meta, copies, given, skip=None)


async def _fork_parked(store: CheckpointStore, wf: Workflow, src: CheckpointMeta,
                       write: CheckpointWrite, copies: _Copies, given: str, *,
                       skip: str | None) -> CheckpointWrite:
    """Bring ``src``'s parked tasks along, anchored at the copy, as they were at ``src``.

    Their requests and step results (recorded at their anchors) are copied as
    they stood when ``src`` was written: an answer given later is left out, so
    the request is open again; a parked sub-workflow's thread is copied whole,
    unless it is ``skip``, the one the fork descends into (the chain down to
    the forked checkpoint is copied in its place).
    """
    if not src.parked:
        return write
    new, at = write.meta, src.created_at
    for p in src.parked:
        qual = f"{src.namespace}.{p.task}" if src.namespace else p.task
        for r in await store.get_requests(src.run_id, checkpoint_id=p.anchor):
            if r.node != qual or r.created_at > at:
                continue
            if r.answered_at is not None and r.answered_at > at:  # answered after src
                r = dataclasses.replace(r, answer=None, answered_at=None, timed_out=False)
            copies.requests.append(dataclasses.replace(
                r, run_id=new.run_id, thread=new.thread, checkpoint_id=new.id))
        for name, data in (await store.get_steps(src.run_id, p.anchor, qual)).items():
            copies.steps.append(StepRow(new.run_id, new.id, qual, name, data, at))
        head = await store.thread_head(src.run_id, f"{p.anchor}/{p.task}")
        spec = wf.nodes.get(TaskId.parse(p.task).node)
        sub = spec.subworkflow if spec is not None else None
        if head is not None and sub is not None and p.task != skip:
            loaded = await _load(store, head, given)
            inner = self_contained(loaded, new.run_id, f"{new.id}/{p.task}", carried=True)
            copies.checkpoints.append(inner)
            await _carry(store, sub.workflow, head, inner.meta, copies, given, skip=None)
    parked = tuple(dataclasses.replace(p, anchor=new.id) for p in src.parked)
    return dataclasses.replace(write, meta=dataclasses.replace(new, parked=parked))


def _check_bytes(run_id: str, checkpoint_id: str, data: bytes, what: str,
                 want: type | None = None) -> None:
    """Decode recorded bytes; damage raises ``CheckpointCorruptedError`` naming where."""
    try:
        value = decode(data)
        if want is not None and not isinstance(value, want):
            raise TypeError(f"expected a JSON {want.__name__}, got {type(value).__name__}")
    except DAMAGE as exc:
        raise corrupted(run_id, checkpoint_id, exc, what) from None


def _with_update(wf: Workflow, loaded: LoadedCheckpoint,
                 update: Mapping[str, Any]) -> LoadedCheckpoint:
    state = decode_checkpoint(loaded, wf.schema)
    values, _changed, _appended = apply_update(wf, state, update, "<fork>")
    runner_values = {name: encode_field("<fork>", name, v) for name, v in values.items()
                     if not wf.schema.field("<fork>", name).is_log}
    logs = {name: [encode_field("<fork>", name, values[name])] for name in values
            if wf.schema.field("<fork>", name).is_log}
    # a log the update wrote is written whole, in place of the channel that held it
    lengths = {ch: n for ch, n in loaded.meta.log_lengths.items() if log_name(ch) not in logs}
    lengths |= {name: len(values[name]) for name in logs}
    for ch, chunks in loaded.logs.items():
        if log_name(ch) not in logs:
            logs.setdefault(ch, chunks)
    meta = _replace(loaded.meta, log_lengths=lengths, digests={},
                    value_versions=dict.fromkeys(runner_values, loaded.meta.seq))
    return LoadedCheckpoint(meta=meta, values=runner_values, logs=logs)


def _replace(meta: CheckpointMeta, **changes: Any) -> CheckpointMeta:
    return dataclasses.replace(meta, **changes)


@dataclass(frozen=True)
class UpdatePlan:
    """A state update checked and merged, ready to commit as the run's new head."""

    state: ThreadState
    values: dict[str, Any]
    changed: dict[str, bytes | None]
    appended: dict[str, list[bytes]]
    routed: Routed
    as_node: str | None


async def plan_update(
    rc: RunContext, workflow: Workflow, head: str, values: Mapping[str, Any], as_node: str | None,
) -> UpdatePlan:
    """Load ``head`` and merge ``values`` through the reducers; writes nothing.

    Raises what a bad update raises (unknown field, wrong type, a routing
    error) before anything is claimed or written.
    """
    state = await ThreadRunner(rc, workflow).load(head)
    new_values, changed, appended = apply_update(workflow, state, values, as_node or "<update>")
    if as_node is not None:
        routed = route(workflow, workflow.schema.build(new_values), [Completed(TaskId(as_node))],
                       state.meta.joins)
    else:
        routed = Routed(state.tasks, dict(state.meta.joins), None, args=dict(state.args))
    for name, data in changed.items():  # values a reducer produced must be storable too
        if data is None:
            changed[name] = encode_field(as_node or "<update>", name, new_values[name])
    return UpdatePlan(state, new_values, changed, appended, routed, as_node)


async def commit_update(rc: RunContext, workflow: Workflow, plan: UpdatePlan,
                        decisions: Sequence[DecisionDraft] = ()) -> str:
    """Commit a planned update as the new head (``rc`` holds the run's lease).

    Open requests stay open: without ``as_node`` the same tasks are next and
    the old head's requests move onto the new head; with it the routed tasks
    are new ones and ask afresh when they run. Parked tasks' requests stay
    at their anchors either way. The run is left ``waiting`` (resumable) or
    ``completed`` when nothing is next and nothing is parked; ``decisions`` (the
    ``"update"`` decision) are recorded in the same transaction.
    """
    state = plan.state
    keep = plan.as_node is None  # the same tasks are next: they go on waiting
    runner = ThreadRunner(rc, workflow)
    new = await runner.commit_state(
        state, state.meta.superstep + 1, plan.values, state.histories, plan.changed,
        plan.appended, plan.routed, (plan.as_node,) if plan.as_node else (), source="update",
        pause=True, decisions=decisions, keep_requests=keep,
        parked_on=await parked_open_ids(runner, state.meta))
    return new.meta.id


async def check_no_recorded_work(store: CheckpointStore, record: RunRecord,
                                 workflow: Workflow | None = None) -> None:
    """``InvalidInputError`` while the run's head holds work a new head would lose.

    With ``workflow``, a parked task whose answer, event or timer already came
    (it is due to run again) refuses too: the new head would leave it waiting.
    """
    head = record.head_checkpoint_id or ""
    meta = await store.get_checkpoint(record.run_id, head)
    tasks = meta.next_tasks if meta is not None else ()
    found: list[str] = []
    if meta is not None and workflow is not None and meta.parked:
        reader = RunContext.reading(store, record.run_id, workflow.name)
        found += [f"the answered parked task {task!r}"
                  for task in await ready_parked(ThreadRunner(reader, workflow), meta)]
    if await store.get_task_writes(record.run_id, head):
        found.append("finished sibling tasks")
    if any(r.answer is not None for r in await store.get_requests(
            record.run_id, checkpoint_id=head)):
        found.append("given answers")
    for node in tasks:
        if await store.get_steps(record.run_id, head, node):
            found.append(f"ctx.step results of {node!r}")
        if await store.thread_head(record.run_id, f"{head}/{node}") is not None:
            found.append(f"the in-flight sub-workflow {node!r}")
    if found:
        raise InvalidInputError(
            f"cannot update the state of run {record.run_id} now: its head holds "
            f"{', '.join(found)}, which a new head would lose; resume it first, "
            "or fork it with update=")
