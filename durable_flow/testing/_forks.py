"""A fork server for ``assert_crash_safe``'s children: import once, fork each child.

A crash test starts two child processes per durable point (the one that dies
and the one that resumes). A fresh interpreter for each spends most of its
time importing durable_flow, pydantic and the store's driver before it runs
a single superstep. :class:`ForkServer` starts one interpreter
(``python -m durable_flow.testing._forks``) that imports those modules once,
then forks a child for each spec it is sent; a forked child is a process like
any other (it dies by SIGKILL the same way, and its exit code says so).

The server stays single-threaded and runs no event loop, so forking it is
safe. Parent and server speak JSON lines over the server's stdin and stdout:
``{"id", "spec", "stderr"}`` asks for a child that runs one spec of
``assert_crash_safe`` (``{"id", "script", "env", "stdout", "stderr"}`` for one
that runs a Python file as ``__main__``, as the project's own crash tests
do with their helper scripts); the server answers
``{"id", "pid"}`` once it forked and ``{"id", "exit"}`` when the child ended
(``exit`` is negative for a signal, as ``subprocess`` reports it). The
child's stderr goes to the file named in the request. Where ``os.fork`` or
``os.pidfd_open`` is missing (not Linux), :func:`fork_server` gives None and
the children are started as fresh interpreters.
"""

from __future__ import annotations

import contextlib
import os
import runpy
import selectors
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import orjson

__all__ = ["ForkServer", "ForkedChild", "fork_server"]

_SERVER = "durable_flow.testing._forks"
# what every child imports: the child's own module (the runtime with it) and both stores
_PRELOAD = ("durable_flow.testing._child", "durable_flow.store.sqlite._sqlite",
            "durable_flow.store.postgres._postgres")


