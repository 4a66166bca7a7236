"""The rows of a thread's checkpoints, built from its values (no store access).

:func:`first_write` is a thread's first checkpoint, every channel written.
A later one stores only what changed: :func:`next_rows` encodes the value
channels a merge changed (when their bytes differ) and joins the log chunks
it appended; :func:`next_meta` is the checkpoint's metadata over them, its
status decided by the caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..model._blackboard import StateSchema
from ..model._clock import utcnow
from ..model._ids import new_checkpoint_id
from ..model._messages import Message
from ..model._records import CheckpointSource, RunStatus
from ..model._routing import Routed
from ..store._protocols import CheckpointMeta, CheckpointWrite, ParkedRow
from ..store._segments import join_arrays
from ._lazy import first_digests, next_digests
from ._state import ThreadState, encode_field, history_channel, log_channels, stored_tasks

__all__ = ["NextRows", "Place", "first_write", "next_meta", "next_rows"]


@dataclass(frozen=True)
class Place:
    """Which thread of which run a checkpoint belongs to."""

    run_id: str
    thread: str = ""
    namespace: str = ""


@dataclass(frozen=True)
class NextRows:
    """What a checkpoint after ``base`` writes: changed values, appended log items."""

    values: dict[str, bytes]
    appends: dict[str, bytes]
    log_lengths: dict[str, int]
    # every value channel's bytes once it is written (the next merge compares against them)
    value_bytes: dict[str, bytes]


def first_write(
    place: Place, schema: StateSchema, values: dict[str, Any], routed: Routed, *,
    source: CheckpointSource = "input", superstep: int = 0,
    histories: Mapping[str, list[Message]] | None = None,
) -> tuple[CheckpointWrite, ThreadState]:
    """A complete checkpoint (every channel written) starting a thread, and its state."""
    histories = dict(histories or {})
    vals: dict[str, bytes] = {}
    appends: dict[str, bytes] = {}
    lengths: dict[str, int] = {}
    for name, value in values.items():
        spec = schema.fields.get(name)
        data = encode_field("<input>", name, value)
        if spec is not None and spec.is_log:
            appends[name], lengths[name] = data, len(value)
        else:
            vals[name] = data
    for node, msgs in histories.items():
        appends[history_channel(node)] = encode_field(node, "history", msgs)
        lengths[history_channel(node)] = len(msgs)
    status = RunStatus.RUNNING if routed.next_tasks else RunStatus.COMPLETED
    tasks, args = stored_tasks(routed.next_tasks, routed.args)
    meta = CheckpointMeta(
        id=new_checkpoint_id(), run_id=place.run_id, thread=place.thread,
        namespace=place.namespace, parent_id=None, seq=0, superstep=superstep,
        created_at=utcnow(), status=status, source=source, routing_reason=routed.reason,
        next_tasks=tasks, joins=routed.joins, task_args=args,
        value_versions=dict.fromkeys(vals, 0), log_lengths=lengths,
        size=sum(map(len, vals.values())) + sum(map(len, appends.values())),
        digests=first_digests(vals, appends))
    state = ThreadState(meta=meta, values=dict(values), histories=histories, value_bytes=vals)
    return CheckpointWrite(meta=meta, values=vals, appends=appends), state


def next_rows(st: ThreadState, values: Mapping[str, Any],
              histories: Mapping[str, list[Message]], changed: Mapping[str, bytes | None],
              appended: Mapping[str, list[bytes]]) -> NextRows:
    """The rows of the checkpoint after ``st`` once a merge gave ``values`` and ``histories``.

    ``changed`` holds a channel's bytes when they are known (None: encode
    it); a channel whose bytes are those stored already is not written.
    """
    base = st.meta
    vals: dict[str, bytes] = {}
    value_bytes = dict(st.value_bytes)
    for name, data in changed.items():
        data = data if data is not None else encode_field("<merge>", name, values[name])
        if value_bytes.get(name) != data:
            vals[name] = value_bytes[name] = data
    stored = log_channels(base)  # a log a migration rewrote has a channel of its own
    appends = {stored.get(ch, ch): join_arrays(chunks) for ch, chunks in appended.items()}
    lengths = dict(base.log_lengths)
    for ch in appended:
        node = ch.removeprefix("history:") if ch.startswith("history:") else None
        lengths[stored.get(ch, ch)] = len(histories[node] if node is not None else values[ch])
    return NextRows(vals, appends, lengths, value_bytes)


def next_meta(
    place: Place, base: CheckpointMeta, rows: NextRows, routed: Routed, *, superstep: int,
    status: RunStatus, source: CheckpointSource, nodes: tuple[str, ...],
    parked: tuple[ParkedRow, ...],
) -> CheckpointMeta:
    """The metadata of the checkpoint after ``base`` writing ``rows``, ``routed`` next."""
    seq = base.seq + 1
    tasks, args = stored_tasks(routed.next_tasks, routed.args)
    vals, appends, lengths = rows.values, rows.appends, rows.log_lengths
    return CheckpointMeta(
        id=new_checkpoint_id(), run_id=place.run_id, thread=place.thread,
        namespace=place.namespace, parent_id=base.id, seq=seq, superstep=superstep,
        created_at=utcnow(), status=status, source=source, nodes=nodes,
        routing_reason=routed.reason, next_tasks=tasks, joins=routed.joins,
        value_versions={**base.value_versions, **dict.fromkeys(vals, seq)},
        log_lengths=lengths, task_args=args, parked=parked,
        size=sum(map(len, vals.values())) + sum(map(len, appends.values()))
        + sum(map(len, args.values())),
        digests=next_digests(base, vals, appends, set(lengths) - set(base.log_lengths)))
