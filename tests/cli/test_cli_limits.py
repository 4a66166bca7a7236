"""``durable-flow worker --limit NAME=SPEC``: named limits read from the command line."""

from __future__ import annotations

import pytest

from durable_flow import Limit
from durable_flow.cli._limits import parse_limits
from durable_flow.cli._support import CliError


def test_limits_are_read_by_name() -> None:
    assert parse_limits(["api=concurrency:4,per_minute:60", "db=per_second:2.5"]) == {
        "api": Limit(concurrency=4, per_minute=60), "db": Limit(per_second=2.5)}
    assert parse_limits([]) == {}


@pytest.mark.parametrize(("spec", "fragment"), [
    ("api", "NAME="), ("=concurrency:1", "NAME="), ("api=burst:3", "unknown part"),
    ("api=concurrency:many", "takes a number"), ("api=concurrency:0", "positive"),
    ("api=per_second", "unknown part"),
])
def test_bad_limits_are_refused(spec: str, fragment: str) -> None:
    with pytest.raises(CliError, match=fragment):
        parse_limits([spec])


def test_a_name_is_given_once() -> None:
    with pytest.raises(CliError, match="once per name"):
        parse_limits(["api=concurrency:1", "api=concurrency:2"])