class _Pending:
    """One child asked for: its pid once forked, its exit code once it ended."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.exit: int | None = None
        self.forked = threading.Event()
        self.done = threading.Event()


class ForkedChild:
    """A child started by :meth:`ForkServer.start_script`, handled as a ``subprocess.Popen``.

    ``pid``, ``returncode``, :meth:`poll`, :meth:`wait`, :meth:`send_signal`,
    :meth:`terminate` and :meth:`kill` behave as ``Popen``'s do (the exit code
    is negative for a signal); the child is the server's, so the server reaps it.
    """

    def __init__(self, args: Sequence[str], pending: _Pending) -> None:
        assert pending.pid is not None
        self.args = list(args)
        self.pid: int = pending.pid
        self._pending = pending

    @property
    def returncode(self) -> int | None:
        """The exit code once the child ended, else None."""
        return self._pending.exit if self._pending.done.is_set() else None

    def poll(self) -> int | None:
        """The exit code if the child ended, else None."""
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the child to end; its exit code (``subprocess.TimeoutExpired`` after ``timeout``)."""
        if not self._pending.done.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        if self._pending.exit is None:  # the server went away before it reported the exit
            raise ChildProcessError(f"the fork server ended before child {self.pid} did")
        return self._pending.exit

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` to the child, unless it already ended."""
        if not self._pending.done.is_set():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        """SIGTERM the child."""
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL the child."""
        self.send_signal(signal.SIGKILL)


class ForkServer:
    """A server process that forks children already holding durable_flow's imports.

    Thread-safe: several threads may :meth:`run` children at once. Close it
    (or use it as a context manager) to end the server; children still
    running are killed.
    """

    def __init__(self, sys_path: Sequence[str], preload: Sequence[str] = ()) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL)
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._stdin: IO[bytes] = self._proc.stdin
        self._stdout: IO[bytes] = self._proc.stdout
        self._lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._next = 0
        self._closed = False
        self._send({"sys_path": list(sys_path), "preload": [*_PRELOAD, *preload]})
        self._reader = threading.Thread(target=self._read, name="fork-server", daemon=True)
        self._reader.start()

    def run(self, spec_file: Path, stderr_file: Path, timeout: float) -> int | None:
        """Fork a child that runs ``spec_file``; its exit code, or None after ``timeout`` s.

        A child still running at the timeout is killed.
        """
        return self._ask({"spec": str(spec_file), "stderr": str(stderr_file)}, timeout)

    def _ask(self, request: dict[str, Any], timeout: float) -> int | None:
        pending = self._request(request)
        if pending.done.wait(timeout):
            return pending.exit
        if pending.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pending.pid, signal.SIGKILL)
        pending.done.wait(5.0)
        return None

    def _request(self, request: dict[str, Any]) -> _Pending:
        with self._lock:
            self._next += 1
            key, pending = self._next, _Pending()
            self._pending[key] = pending
        self._send({"id": key, **request})
        return pending

    def start_script(self, argv: Sequence[str], *, env: Mapping[str, str], stdout: Path,
                     stderr: Path, cwd: Path | None = None) -> ForkedChild:
        """Fork a child that runs ``argv[0]`` as :meth:`run_script` does; it, once forked.

        It goes on running; the :class:`ForkedChild` waits for it, signals
        it, polls it. ``stderr`` may name the ``stdout`` file: both go to one.
        """
        request = self._script_request(argv, env, stdout, stderr, cwd, None)
        pending = self._request(request)
        pending.forked.wait()
        if pending.pid is None:
            raise ChildProcessError("the fork server ended before it forked the child")
        return ForkedChild(request["script"], pending)

    @staticmethod
    def _script_request(argv: Sequence[str], env: Mapping[str, str], stdout: Path,
                        stderr: Path, cwd: Path | None, stdin: Path | None) -> dict[str, Any]:
        request: dict[str, Any] = {"script": [str(a) for a in argv], "env": dict(env),
                                   "stdout": str(stdout), "stderr": str(stderr)}
        if cwd is not None:
            request["cwd"] = str(cwd)
        if stdin is not None:
            request["stdin"] = str(stdin)
        return request

    def run_script(self, argv: Sequence[str], *, env: Mapping[str, str], stdout: Path,
                   stderr: Path, timeout: float, cwd: Path | None = None,
                   stdin: Path | None = None) -> int | None:
        """Fork a child that runs the Python file ``argv[0]`` as ``__main__``, as ``python`` would.

        ``argv`` becomes ``sys.argv``, ``env`` the whole environment; the
        file's folder comes first on ``sys.path``, then the folders of
        ``env``'s ``PYTHONPATH``. It runs in ``cwd`` (default: the server's
        folder) and reads the file ``stdin`` (default: nothing). Its output
        goes to the files ``stdout`` and ``stderr``. The exit code, or None
        after ``timeout`` s (the child is then killed).
        """
        return self._ask(self._script_request(argv, env, stdout, stderr, cwd, stdin), timeout)

    def close(self) -> None:
        """End the server (it kills the children it still has) and wait for it."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            self._stdin.close()
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._reader.join(5)

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, message: dict[str, Any]) -> None:
        with self._lock:
            self._stdin.write(orjson.dumps(message) + b"\n")
            self._stdin.flush()

    def _read(self) -> None:
        for line in self._stdout:
            message = orjson.loads(line)
            with self._lock:
                pending = self._pending.get(message["id"])
            if pending is None:
                continue
            if "pid" in message:
                pending.pid = message["pid"]
                pending.forked.set()
            else:
                pending.exit = message["exit"]
                pending.done.set()
        with self._lock:  # the server is gone: no child of it is running any more
            for pending in self._pending.values():
                pending.forked.set()
                pending.done.set()


def fork_server(sys_path: Sequence[str], preload: Sequence[str] = ()) -> ForkServer | None:
    """A started :class:`ForkServer`, or None where this system cannot fork one.

    ``preload``: modules the server imports besides durable_flow's stores.
    """
    if not hasattr(os, "fork") or not hasattr(os, "pidfd_open"):
        return None
    return ForkServer(sys_path, preload)


# -- the server side ---------------------------------------------------------------------------


def _serve() -> None:
    """Read the setup line, import what it names, then fork a child per request."""
    inbox, outbox = sys.stdin.fileno(), sys.stdout.buffer
    # read straight from the descriptor (a buffered reader could hold requests select misses)
    buffered = b""
    while b"\n" not in buffered:
        chunk = os.read(inbox, 65536)
        if not chunk:
            return
        buffered += chunk
    first, buffered = buffered.split(b"\n", 1)
    setup = orjson.loads(first)
    sys.path[:] = setup["sys_path"]
    for module in setup["preload"]:
        with contextlib.suppress(ImportError):  # e.g. asyncpg not installed: SQLite only
            __import__(module)
    children: dict[int, tuple[int, int]] = {}  # pidfd -> (request id, pid)
    selector = selectors.DefaultSelector()
    selector.register(inbox, selectors.EVENT_READ)
    open_input = True
    while open_input or children:
        *lines, buffered = buffered.split(b"\n")
        for line in lines:
            message = orjson.loads(line)
            pid = _fork(message)
            pidfd = os.pidfd_open(pid)
            children[pidfd] = (message["id"], pid)
            selector.register(pidfd, selectors.EVENT_READ)
            _reply(outbox, {"id": message["id"], "pid": pid})
        if not (open_input or children):
            break
        for key, _ in selector.select():
            if key.fd != inbox:
                request, pid = children.pop(key.fd)
                selector.unregister(key.fd)
                os.close(key.fd)
                _, status = os.waitpid(pid, 0)
                _reply(outbox, {"id": request, "exit": _exit_code(status)})
                continue
            chunk = os.read(key.fd, 65536)
            if not chunk:  # the parent closed its end: kill what is left, then stop
                open_input = False
                selector.unregister(key.fd)
                for _, pid in children.values():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                continue
            buffered += chunk


def _fork(request: dict[str, Any]) -> int:
    """Fork a child that runs one request (a spec, or a script); in the parent, its pid."""
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        null = os.open(os.devnull, os.O_RDWR)
        out = _output(request["stdout"]) if "stdout" in request else null
        os.dup2(os.open(request["stdin"], os.O_RDONLY) if "stdin" in request else null, 0)
        if "cwd" in request:
            os.chdir(request["cwd"])
        os.dup2(out, 1)
        same = request["stderr"] == request.get("stdout")
        os.dup2(out if same else _output(request["stderr"]), 2)
        if "script" in request:
            _run_script(request["script"], request["env"])
        else:
            from ._child import main

            main(["", request["spec"]])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _output(path: str) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)


def _run_script(argv: list[str], env: dict[str, str]) -> None:
    """Run the file ``argv[0]`` as ``__main__`` with ``argv`` and ``env``, as ``python`` would."""
    os.environ.clear()
    os.environ.update(env)
    sys.argv[:] = argv
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[0:0] = [os.path.dirname(os.path.abspath(argv[0])), *map(os.path.abspath, extra)]
    runpy.run_path(argv[0], run_name="__main__")


def _exit_code(status: int) -> int:
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _reply(outbox: IO[bytes], message: dict[str, Any]) -> None:
    outbox.write(orjson.dumps(message) + b"\n")
    outbox.flush()


if __name__ == "__main__":
    _serve()
