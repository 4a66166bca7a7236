from __future__ import annotations

import pytest

from durable_flow import ExpressionError, InvalidInputError, Policy, Principal
from durable_flow.model._approvals import default_title, permits, principal_of, split_targets


def test_unassigned_request_takes_any_answer_even_anonymous():
    assert permits(None, (), ())
    assert permits(Principal("x"), (), ())


def test_assigned_request_takes_its_assignee_or_a_role_holder_only():
    alice, bob = Principal("alice@example.com"), Principal("bob", roles=("legal",))
    manager = Principal("carol", roles=("manager", "finance"))
    assert permits(alice, ["alice@example.com"], ["finance"])
    assert permits(manager, ["alice@example.com"], ["finance"])
    assert not permits(bob, ["alice@example.com"], ["finance"])
    assert not permits(None, ["alice@example.com"], ())


def test_an_alias_of_a_principal_answers_what_is_assigned_to_it():
    alice = Principal("alice", aliases=("alice@example.com",))
    assert permits(alice, ["alice@example.com"], ())
    assert not permits(alice, ["bob@example.com"], ())
    assert not permits(Principal("alice"), ["alice@example.com"], ())
    with pytest.raises(InvalidInputError):
        Principal("alice", aliases=(" ",))


def test_principal_of_accepts_ids_and_refuses_other_things():
    assert principal_of("alice") == Principal("alice")
    assert principal_of(None) is None
    with pytest.raises(InvalidInputError):
        principal_of(3)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        Principal("")
    with pytest.raises(InvalidInputError):
        Principal("a", roles="finance")  # type: ignore[arg-type]


def test_escalation_targets_split_into_people_and_roles():
    assert split_targets(["boss@example.com", "role:manager"]) == (("boss@example.com",), ("manager",))
    with pytest.raises(InvalidInputError, match="names no role"):
        split_targets(["role:"])


def test_title_defaults_to_question_then_title_then_node():
    assert default_title({"question": "Approve 40 EUR?\nmore", "title": "t"}, "n") == "Approve 40 EUR?"
    assert default_title({"title": "Expense"}, "n") == "Expense"
    assert default_title(["x"], "review[2]") == "review[2]"


def test_policy_applies_its_condition_over_the_payload():
    small = Policy("small", "amount < 100 and currency == 'EUR'", {"approved": True})
    assert small.principal == "policy:small"
    assert small.applies({"amount": 40, "currency": "EUR"})
    assert not small.applies({"amount": 400, "currency": "EUR"})
    assert not small.applies("not a mapping")
    with pytest.raises(ExpressionError):
        Policy("bad", "amount <", True)
