"""Run a test's helper script as ``python SCRIPT ARGS`` would, forked from a warm server.

:func:`run` is ``subprocess.run([sys.executable, *argv], env=..., capture_output=True,
text=True, timeout=...)`` with the same result, but the child is forked from one
:class:`~durable_flow.testing._forks.ForkServer` per test process that imported
durable_flow once, so a child costs its run rather than an interpreter's start.
Where the server cannot run (not Linux) it is ``subprocess.run`` itself. The CLI
tests run the console script ``durable-flow`` the same way (``console=True``);
:func:`start` is ``subprocess.Popen`` likewise, for processes that go on running
(the fleet's workers, ``durable-flow ui`` servers).
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

from durable_flow.testing._forks import ForkedChild, ForkServer, fork_server

_servers: dict[str, ForkServer | None] = {}
#: a process :func:`start` started: forked from the warm server, or a Popen where none runs
Child = ForkedChild | subprocess.Popen[bytes]


def _get(kind: str = "kit") -> ForkServer | None:
    """The server of this test process for ``kind``: ``kit`` scripts, or ``plain`` ones.

    The plain server has the interpreter's own ``sys.path`` (not the test
    process's folders: the child sees what a user's ``python`` or
    ``durable-flow`` sees, plus ``PYTHONPATH``) and has imported the command
    line's libraries too.
    """
    if kind not in _servers:
        if kind == "kit":
            server = fork_server(sys.path)
        else:
            plain = [p for p in sys.path if p.startswith((sys.prefix, sys.base_prefix))]
            server = fork_server(plain, preload=("durable_flow.cli", "typer", "rich"))
        _servers[kind] = server
        if server is not None:
            atexit.register(server.close)
    return _servers[kind]


def start(argv: Sequence[str | Path], *, env: Mapping[str, str], log: Path,
          cwd: Path | None = None, console: bool = False) -> Child:
    """Start the Python file ``argv[0]`` with ``argv[1:]``, stdout and stderr into ``log``.

    ``subprocess.Popen(..., stdout=log, stderr=STDOUT)`` with the same handle
    (``pid``, ``poll``, ``wait``, ``send_signal``, ``terminate``, ``kill``),
    forked from the warm server (``console``: a console script, with the
    interpreter's own ``sys.path``). It runs until it ends or is stopped.
    """
    args = [str(a) for a in argv]
    childguard.starting("a forked child (forkrun.start)")
    server = _get("plain" if console else "kit")
    log.touch()
    if server is None:
        with log.open("wb") as out:
            return subprocess.Popen(args if console else [sys.executable, *args], cwd=cwd,
                                    env=dict(env), stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
    return server.start_script(args, env=env, stdout=log, stderr=log, cwd=cwd)


def run(argv: Sequence[str | Path], *, env: Mapping[str, str] | None = None,
        timeout: float = 120.0, cwd: Path | None = None, input: str | None = None,
        plain: bool = False, console: bool = False) -> subprocess.CompletedProcess[str]:
    """Run the Python file ``argv[0]`` with ``argv[1:]``; its exit code, stdout and stderr.

    ``cwd``: the folder it runs in; ``input``: what it reads on stdin;
    ``plain``: with the interpreter's own ``sys.path``, as a user's script;
    ``console``: ``argv[0]`` is a console script (``durable-flow``), plain too.
    """
    args = [str(a) for a in argv]
    childguard.starting("a forked child (forkrun.run)")
    server = _get("plain" if plain or console else "kit")
    environ = dict(os.environ if env is None else env)
    if server is None:
        command = args if console else [sys.executable, *args]
        return subprocess.run(command, env=environ, timeout=timeout, cwd=cwd, input=input,
                              stdin=subprocess.DEVNULL if input is None else None,
                              capture_output=True, text=True, check=False)
    with tempfile.TemporaryDirectory(prefix="forkrun-") as folder:
        out, err = Path(folder, "stdout"), Path(folder, "stderr")
        stdin = None
        if input is not None:
            stdin = Path(folder, "stdin")
            stdin.write_text(input)
        code = server.run_script(args, env=environ, stdout=out, stderr=err, timeout=timeout,
                                 cwd=cwd, stdin=stdin)
        if code is None:
            raise subprocess.TimeoutExpired(args, timeout)
        return subprocess.CompletedProcess(args, code, out.read_text(errors="replace"),
                                           err.read_text(errors="replace"))
