"""Which cron ticks are due: catch-up modes, time zones, and the run id of a tick."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import croniter  # noqa: F401  # imported at collection: its import runs `file` once
import pytest

from durable_flow import InvalidInputError
from durable_flow.model._schedules import (
    SKIP_GRACE,
    check_schedule,
    due_ticks,
    next_tick_after,
    tick_run_id,
)

NOON = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def test_a_tick_not_come_yet_is_not_due() -> None:
    ticks, after = due_ticks("*/5 * * * *", "UTC", "one", NOON, NOON - timedelta(seconds=1))
    assert ticks == [] and after == NOON


def test_catch_up_one_starts_only_the_latest_missed_tick() -> None:
    ticks, after = due_ticks("*/5 * * * *", "UTC", "one", NOON, NOON + timedelta(minutes=32))
    assert ticks == [NOON + timedelta(minutes=30)]
    assert after == NOON + timedelta(minutes=35)


def test_catch_up_all_starts_every_missed_tick_in_order() -> None:
    ticks, after = due_ticks("*/5 * * * *", "UTC", "all", NOON, NOON + timedelta(minutes=32))
    assert ticks == [NOON + timedelta(minutes=5 * i) for i in range(7)]
    assert after == NOON + timedelta(minutes=35)


def test_catch_up_skip_starts_a_tick_only_while_it_is_fresh() -> None:
    fresh = NOON + SKIP_GRACE - timedelta(seconds=1)
    assert due_ticks("0 12 * * *", "UTC", "skip", NOON, fresh)[0] == [NOON]
    stale, after = due_ticks("0 12 * * *", "UTC", "skip", NOON, NOON + timedelta(hours=3))
    assert stale == [] and after == NOON + timedelta(days=1)


def test_a_cron_is_read_in_its_time_zone_across_daylight_saving() -> None:
    # 09:00 in Paris is 08:00 UTC in winter and 07:00 UTC in summer (DST on 29 March 2026)
    before = next_tick_after("0 9 * * *", "Europe/Paris", datetime(2026, 3, 28, 10, tzinfo=UTC))
    after = next_tick_after("0 9 * * *", "Europe/Paris", before)
    assert before == datetime(2026, 3, 29, 7, tzinfo=UTC)
    assert after == datetime(2026, 3, 30, 7, tzinfo=UTC)
    assert next_tick_after("0 9 * * *", "Europe/Paris", datetime(2026, 1, 5, tzinfo=UTC)) \
        == datetime(2026, 1, 5, 8, tzinfo=UTC)


def test_six_fields_tick_in_seconds() -> None:
    # croniter reads seconds as the sixth field, last
    assert next_tick_after("* * * * * */10", "UTC", NOON) == NOON + timedelta(seconds=10)


def test_the_run_id_of_a_tick_is_its_utc_time() -> None:
    paris = NOON.astimezone(next_tick_after.__globals__["ZoneInfo"]("Europe/Paris"))
    assert tick_run_id("nightly", NOON) == tick_run_id("nightly", paris) == \
        "nightly@2026-12-02T12:00:00Z"


@pytest.mark.parametrize(("args", "match"), [
    (("", "* * * * *", "UTC", "one", None), "schedule_id"),
    (("a@b", "* * * * *", "UTC", "one", None), "schedule_id"),
    (("s", "every day", "UTC", "one", None), "cron"),
    (("s", "* * * * *", "Mars/Olympus", "one", None), "time zone"),
    (("s", "* * * * *", "UTC", "twice", None), "catch_up"),
    (("s", "* * * * *", "UTC", "one", {"k": 1}), "labels"),
])
def test_bad_schedules_are_refused(args: tuple[object, ...], match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        check_schedule(*args)
