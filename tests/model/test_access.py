"""The one authorization rule: each principal's place towards a run, and what it allows."""

from __future__ import annotations

import pytest

from durable_flow import NotAuthorizedError, Principal
from durable_flow.model._access import Access, RunAccess, access_of, allows, require

RUN = RunAccess(operators=("ops",), viewers=("audit",), started_by="carol",
                requests=(((), ("cfo",)), (("dan",), ())))


@pytest.mark.parametrize(("who", "admin", "expected"), [
    (None, True, Access.ADMIN),                         # the app's own credential
    (Principal("root", ("admin",)), False, Access.ADMIN),
    (Principal("olga", ("ops",)), False, Access.OPERATOR),
    (Principal("vic", ("audit",)), False, Access.VIEWER),
    (Principal("carol"), False, Access.PARTICIPANT),    # started it
    (Principal("ann", ("cfo",)), False, Access.PARTICIPANT),  # may answer by role
    (Principal("dan"), False, Access.PARTICIPANT),      # was assigned by name
    (Principal("bob", ("sales",)), False, Access.NOBODY),
    (None, False, Access.NOBODY),
])
def test_each_principal_has_one_place(who: Principal | None, admin: bool,
                                      expected: Access) -> None:
    assert access_of(who, RUN, admin=admin) is expected


def test_a_request_naming_nobody_makes_everyone_signed_in_a_participant() -> None:
    run = RunAccess(requests=(((), ()),))
    assert access_of(Principal("bob"), run) is Access.PARTICIPANT
    assert access_of(None, run) is Access.NOBODY


@pytest.mark.parametrize("act", ["cancel", "fork", "update", "pause", "unpause", "resume",
                                 "retry"])
def test_participants_and_viewers_may_read_but_not_change(act: str) -> None:
    for place in (Access.PARTICIPANT, Access.VIEWER):
        assert allows(place, "read")
        assert not allows(place, act)
    assert allows(Access.OPERATOR, act)
    assert not allows(Access.OPERATOR, "reassign") and allows(Access.ADMIN, "reassign")
    assert not allows(Access.NOBODY, "read")
    assert not allows(Access.ADMIN, "no-such-act")


def test_require_refuses_naming_who_may() -> None:
    with pytest.raises(NotAuthorizedError) as err:
        require(Principal("carol"), "r1", RUN, "fork")
    assert err.value.by == "carol"
    assert "its operators or an admin" in str(err.value)
    assert require(Principal("olga", ("ops",)), "r1", RUN, "fork") is Access.OPERATOR
