"""Which commits PostgreSQL writes in one statement: derived from the fields of ``Commit``."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from durable_flow.model._records import RunStatus
from durable_flow.store._protocols import Commit, Lease, RunUpdate
from durable_flow.store._rows import HEAD_PARTS, extra_parts
from durable_flow.store.postgres._advance import plain_advance, plain_finish

from .builders import T0, Chain

CHAIN = Chain("r1")
FIRST = CHAIN.next()
SECOND = CHAIN.next()
LEASE = Lease("r1", "owner", 1, T0 + timedelta(seconds=30))
PLAIN = Commit(LEASE, extends=FIRST.meta.id, checkpoint=SECOND,
               run=RunUpdate(RunStatus.RUNNING, head_checkpoint_id=SECOND.meta.id))
FINISH = dataclasses.replace(PLAIN, run=RunUpdate(RunStatus.COMPLETED,
                                                  head_checkpoint_id=SECOND.meta.id,
                                                  release=True))
OTHER_PARTS = [f.name for f in dataclasses.fields(Commit) if f.name not in HEAD_PARTS]


def test_a_plain_head_move_and_a_plain_finish_are_recognised() -> None:
    assert extra_parts(PLAIN) == () and plain_advance(PLAIN) and not plain_finish(PLAIN)
    assert plain_finish(FINISH) and not plain_advance(FINISH)


def test_the_parts_beyond_a_head_move_are_every_other_field_of_a_commit() -> None:
    # a part added to Commit is one of these without a second list to keep
    assert len(OTHER_PARTS) >= 11 and "withdraw" in OTHER_PARTS and "nested" in OTHER_PARTS


@pytest.mark.parametrize("part", OTHER_PARTS)
def test_any_other_part_set_sends_the_commit_the_usual_way(part: str) -> None:
    value: object = True if part == "drop_open_requests" else ("set",)
    for commit in (PLAIN, FINISH):
        more = dataclasses.replace(commit, **{part: value})
        assert extra_parts(more) == (part,)
        assert not plain_advance(more) and not plain_finish(more)


def test_empty_parts_are_unset_whatever_empty_value_they_hold() -> None:
    empty = dataclasses.replace(PLAIN, requests=[], answers={}, nested=[], reopen=[])
    assert extra_parts(empty) == () and plain_advance(empty)
