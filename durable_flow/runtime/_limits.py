"""Limits across the fleet: ``Limit`` and the gate a worker's nodes with ``uses=`` pass.

``Worker(..., limits={"openai": Limit(concurrency=4, per_minute=60)})``: a
node that declares ``uses=("openai",)`` takes a grant of every limit it
names before it runs and gives them back when it ends. Grants are rows in
the store (``limit_grants``), decided one at a time per limit under a lock
on the limit's row, so the limit holds across every worker sharing the
store. Each grant (and each wait for one) is leased like a run: renewed
while the task runs, it stops counting once its worker died and the lease
ran out. A waiting task holds its own run's lease and nothing else: no
other run's slot, no grant of a limit it does not have yet (limits are
taken in name order, so two tasks never wait for each other).

A provider that answers 429 with ``Retry-After`` pauses the limit for every
task using it (:meth:`HeldUses.slow_down`, called by agents' model calls).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from .._logs import get_logger
from ..engine import Uses
from ..errors import InvalidInputError
from ..model._clock import utcnow
from ..model._graph import NodeSpec, Workflow
from ..model._ids import new_id
from ..store._flow_protocols import LimitGrants
from ..store._protocols import CheckpointStore
from ..store.sql._flow import WAITED_LONGER, SqlFlow

__all__ = ["Limit", "LimitGate", "LimitWait", "check_limits", "limit_waits"]

_log = get_logger()

# how often a task waiting for a slot asks again (a release in this process wakes it sooner)
_POLL = 0.05
_POLL_MAX = 0.5


@dataclass(frozen=True, slots=True)
class Limit:
    """A limit on what the tasks using it do at once and per time, across every worker.

    ``concurrency``: grants held at once; ``per_second`` / ``per_minute``:
    grants started in any window of that length. At least one is given.
    """

    concurrency: int | None = None
    per_second: float | None = None
    per_minute: float | None = None

    def __post_init__(self) -> None:
        c = self.concurrency
        if c is not None and (isinstance(c, bool) or not isinstance(c, int) or c < 1):
            raise InvalidInputError(f"Limit concurrency must be a positive int, got {c!r}")
        for label, rate in (("per_second", self.per_second), ("per_minute", self.per_minute)):
            if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int | float)
                                     or not math.isfinite(rate) or rate < 1):
                raise InvalidInputError(f"Limit {label} must be a number >= 1, got {rate!r}")
        if c is None and self.per_second is None and self.per_minute is None:
            raise InvalidInputError("a Limit needs concurrency=, per_second= or per_minute=")


def check_limits(limits: object, workflows: Sequence[Workflow]) -> dict[str, Limit]:
    """The worker's limits, checked: names to ``Limit``s, and every ``uses=`` name among them."""
    if limits is None:
        limits = {}
    if not isinstance(limits, Mapping) or not all(
            isinstance(k, str) and k and isinstance(v, Limit) for k, v in limits.items()):
        raise InvalidInputError("limits must map names to Limit(...) objects")
    for wf in workflows:
        for spec in _all_specs(wf):
            missing = sorted(set(spec.uses) - set(limits))
            if missing:
                raise InvalidInputError(
                    f"node {spec.id!r} of workflow {wf.name!r} uses {', '.join(missing)}, "
                    f"which this worker has no Limit for (Worker(limits={{...}}))")
    return dict(limits)


def _all_specs(wf: Workflow) -> list[NodeSpec]:
    out: list[NodeSpec] = []
    for spec in wf.nodes.values():
        out.append(spec)
        if spec.subworkflow is not None:
            out += _all_specs(spec.subworkflow.workflow)
    return out


class HeldUses:
    """The grants one task holds: renewed while it runs; a 429 pauses their limits."""

    def __init__(self, gate: LimitGate, names: Sequence[str]) -> None:
        self._gate = gate
        self.names = tuple(names)

    async def paced(self) -> None:
        """Wait while any of these limits is paused by a provider (read from the store)."""
        await self._gate.wait_paced(self.names)

    async def slow_down(self, seconds: float) -> None:
        """Pause these limits for ``seconds`` for every task of every worker."""
        until = utcnow() + timedelta(seconds=max(0.0, seconds))
        for name in self.names:
            await self._gate.grants.pace_limit(name, until)
        _log.warning("limit_paced", limits=list(self.names), seconds=seconds,
                     until=until.isoformat())


