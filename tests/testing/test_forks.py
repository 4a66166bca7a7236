"""The fork server behind ``assert_crash_safe``: exit codes, timeouts, closing, and no fork."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pytest
import safekit

from durable_flow.testing import CrashSafetyError, _forks, assert_crash_safe
from durable_flow.testing._forks import ForkServer

pytestmark = pytest.mark.crash


@pytest.fixture
def tally_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SAFEKIT_DIR", str(tmp_path))
    return tmp_path


def spec(folder: Path, target: str, *, kill: str | None = None) -> Path:
    """A child spec of ``assert_crash_safe``'s shape for ``target``."""
    path = folder / f"{target.rsplit(':', 1)[1]}.spec.json"
    path.write_bytes(orjson.dumps({
        "input": {}, "answers": {}, "events": {}, "by": None, "sys_path": sys.path,
        "target": target, "kill": kill, "lease_ttl": 30.0, "run_id": path.stem,
        "journal": str(folder / "journal"), "result": str(folder / "result.json"),
        "db": str(folder / "runs.db")}))
    return path


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_for_file(path: Path) -> str:
    for _ in range(600):
        if path.exists() and path.read_text():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def test_a_forked_child_reports_its_exit_its_stderr_and_its_result(tally_dir: Path) -> None:
    with ForkServer(sys.path) as server:
        code = server.run(spec(tally_dir, "safekit:safe_workflow"), tally_dir / "err", 60)
        assert code == 0
        assert orjson.loads((tally_dir / "result.json").read_bytes())["status"] == "completed"
        # a target that does not exist: the child fails (exit 1) with the traceback on stderr
        code = server.run(spec(tally_dir, "safekit:no_such_workflow"), tally_dir / "err", 60)
        assert code == 1
        assert "AttributeError" in (tally_dir / "err").read_text()


def test_a_child_past_its_timeout_is_killed_and_the_server_goes_on(tally_dir: Path) -> None:
    with ForkServer(sys.path) as server:
        codes: list[int | None] = []
        waiter = threading.Thread(target=lambda: codes.append(server.run(
            spec(tally_dir, "safekit:hanging_workflow"), tally_dir / "e", 6)))
        waiter.start()
        pid = int(wait_for_file(tally_dir / "stuck.pid"))  # the child is inside its node
        waiter.join(30)
        assert codes == [None]  # timed out
        assert pid != os.getpid() and not alive(pid)
        assert server.run(spec(tally_dir, "safekit:safe_workflow"), tally_dir / "err", 60) == 0


def test_closing_the_server_kills_the_children_it_still_has(tally_dir: Path) -> None:
    server = ForkServer(sys.path)
    waiter = threading.Thread(target=server.run, args=(
        spec(tally_dir, "safekit:hanging_workflow"), tally_dir / "e", 600))
    waiter.start()
    pid = int(wait_for_file(tally_dir / "stuck.pid"))
    server.close()
    waiter.join(10)
    assert not waiter.is_alive()  # its run() returned: the server said the child ended
    for _ in range(100):
        if not alive(pid):
            break
        time.sleep(0.05)
    assert not alive(pid)


def test_without_a_fork_server_the_children_are_fresh_interpreters(
        tally_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "pidfd_open")
    assert _forks.fork_server(sys.path) is None
    with pytest.raises(CrashSafetyError) as caught:
        assert_crash_safe(safekit.unsafe_workflow)
    assert caught.value.node == "tally"


def test_a_child_killed_by_a_signal_reports_it_as_subprocess_does(tally_dir: Path) -> None:
    with ForkServer(sys.path) as server:
        codes: list[int | None] = []
        waiter = threading.Thread(target=lambda: codes.append(server.run(
            spec(tally_dir, "safekit:hanging_workflow"), tally_dir / "e", 600)))
        waiter.start()
        os.kill(int(wait_for_file(tally_dir / "stuck.pid")), signal.SIGTERM)
        waiter.join(10)
        assert codes == [-signal.SIGTERM]


def test_a_started_script_is_handled_as_popen_handles_its_child(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text("import os, sys, time\n"
                      "print('out', os.environ['GREETING'], flush=True)\n"
                      "print('err', sys.argv[1], file=sys.stderr, flush=True)\n"
                      "if sys.argv[1] == 'exit': sys.exit(3)\n"
                      "time.sleep(600)\n")
    env = {**os.environ, "GREETING": "hello"}
    log = tmp_path / "child.log"
    with ForkServer(sys.path) as server:
        done = server.start_script([str(script), "exit"], env=env, stdout=log, stderr=log)
        assert done.wait(30) == 3 and done.poll() == 3 and done.returncode == 3
        # stdout and stderr of one file both kept, in order
        assert log.read_text().splitlines() == ["out hello", "err exit"]
        sleeper = server.start_script([str(script), "sleep"], env=env, stdout=log, stderr=log,
                                      cwd=tmp_path)
        assert sleeper.pid != os.getpid() and alive(sleeper.pid)
        assert sleeper.poll() is None and sleeper.returncode is None
        with pytest.raises(subprocess.TimeoutExpired):
            sleeper.wait(0.2)
        sleeper.terminate()
        assert sleeper.wait(10) == -signal.SIGTERM
        sleeper.kill()  # ended: signalling it again does nothing
        killed = server.start_script([str(script), "sleep"], env=env, stdout=log, stderr=log)
        killed.kill()
        assert killed.wait(10) == -signal.SIGKILL and not alive(killed.pid)
