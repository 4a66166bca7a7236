"""``assert_crash_safe``: a run killed by SIGKILL after each durable point resumes to the same end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import safekit
from test_examples import EXAMPLES, load

from durable_flow import InvalidInputError, WorkflowBuilder
from durable_flow.testing import CrashSafetyError, assert_crash_safe
from durable_flow.testing._crash import _compare, workflow_target
from durable_flow.testing._points import Point

pytestmark = pytest.mark.crash


@pytest.fixture
def tally_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SAFEKIT_DIR", str(tmp_path))
    return tmp_path


def test_a_side_effect_outside_a_step_fails_naming_the_node(tally_dir: Path) -> None:
    with pytest.raises(CrashSafetyError) as caught:
        assert_crash_safe(safekit.unsafe_workflow)
    error = caught.value
    assert error.node == "tally"
    assert error.point == "step 'notify' of task 'tally' in superstep 2"
    assert error.differences == ("lines: expected 1, got 2",)
    assert "(node tally)" in str(error) and "lines: expected 1, got 2" in str(error)


def test_on_postgresql_too(tally_dir: Path, pg_dsn: str) -> None:
    with pytest.raises(CrashSafetyError) as caught:
        assert_crash_safe(safekit.unsafe_workflow, store=pg_dsn)
    assert caught.value.node == "tally" and caught.value.failed == 1


def test_the_triage_example_is_crash_safe() -> None:
    triage = load("triage")
    assert assert_crash_safe(triage.workflow, {"text": "URGENT: vip customer, outage!!"}) >= 5


def test_the_nested_review_example_is_crash_safe_with_its_answer() -> None:
    nested = load("nested_review")
    points = assert_crash_safe(nested.workflow, {"topic": "tides"}, answers={"signoff": True})
    assert points >= 10  # sub-workflow commits at two depths, the waiting mark, the answers


def test_timers_are_waited_out_and_scripted_events_sent() -> None:
    assert assert_crash_safe(safekit.waits_workflow, events={"ping": "pong"}) >= 4
    with pytest.raises(CrashSafetyError, match="waits for an event that events= does not send"):
        assert_crash_safe(safekit.waits_workflow)


def test_a_request_without_a_scripted_answer_is_reported() -> None:
    nested = load("nested_review")
    with pytest.raises(CrashSafetyError, match="answers= has none for it"):
        assert_crash_safe(nested.workflow, {"topic": "tides"})


def test_a_step_that_ran_again_is_named() -> None:
    step = Point("step", "", 2, "tally", "notify").key
    ref = {"status": "completed", "values": {"lines": 1}, "history": []}
    failure = _compare(3, Point("commit", "", 1), ref, ref, [step, step, ""])
    assert failure is not None and failure.node == "tally"
    assert failure.differences == ["step 'notify' of task 'tally' ran again after the crash"]


def test_the_workflow_is_found_as_module_and_name() -> None:
    assert workflow_target(safekit.safe_workflow) == "safekit:safe_workflow"
    triage = load("triage")  # loaded from its file, not importable by its name
    assert workflow_target(triage.workflow).endswith("examples/triage.py:workflow")


def test_a_workflow_no_module_holds_is_refused() -> None:
    b = WorkflowBuilder("local", state=safekit.Tally)
    b.add_node("start", lambda s: None)
    b.set_entry("start")
    with pytest.raises(InvalidInputError, match="module-level variable"):
        assert_crash_safe(b.build())
    with pytest.raises(InvalidInputError, match="memory store"):
        assert_crash_safe(safekit.safe_workflow, store="memory")


def test_the_pytest_example_users_copy_passes(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(EXAMPLES / "test_orders.py")], cwd=tmp_path, capture_output=True,
                          text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


async def test_the_orders_example_runs(tmp_path: Path) -> None:
    state = await load("orders").main(tmp_path / "orders.db")
    assert (state.reservation, state.receipt) == ("hold-book-2", "paid-book-24")


def test_requests_for_a_role_are_answered_by_the_principal_given() -> None:
    from durable_flow import Principal

    with pytest.raises(CrashSafetyError, match="nobody was named"):
        assert_crash_safe(safekit.approvals_workflow, answers={"approve": True})
    with pytest.raises(CrashSafetyError, match="may not answer"):
        assert_crash_safe(safekit.approvals_workflow, answers={"approve": True},
                          by=Principal("bob", roles=("sales",)))
    points = assert_crash_safe(safekit.approvals_workflow, answers={"approve": True},
                               by=Principal("fay", roles=("finance",)))
    assert points >= 4  # the start, the waiting mark, the answer, the step, the commits
