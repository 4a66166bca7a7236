"""The crash matrix of effects that must not repeat, on SQLite and PostgreSQL.

A run is SIGKILLed at every durable point (``assert_crash_safe``) of an
in-doubt step, of an approved tool call and of a refused one, and also inside
the effect itself, after it happened and before its result was recorded. In
every case the effect happens at most once unless a person or ``reconcile``
says it did not happen; a refused tool never runs; an approved one runs once.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import effectkit
import forkrun
import pytest

from durable_flow import InDoubtDecision, RunLockedError, RunStatus, Runtime
from durable_flow.testing import assert_crash_safe

pytestmark = [pytest.mark.process, pytest.mark.crash]
KIT = Path(effectkit.__file__)


@pytest.fixture
def effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "effects"
    folder.mkdir()
    monkeypatch.setenv("EFFECTKIT_DIR", str(folder))
    return folder


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return "sqlite"
    return str(request.getfixturevalue("pg_dsn"))


def counts(folder: Path, effect: str) -> dict[str, int]:
    """How many times ``effect`` happened in each run (runs where it never did are absent)."""
    return {p.name.split(f".{effect}.")[0]: len(p.read_text().splitlines())
            for p in folder.glob(f"*.{effect}.txt")}


def test_an_in_doubt_step_killed_at_every_point_is_charged_once(effects: Path, db: str) -> None:
    points = assert_crash_safe(effectkit.paying, {"order": "A-1"}, store=db, workers=2,
                               answers={"in_doubt:charge": {"done": False}})
    assert points >= 5  # the start, the start record, the result, the commits
    charged = counts(effects, "charge")
    assert len(charged) == points + 1  # the reference run and one run per point
    assert set(charged.values()) == {1}


def test_an_approved_tool_killed_at_every_point_runs_once(effects: Path, db: str) -> None:
    points = assert_crash_safe(effectkit.refunding, {"question": "refund A-7"}, store=db,
                               workers=2, answers={"tool:refund": {"approve": True},
                                                   "in_doubt": {"done": False}})
    assert points >= 6  # ... the waiting mark, the answer, the start record, the result
    refunded = counts(effects, "refund")
    assert len(refunded) == points + 1 and set(refunded.values()) == {1}


def test_a_refused_tool_killed_at_every_point_never_runs(effects: Path, db: str) -> None:
    points = assert_crash_safe(effectkit.refunding, {"question": "refund A-7"}, store=db,
                               workers=2, answers={"tool:refund": {"approve": False,
                                                                   "comment": "no"}})
    assert points >= 4
    assert counts(effects, "refund") == {}


def _store_url(db: str, tmp_path: Path) -> str:
    return str(tmp_path / "runs.db") if db == "sqlite" else db


def _die_inside(effect: str, url: str, run_id: str, name: str, approve: str | None = None) -> None:
    env = {**os.environ, "EFFECTKIT_DIE": effect}
    proc = forkrun.run([KIT, url, run_id, name, *([approve] if approve else [])], env=env,
                       timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr


async def _resume(rt: Runtime, wf: Any, run_id: str, **kwargs: Any) -> Any:
    for _ in range(600):  # the dead child's lease runs out after its lease_ttl
        try:
            return await rt.resume(wf, run_id, **kwargs)
        except RunLockedError:
            await asyncio.sleep(0.1)
    raise AssertionError("the dead process' lease never expired")


def _open(url: str) -> Any:
    from crashkit_waits import open_store

    return open_store(url)


async def test_killed_inside_the_effect_it_asks_and_a_person_says_it_happened(
        effects: Path, db: str, tmp_path: Path) -> None:
    url, run_id = _store_url(db, tmp_path), f"inside-{tmp_path.name}"
    _die_inside("charge", url, run_id, "paying")
    assert effectkit.happened(run_id, "charge") == 1
    async with Runtime(_open(url)) as rt:
        r = await _resume(rt, effectkit.paying, run_id)
        assert r.status is RunStatus.WAITING
        [req] = r.pending_requests
        assert (req.payload["kind"], req.payload["step"]) == ("in_doubt", "charge")
        assert effectkit.happened(run_id, "charge") == 1  # not run again on a guess
        r = await rt.resume(effectkit.paying, run_id, responses={
            req.id: InDoubtDecision(done=True, result="paid A-1 (bank statement)")})
        assert r.status is RunStatus.COMPLETED
        assert r.state.receipt == "paid A-1 (bank statement)" and r.state.shipped
    assert effectkit.happened(run_id, "charge") == 1


async def test_killed_inside_the_effect_reconcile_finds_it_done(
        effects: Path, db: str, tmp_path: Path) -> None:
    url, run_id = _store_url(db, tmp_path), f"reconciled-{tmp_path.name}"
    _die_inside("charge", url, run_id, "reconciled")
    async with Runtime(_open(url)) as rt:
        r = await _resume(rt, effectkit.reconciled, run_id)
        assert r.status is RunStatus.COMPLETED and r.state.receipt == "paid A-1 (found)"
        # the database is this worker's, shared with its other tests: only this run counts
        assert [p for p in await rt.pending_requests() if p.run_id == run_id] == []
    assert effectkit.happened(run_id, "charge") == 1


async def test_killed_inside_an_approved_tool_it_asks_before_refunding_again(
        effects: Path, db: str, tmp_path: Path) -> None:
    url, run_id = _store_url(db, tmp_path), f"tool-{tmp_path.name}"
    _die_inside("refund", url, run_id, "refunding", '{"approve": true}')
    assert effectkit.happened(run_id, "refund") == 1
    async with Runtime(_open(url)) as rt:
        r = await _resume(rt, effectkit.refunding, run_id)
        [req] = r.pending_requests
        assert (req.payload["kind"], req.payload["step"]) == ("in_doubt", "tool:r1")
        r = await rt.resume(effectkit.refunding, run_id, responses={req.id: {"done": False}})
        assert r.status is RunStatus.COMPLETED and r.state.answer == "done: refunded 40 on A-7"
    # the person said it had not happened: once more, and only then
    assert effectkit.happened(run_id, "refund") == 2


def test_assert_crash_safe_needs_an_answer_for_a_step_left_in_doubt(effects: Path) -> None:
    from durable_flow.testing import CrashSafetyError

    with pytest.raises(CrashSafetyError) as caught:
        assert_crash_safe(effectkit.paying, {"order": "A-1"}, workers=2)
    # killed right after the start record, the resumed run asks, and answers= has nothing
    assert caught.value.point == "step '#started:charge:1' of task 'pay' in superstep 1"
    assert "'in_doubt:charge'" in str(caught.value)
