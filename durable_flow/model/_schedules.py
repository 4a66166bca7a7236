"""Schedules: the public record (:class:`ScheduleInfo`) and which ticks of a cron are due.

Cron expressions are read by ``croniter`` (five fields, or six with seconds last),
in the schedule's time zone (an IANA name read by ``zoneinfo``), so a
``0 9 * * *`` in ``Europe/Paris`` ticks at 09:00 Paris time on both sides of
a daylight-saving change. Tick times are kept and named in UTC: the run of a
tick is ``{schedule_id}@{tick in ISO 8601 UTC}``, the same on every worker.
No I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..errors import InvalidInputError

__all__ = ["CATCH_UP_MODES", "SKIP_GRACE", "CatchUp", "ScheduleInfo", "check_schedule",
           "due_ticks", "next_tick_after", "tick_run_id"]

CatchUp = Literal["one", "skip", "all"]
#: What a schedule does with ticks missed while no worker ran.
CATCH_UP_MODES: tuple[CatchUp, ...] = ("one", "skip", "all")
#: With ``catch_up="skip"`` a tick at most this late still starts (a worker a
#: little behind is not "missing" it); older ones are skipped.
SKIP_GRACE = timedelta(seconds=60)
# ``catch_up="all"`` starts at most this many missed ticks in one go (the rest next time)
_MAX_BATCH = 100


@dataclass(frozen=True, slots=True)
class ScheduleInfo:
    """A schedule as ``Runtime.schedules()`` lists it.

    ``next_tick`` is the first tick not started yet (UTC); ``last_tick`` the
    latest one a worker started a run for (None before the first).
    """

    schedule_id: str
    workflow_name: str
    workflow_version: str
    cron: str
    timezone: str
    catch_up: CatchUp
    input: dict[str, Any]
    labels: dict[str, str] = field(default_factory=dict)
    paused: bool = False
    next_tick: datetime | None = None
    last_tick: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None

    def run_id_for(self, tick: datetime) -> str:
        """The id of the run of ``tick``."""
        return tick_run_id(self.schedule_id, tick)


def tick_run_id(schedule_id: str, tick: datetime) -> str:
    """``{schedule_id}@{tick, ISO 8601 UTC}``: the run of one tick, the same everywhere."""
    at = tick.astimezone(UTC)
    text = at.strftime("%Y-%m-%dT%H:%M:%S") + (f".{at.microsecond:06d}" if at.microsecond else "")
    return f"{schedule_id}@{text}Z"


def check_schedule(schedule_id: object, cron: object, timezone: object, catch_up: object,
                   labels: object) -> ZoneInfo:
    """Raise ``InvalidInputError`` for a bad schedule; returns its time zone."""
    if not isinstance(schedule_id, str) or not schedule_id or "@" in schedule_id:
        raise InvalidInputError(
            f"schedule_id must be a non-empty string without '@', got {schedule_id!r}")
    from croniter import croniter  # here: opening a store does not need it

    if not isinstance(cron, str) or not croniter.is_valid(cron):
        raise InvalidInputError(f"not a cron expression: {cron!r}")
    if catch_up not in CATCH_UP_MODES:
        raise InvalidInputError(f"catch_up must be one of {CATCH_UP_MODES}, got {catch_up!r}")
    if labels is not None and (not isinstance(labels, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items())):
        raise InvalidInputError("labels must map strings to strings")
    if not isinstance(timezone, str) or not timezone:
        raise InvalidInputError(f"timezone must be an IANA name such as 'UTC', got {timezone!r}")
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidInputError(f"unknown time zone {timezone!r}") from exc


def next_tick_after(cron: str, timezone: str, moment: datetime) -> datetime:
    """The first tick strictly after ``moment``, in UTC."""
    from croniter import croniter

    start = moment.astimezone(ZoneInfo(timezone))
    tick: datetime = croniter(cron, start).get_next(datetime)
    return tick.astimezone(UTC)


def due_ticks(cron: str, timezone: str, catch_up: CatchUp, next_tick: datetime,
              now: datetime) -> tuple[list[datetime], datetime]:
    """The ticks to start now, and the schedule's next tick after them.

    Every tick from ``next_tick`` up to ``now`` is due; ``catch_up`` picks
    which of them start: ``"all"`` each (at most a hundred at a time),
    ``"one"`` only the latest, ``"skip"`` the latest only if it is less than
    :data:`SKIP_GRACE` late.
    """
    if next_tick > now:
        return [], next_tick
    if catch_up != "all":
        latest = _tick_at_or_before(cron, timezone, now)
        late = now - latest
        keep = latest >= next_tick and (catch_up == "one" or late <= SKIP_GRACE)
        return ([latest] if keep else []), next_tick_after(cron, timezone, now)
    due: list[datetime] = []
    tick = next_tick
    while tick <= now and len(due) < _MAX_BATCH:
        due.append(tick)
        tick = next_tick_after(cron, timezone, tick)
    return due, tick


def _tick_at_or_before(cron: str, timezone: str, moment: datetime) -> datetime:
    """The latest tick at or before ``moment``, in UTC."""
    from croniter import croniter

    zone = ZoneInfo(timezone)
    after = moment.astimezone(zone) + timedelta(microseconds=1)
    tick: datetime = croniter(cron, after).get_prev(datetime)
    return tick.astimezone(UTC)