class LimitGate:
    """A worker's grants of its named limits (the engine's ``Gate``)."""

    def __init__(self, store: CheckpointStore, limits: Mapping[str, Limit], *, owner: str,
                 ttl: float) -> None:
        if not isinstance(store, LimitGrants):
            raise InvalidInputError(f"{type(store).__name__} keeps no limit grants")
        self.grants: LimitGrants = store
        self.limits = dict(limits)
        self.owner = owner
        self.ttl = ttl
        self._released = asyncio.Event()  # a grant of this process came back: waiters look

    @contextlib.asynccontextmanager
    async def hold(self, names: Sequence[str], run_id: str, task: str) -> AsyncIterator[Uses]:
        """Take a grant of every limit in ``names`` (in name order); give them back at the end."""
        held: list[tuple[str, str]] = []
        renewing: set[asyncio.Task[None]] = set()
        try:
            for name in sorted(set(names)):
                grant_id = new_id()
                held.append((grant_id, name))
                await self._acquire(grant_id, name, run_id, task)
            renewing.add(asyncio.create_task(self._renew([g for g, _ in held])))
            uses = HeldUses(self, [n for _, n in held])
            await uses.paced()
            yield uses
        finally:
            for renewal in renewing:
                renewal.cancel()
            await asyncio.shield(self._release_all(held))

    async def _acquire(self, grant_id: str, name: str, run_id: str, task: str) -> None:
        limit = self.limits[name]
        delay, logged = _POLL, False
        while True:
            decision = await self.grants.request_grant(
                grant_id, name, run_id=run_id, task=task, owner=self.owner, ttl=self.ttl,
                concurrency=limit.concurrency, per_second=limit.per_second,
                per_minute=limit.per_minute)
            if decision.granted:
                if logged:
                    _log.info("limit_granted", limit=name, run_id=run_id, node=task)
                return
            if not logged:
                logged = True
                _log.info("limit_waiting", limit=name, run_id=run_id, node=task,
                          reason=decision.reason)
            wait = delay * (0.5 + random.random())  # jitter, not security
            if decision.retry_at is not None:
                wait = max(0.0, (decision.retry_at - utcnow()).total_seconds()) + 0.001
            elif decision.reason == WAITED_LONGER:  # room now: its turn comes at once
                wait = _POLL * random.random()
            else:
                delay = min(delay * 1.5, _POLL_MAX)
            released = self._released
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await released.wait()

    async def _renew(self, grant_ids: Sequence[str]) -> None:
        while True:
            await asyncio.sleep(self.ttl / 3)
            for grant_id in grant_ids:
                with contextlib.suppress(Exception):  # the next renewal tries again
                    await self.grants.renew_grant(grant_id, self.ttl)

    async def _release_all(self, held: Sequence[tuple[str, str]]) -> None:
        for grant_id, name in held:
            try:
                await self.grants.release_grant(grant_id, name)
            except Exception as exc:  # its lease runs out instead
                _log.warning("limit_release_failed", limit=name, error=repr(exc))
        if held:  # wake this process's waiters; a fresh event for the next ones
            released, self._released = self._released, asyncio.Event()
            released.set()

    async def wait_paced(self, names: Sequence[str]) -> None:
        """Sleep until no limit in ``names`` is paused by a provider."""
        for name in names:
            until = await self.grants.paced_until(name)
            if until is not None:
                left = (until - utcnow()).total_seconds()
                if left > 0:
                    await asyncio.sleep(left)


@dataclass(frozen=True, slots=True)
class LimitWait:
    """A task of a run waiting for a grant of a limit (``durable-flow show``)."""

    limit: str
    node: str
    in_use: int
    capacity: int | None
    since: datetime

    def describe(self) -> str:
        """``waiting for api: 2 of 2 in use`` (or ``: 2 in use`` for a rate limit)."""
        of = f" of {self.capacity}" if self.capacity is not None else ""
        return f"waiting for {self.limit}: {self.in_use}{of} in use (node {self.node})"


async def limit_waits(store: CheckpointStore, run_id: str) -> list[LimitWait]:
    """The waits for limit grants of one run's tasks, oldest first (none if the store has none)."""
    if not isinstance(store, SqlFlow):
        return []
    out = []
    for row in await store.run_grants(run_id):
        if row["granted_at"] is None:
            use = await store.limit_use(row["name"])
            out.append(LimitWait(row["name"], row["task"], use.in_use, row["capacity"],
                                 row["requested_at"]))
    return out
