"""Durable points: a store wrapper that reports every write a crash test can stop after.

:class:`PointStore` wraps any :class:`~durable_flow.store._protocols.CheckpointStore`
and, after each write that makes progress durable has returned, hands a
:class:`Point` per written item to its callback: a run's first checkpoint, a
superstep commit (of any thread), a finished task's saved write, a recorded
``ctx.step`` result, the answers a claim records. Only
``durable_flow.testing.assert_crash_safe`` installs it, in the child
processes it starts: stores used any other way carry no check for it.

A point is named by what it wrote, not by when: the thread (``""`` for the
top level, ``review@3`` for the sub-workflow node ``review`` run in the
parent's superstep 3, ``review@3/legal@2`` deeper), the superstep, the node
and the step, so a point of one run is found again in another run of the
same deterministic workflow. ``Point.key`` is that name as one string.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ..store._protocols import CheckpointStore, CheckpointWrite, Claim, Commit, Lease, StepRow, TaskWrite

__all__ = ["Point", "PointStore"]


@dataclass(frozen=True, slots=True)
class Point:
    """One durable write: its kind, where in the run, and the node and step it belongs to."""

    kind: str
    """``create``, ``commit``, ``task_write``, ``step`` or ``answers``."""
    thread: str
    superstep: int
    node: str = ""
    detail: str = ""

    @property
    def key(self) -> str:
        """The point as one string (JSON), equal across runs of a deterministic workflow."""
        return orjson.dumps([self.kind, self.thread, self.superstep, self.node,
                             self.detail]).decode()

    @classmethod
    def from_key(cls, key: str) -> Point:
        """The point a :attr:`key` names."""
        kind, thread, superstep, node, detail = orjson.loads(key)
        return cls(kind, thread, superstep, node, detail)

    def describe(self) -> str:
        """The point in words, for a failure message."""
        where = f"superstep {self.superstep}" + (f" of sub-workflow {self.thread}"
                                                 if self.thread else "")
        if self.kind == "create":
            return "the run's first checkpoint"
        if self.kind == "commit" and self.superstep < 0:
            return f"the commit that made the run {self.detail}"
        if self.kind == "commit":
            ran = f" (after {self.node})" if self.node else ""
            return f"the commit of {where}{ran}" + (f", {self.detail}" if self.detail else "")
        if self.kind == "task_write":
            return f"the saved write of task {self.node!r} in {where}"
        if self.kind == "step":
            return f"step {self.detail!r} of task {self.node!r} in {where}"
        return f"the answers recorded for {self.detail}"


OnPoints = Callable[[list[Point], Lease | None], Awaitable[None]]


class PointStore:
    """A store that reports each durable write to ``on_points`` once the write returned.

    Every other method goes straight to the wrapped store. ``on_points``
    receives the points of one write and the lease it was made under; it
    may stop the process (that is what it is for).
    """

    def __init__(self, inner: CheckpointStore, on_points: OnPoints) -> None:
        self.inner = inner
        self._on_points = on_points
        self._places: dict[tuple[str, str], tuple[str, int]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def create_run(self, run: Any, checkpoints: Sequence[CheckpointWrite],
                         lease: Lease | None, **recorded: Any) -> None:
        """``create_run`` of the wrapped store, then one ``create`` point."""
        await self.inner.create_run(run, checkpoints, lease, **recorded)
        for write in checkpoints:
            await self._learn(write)
        await self._on_points([Point("create", "", 0)], lease)

    async def claim(self, claim: Claim) -> Lease:
        """``claim`` of the wrapped store, then an ``answers`` point when it recorded answers."""
        lease = await self.inner.claim(claim)
        if claim.answers:
            await self._on_points([Point("answers", "", 0, detail=", ".join(sorted(claim.answers)))],
                                  lease)
        return lease

    async def commit(self, commit: Commit) -> None:
        """``commit`` of the wrapped store, then one ``commit`` point."""
        await self.inner.commit(commit)
        write = commit.checkpoint
        if write is not None:
            await self._learn(write)
            meta = write.meta
            point = Point("commit", await self._thread(meta.run_id, meta.thread), meta.superstep,
                          ", ".join(meta.nodes), meta.status.value)
        else:
            point = await self._mark_point(commit)
        await self._on_points([point], commit.lease)

    async def put_task_writes(self, lease: Lease, writes: Sequence[TaskWrite]) -> None:
        """``put_task_writes`` of the wrapped store, then a ``task_write`` point per task."""
        await self.inner.put_task_writes(lease, writes)
        points = []
        for w in writes:
            thread, superstep = await self._place(w.run_id, w.checkpoint_id)
            points.append(Point("task_write", thread, superstep + 1, w.node))
        await self._on_points(points, lease)

    async def put_step(self, lease: Lease, step: StepRow) -> None:
        """``put_step`` of the wrapped store, then one ``step`` point."""
        await self.inner.put_step(lease, step)
        thread, superstep = await self._place(step.run_id, step.checkpoint_id)
        await self._on_points([Point("step", thread, superstep + 1, step.node, step.name)], lease)

    async def _mark_point(self, commit: Commit) -> Point:
        """A commit without a checkpoint: a head marked waiting or failed, or a status change."""
        run_id = commit.lease.run_id
        mark = commit.mark
        if mark is None:
            status = commit.run.status.value if commit.run is not None else ""
            return Point("commit", "", -1, detail=status)
        thread, superstep = await self._place(run_id, mark.checkpoint_id)
        asked = ", ".join(sorted(r.id for r in commit.requests))
        return Point("commit", thread, superstep + 1, detail=mark.status.value
                     + (f" on {asked}" if asked else ""))

    async def _learn(self, write: CheckpointWrite) -> None:
        meta = write.meta
        self._places[meta.run_id, meta.id] = (await self._thread(meta.run_id, meta.thread),
                                              meta.superstep)

    async def _place(self, run_id: str, checkpoint_id: str) -> tuple[str, int]:
        """The thread name and superstep of a checkpoint (read once when another process wrote it)."""
        place = self._places.get((run_id, checkpoint_id))
        if place is None:
            meta = await self.inner.get_checkpoint(run_id, checkpoint_id)
            place = ("?", -1) if meta is None else (await self._thread(run_id, meta.thread),
                                                    meta.superstep)
            self._places[run_id, checkpoint_id] = place
        return place

    async def _thread(self, run_id: str, thread: str) -> str:
        """``review@3/legal@2`` for the thread ``<checkpoint>/review.legal``-style ids."""
        if not thread:
            return ""
        anchor, _, node = thread.partition("/")
        parent, superstep = await self._place(run_id, anchor)
        name = f"{node.rsplit('.', 1)[-1]}@{superstep + 1}"
        return f"{parent}/{name}" if parent else name
