"""Run a crash test's helper script as ``python SCRIPT ARGS`` would, forked from a warm server.

:func:`run` is ``subprocess.run([sys.executable, *argv], env=..., capture_output=True,
text=True, timeout=...)`` with the same result, but the child is forked from one
:class:`~durable_flow.testing._forks.ForkServer` per test process that imported
durable_flow once, so a child costs its run rather than an interpreter's start.
Where the server cannot run (not Linux) it is ``subprocess.run`` itself.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import childguard

from durable_flow.testing._forks import ForkServer, fork_server

_server: list[ForkServer | None] = []


def _get() -> ForkServer | None:
    if not _server:
        _server.append(fork_server(sys.path))
        if _server[0] is not None:
            atexit.register(_server[0].close)
    return _server[0]


def run(argv: Sequence[str | Path], *, env: Mapping[str, str] | None = None,
        timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run the Python file ``argv[0]`` with ``argv[1:]``; its exit code, stdout and stderr."""
    args = [str(a) for a in argv]
    childguard.starting("a forked child (forkrun.run)")
    server = _get()
    environ = dict(os.environ if env is None else env)
    if server is None:
        return subprocess.run([sys.executable, *args], env=environ, timeout=timeout,
                              capture_output=True, text=True, check=False)
    with tempfile.TemporaryDirectory(prefix="forkrun-") as folder:
        out, err = Path(folder, "stdout"), Path(folder, "stderr")
        code = server.run_script(args, env=environ, stdout=out, stderr=err, timeout=timeout)
        if code is None:
            raise subprocess.TimeoutExpired(args, timeout)
        return subprocess.CompletedProcess(args, code, out.read_text(errors="replace"),
                                           err.read_text(errors="replace"))
