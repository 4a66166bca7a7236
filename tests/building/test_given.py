"""What a builder is given: each check hands back a value to go on with and keeps the problem."""

from __future__ import annotations

from durable_flow.building._given import Problems


def test_a_bad_choice_falls_back_to_the_first_and_is_reported() -> None:
    problems = Problems()
    assert problems.one_of("waits", "branch", ("superstep", "branch")) == "branch"
    assert problems.one_of("waits", "later", ("superstep", "branch")) == "superstep"
    assert list(problems) == ["waits must be 'superstep' or 'branch', got 'later'"]


def test_positive_ints_refuse_bools_zero_and_floats() -> None:
    problems = Problems()
    assert problems.positive_int("n", 3)
    assert not any(problems.positive_int("n", v) for v in (True, 0, 1.5))
    assert len(problems) == 3


def test_unknown_options_are_dropped_and_named_with_the_known_ones() -> None:
    problems = Problems()
    kept = problems.known("node()", {"retry": 1, "colour": "red"}, frozenset({"retry", "timeout"}))
    assert kept == {"retry": 1}
    assert list(problems) == ["node(): unknown option(s) colour (known: retry, timeout)"]


def test_a_switch_case_with_a_bad_condition_is_left_out() -> None:
    problems = Problems()
    cases = problems.cases("a", [("count > 1", "b"), ("count >", "c"), (lambda s: True, "d")])
    assert [target for _, target in cases] == ["b", "d"]
    assert len(problems) == 1 and problems.found[0].startswith("switch a->c: ")


def test_a_copy_collects_on_its_own() -> None:
    given = Problems(["one"])
    found = Problems(given)
    found.append("two")
    assert list(given) == ["one"] and list(found) == ["one", "two"]
