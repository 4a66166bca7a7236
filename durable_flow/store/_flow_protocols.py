"""Store protocols of flow control: the next wake-up, schedules and limit grants.

Every store of the package implements them (the SQL base does, for memory,
SQLite and PostgreSQL); they are kept apart from ``_protocols.py`` so that a
store without them still serves runs (its workers then only poll).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from ..model._schedules import ScheduleInfo

__all__ = ["GrantDecision", "LimitGrants", "LimitUse", "Schedules", "WakeTimes"]


@dataclass(frozen=True, slots=True)
class LimitUse:
    """How a limit stands: grants held, and tasks waiting for one."""

    name: str
    in_use: int
    waiting: int


@dataclass(frozen=True, slots=True)
class GrantDecision:
    """The answer to a grant request: granted, or when to ask again at the earliest."""

    granted: bool
    use: LimitUse
    retry_at: datetime | None = None
    reason: str | None = None


@runtime_checkable
class WakeTimes(Protocol):
    """A store that tells workers when something comes due next."""

    async def next_wake(self, owner: str) -> datetime | None:
        """The next moment after now a run may become claimable or a tick comes due, or None."""
        ...


@runtime_checkable
class Schedules(Protocol):
    """Cron schedules: their definitions and the next tick of each."""

    async def put_schedule(self, info: ScheduleInfo) -> ScheduleInfo:
        """Create or replace a schedule; wakes the workers."""
        ...

    async def get_schedule(self, schedule_id: str) -> ScheduleInfo | None:
        """One schedule, or None."""
        ...

    async def list_schedules(self) -> list[ScheduleInfo]:
        """Every schedule, by id."""
        ...

    async def remove_schedule(self, schedule_id: str) -> bool:
        """Delete a schedule; False if there was none."""
        ...

    async def set_schedule_paused(self, schedule_id: str, paused: bool,
                                  next_tick: datetime) -> bool:
        """Pause or resume a schedule, setting its next tick; False if there is none."""
        ...

    async def next_tick(self) -> datetime | None:
        """The earliest next tick of the schedules not paused, or None."""
        ...

    async def due_schedules(self, now: datetime, *, limit: int = 50) -> list[ScheduleInfo]:
        """Schedules not paused whose next tick is at or before ``now``."""
        ...

    async def advance_schedule(self, schedule_id: str, seen_next: datetime, next_tick: datetime,
                               last_tick: datetime | None) -> bool:
        """Move the next tick on from ``seen_next`` (compare-and-set); False if moved already."""
        ...


@runtime_checkable
class LimitGrants(Protocol):
    """Leased grants of named limits, shared by every worker of the store."""

    async def request_grant(self, grant_id: str, name: str, *, run_id: str, task: str,
                            owner: str, ttl: float, concurrency: int | None,
                            per_second: float | None, per_minute: float | None) -> GrantDecision:
        """Grant a use now if the limit allows, else queue (or keep queued) the request."""
        ...

    async def renew_grant(self, grant_id: str, ttl: float) -> bool:
        """Extend a grant or a wait by ``ttl`` seconds; False once released."""
        ...

    async def release_grant(self, grant_id: str, name: str) -> None:
        """Give a grant or a wait up."""
        ...

    async def pace_limit(self, name: str, until: datetime) -> None:
        """No grant of ``name`` until ``until``, for every worker."""
        ...

    async def paced_until(self, name: str) -> datetime | None:
        """Until when ``name`` is paused (None: not now)."""
        ...

    async def limit_use(self, name: str) -> LimitUse:
        """Grants held and waited for now."""
        ...
