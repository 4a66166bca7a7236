"""Expanding a node history's references to the ``messages`` log (``engine/_histories``)."""

from __future__ import annotations

from typing import Any

import pytest

from durable_flow.engine._histories import expand

LOG = [f"m{i}" for i in range(10)]


def ref(start: Any, count: Any) -> dict[str, Any]:
    return {"__df_messages__": [start, count]}


def log() -> list[str]:
    return LOG


@pytest.mark.parametrize("whole", [True, False])
def test_references_that_follow_each_other_are_one_slice_of_the_log(whole: bool) -> None:
    items = [ref(2, 1), ref(3, 2), ref(5, 1)]
    assert expand(items, log, 4, whole=whole) == ["m2", "m3", "m4", "m5"]
    assert expand(items, log, 3, whole=whole) == ["m2", "m3", "m4"]  # a later checkpoint's too


def test_a_slice_of_a_history_may_hold_fewer_items_than_asked() -> None:
    assert expand([ref(0, 1), ref(1, 1)], log, 5, whole=False) == ["m0", "m1"]
    assert expand([ref(0, 1)], log, 0, whole=False) == []
    with pytest.raises(ValueError, match="history of 5 refers past"):
        expand([ref(0, 1), ref(1, 1)], log, 5)


@pytest.mark.parametrize("whole", [True, False])
def test_gaps_and_remembered_items_are_expanded_one_by_one(whole: bool) -> None:
    assert expand([ref(0, 1), ref(4, 2)], log, 3, whole=whole) == ["m0", "m4", "m5"]
    assert expand([ref(1, 1), "note", ref(2, 1)], log, 3, whole=whole) == ["m1", "note", "m2"]


@pytest.mark.parametrize("whole", [True, False])
@pytest.mark.parametrize("bad", [ref(True, 1), ref(0, 0), ref(-1, 2), ref(0, 1.0),
                                 {"__df_messages__": [0]}, {"__df_messages__": "0,1"}])
def test_a_malformed_reference_is_refused(bad: dict[str, Any], whole: bool) -> None:
    with pytest.raises(ValueError, match="not \\[start, count\\]"):
        expand([ref(0, 1), bad], log, 2, whole=whole)


@pytest.mark.parametrize("whole", [True, False])
def test_a_reference_past_the_log_is_refused(whole: bool) -> None:
    with pytest.raises(ValueError, match="log of 10"):
        expand([ref(8, 1), ref(9, 2)], log, 3, whole=whole)
