"""Schedules: what ``Runtime.schedule``/``unschedule``/``schedules`` do, and the workers' ticker.

A schedule is a row in the store (its cron, time zone, input and next tick);
it runs nowhere by itself. Every worker that has the schedule's workflow
looks at the due schedules whenever it wakes (the store's next wake-up
includes the next tick) and starts the run of each due tick with ``submit``
under the id ``{schedule_id}@{tick}``. Starting is idempotent on the run
id, so two workers, a restart half-way, or a clock running ahead never start
one tick twice; the next tick then moves on with a compare-and-set, which
only one of them wins.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

import orjson

from .._logs import get_logger
from ..errors import DurableFlowError, InvalidInputError, StoreError
from ..model._blackboard import Blackboard
from ..model._clock import utcnow
from ..model._graph import Workflow
from ..model._schedules import (
    CatchUp,
    ScheduleInfo,
    check_schedule,
    due_ticks,
    next_tick_after,
    tick_run_id,
)
from ..store._flow_protocols import Schedules as ScheduleStore
from ..store._protocols import CheckpointStore
from ._inputs import check_workflow, validated_input
from ._signals import signals_for

if TYPE_CHECKING:
    from ._runs import Runs

__all__ = ["ScheduleTicker", "Schedules"]

_log = get_logger()


def _json_input(workflow: Workflow, input: Mapping[str, Any] | Blackboard | None
                ) -> dict[str, Any]:
    """The input as JSON values, checked against the workflow now (not at the first tick)."""
    validated_input(workflow, input)
    if isinstance(input, Blackboard):
        plain: Any = input.model_dump(mode="json", exclude_unset=True)
    else:
        plain = dict(input or {})
    try:
        return cast(dict[str, Any], orjson.loads(orjson.dumps(plain)))
    except TypeError as exc:
        raise InvalidInputError(f"a schedule's input must be JSON values: {exc}") from None


class Schedules:
    """A store's schedules: created, replaced, paused and removed (``Runtime.schedule``...)."""

    def __init__(self, store: CheckpointStore) -> None:
        self._store = store

    @property
    def store(self) -> ScheduleStore:
        """The store as a schedule store; ``InvalidInputError`` if it keeps none."""
        if not isinstance(self._store, ScheduleStore):
            raise InvalidInputError(f"{type(self._store).__name__} does not keep schedules")
        return self._store

    async def put(self, workflow: Workflow, cron: str,
                  input: Mapping[str, Any] | Blackboard | None, schedule_id: str,
                  timezone: str, catch_up: CatchUp,
                  labels: Mapping[str, str] | None) -> ScheduleInfo:
        """``Runtime.schedule``: the schedule checked and saved, its first tick from now."""
        check_workflow(workflow)
        check_schedule(schedule_id, cron, timezone,
                       catch_up, None if labels is None else dict(labels))
        values = _json_input(workflow, input)
        info = ScheduleInfo(
            schedule_id=schedule_id, workflow_name=workflow.name,
            workflow_version=workflow.version, cron=cron, timezone=timezone, catch_up=catch_up,
            input=values, labels=dict(labels or {}),
            next_tick=next_tick_after(cron, timezone, utcnow()))
        saved = await self.store.put_schedule(info)
        signals_for(self._store).wake()  # this process's workers look at it at once
        _log.info("schedule_saved", schedule_id=schedule_id, cron=cron, timezone=timezone,
                  next_tick=None if saved.next_tick is None else saved.next_tick.isoformat())
        return saved

    async def remove(self, schedule_id: str) -> bool:
        """Remove a schedule; False if there was none."""
        return await self.store.remove_schedule(schedule_id)

    async def all(self) -> list[ScheduleInfo]:
        """Every schedule, by id."""
        return await self.store.list_schedules()

    async def pause(self, schedule_id: str, paused: bool) -> ScheduleInfo:
        """Stop or restart a schedule's ticks (restarted: counted from now)."""
        store = self.store
        info = await store.get_schedule(schedule_id)
        if info is None:
            raise InvalidInputError(f"no schedule {schedule_id!r}")
        next_tick = info.next_tick if paused and info.next_tick is not None \
            else next_tick_after(info.cron, info.timezone, utcnow())
        await store.set_schedule_paused(schedule_id, paused, next_tick)
        signals_for(self._store).wake()
        after = await store.get_schedule(schedule_id)
        if after is None:  # removed meanwhile
            raise InvalidInputError(f"no schedule {schedule_id!r}")
        return after


class ScheduleTicker:
    """A worker's part of the schedules: start the runs of due ticks of its workflows."""

    def __init__(self, runs: Runs, workflows: Sequence[Workflow], *,
                 poll_interval: float = 1.0) -> None:
        self._runs = runs
        self._workflows = {(wf.name, wf.version): wf for wf in workflows}
        self._store = runs.store if isinstance(runs.store, ScheduleStore) else None
        self._poll = poll_interval
        # the earliest next tick seen, and until when that is trusted without looking
        self._earliest: datetime | None = None
        self._trusted_until = 0.0

    async def tick(self, *, woken: bool = True) -> list[str]:
        """Start the runs of every due tick of this worker's workflows; their run ids.

        The store is read when a tick may be due: at the earliest next tick
        seen, when the worker was woken (``woken``: a schedule may have been
        added) and at least every poll interval; a busy worker claiming
        again does not read it each time. A store error is logged and left
        for the next wake-up (nothing was advanced, so nothing is lost).
        """
        if self._store is None:
            return []
        now, clock = utcnow(), time.monotonic()
        if not woken and clock < self._trusted_until and (
                self._earliest is None or now < self._earliest):
            return []
        self._trusted_until = clock + self._poll
        try:
            self._earliest = await self._store.next_tick()
            due = await self._store.due_schedules(now) \
                if self._earliest is not None and self._earliest <= now else []
        except (StoreError, OSError) as exc:
            _log.warning("schedules_unreadable", error=f"{type(exc).__name__}: {exc}")
            return []
        started: list[str] = []
        for info in due:
            workflow = self._workflows.get((info.workflow_name, info.workflow_version))
            if workflow is not None:
                started += await self._fire(self._store, workflow, info)
        return started

    async def _fire(self, store: ScheduleStore, workflow: Workflow, info: ScheduleInfo) -> list[str]:
        seen = cast(datetime, info.next_tick)
        ticks, next_tick = due_ticks(info.cron, info.timezone, info.catch_up, seen, utcnow())
        started = []
        for tick in ticks:
            run_id = tick_run_id(info.schedule_id, tick)
            try:
                await self._runs.queue(workflow, info.input, run_id=run_id, priority=0,
                                       budget=None, by=None, concurrency_key=None,
                                       labels={**info.labels, "schedule": info.schedule_id})
            except DurableFlowError as exc:  # the tick's id taken by another input: say so once
                _log.warning("schedule_tick_refused", schedule_id=info.schedule_id,
                             run_id=run_id, error=f"{type(exc).__name__}: {exc}")
                continue
            started.append(run_id)
        if await store.advance_schedule(info.schedule_id, seen, next_tick,
                                        ticks[-1] if ticks else info.last_tick):
            for run_id in started:
                _log.info("schedule_tick_started", schedule_id=info.schedule_id, run_id=run_id)
            if not ticks:
                _log.info("schedule_ticks_skipped", schedule_id=info.schedule_id,
                          since=seen.isoformat(), next_tick=next_tick.isoformat())
        return started
