"""A PostgreSQL server of one test's own, for tests that restart the server.

The shared test server (``DURABLE_FLOW_TEST_PG_DSN``) serves every other test
at the same time, so it is never restarted. :func:`private_server` makes a
throwaway cluster instead: ``initdb`` into a temporary directory (trust
auth), started with ``pg_ctl`` on a free port of 127.0.0.1 and a socket in
that directory; the test may restart it as often as it likes; it is stopped
and removed afterwards. Run as root, the server runs as the ``postgres`` OS
user (PostgreSQL refuses to run as root), which owns the directory.

No PostgreSQL binaries on this machine fails the test: it is never skipped.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

#: Seconds pg_ctl waits for a start or a stop.
WAIT = 60
#: Attempts at starting on a free port (another process may take it first).
ATTEMPTS = 3


def _bindir() -> Path:
    """The newest installed PostgreSQL's binaries (Debian: /usr/lib/postgresql/N/bin)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                   key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0)
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    if initdb is None:
        pytest.fail("no initdb found (/usr/lib/postgresql/*/bin or PATH): the server-restart "
                    "tests need PostgreSQL's binaries", pytrace=False)
    return Path(initdb).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivateServer:
    """One cluster in ``root``; :attr:`dsn` names its ``postgres`` database."""

    def __init__(self, root: Path) -> None:
        self.bindir = _bindir()
        self.root = root
        self.data = root / "data"
        self.log = root / "server.log"
        self.port = 0
        # PostgreSQL will not run as root: then the postgres user runs it, and owns root/
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self._as:
            user = pwd.getpwnam("postgres")
            os.chown(root, user.pw_uid, user.pw_gid)

    @property
    def dsn(self) -> str:
        """The server's ``postgres`` database (trust auth, user ``postgres``)."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self._as, str(self.bindir / tool), *args], capture_output=True,
                              text=True, timeout=WAIT + 30, stdin=subprocess.DEVNULL)

    def _ctl(self, action: str, *args: str) -> subprocess.CompletedProcess[str]:
        return self._run("pg_ctl", action, "-D", str(self.data), "-l", str(self.log), "-w",
                         "-t", str(WAIT), *args)

    def init(self) -> None:
        """``initdb``: an empty cluster, trust auth, no fsync (nothing here outlives the test)."""
        done = self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres",
                         "-E", "UTF8", "--no-sync", "--no-instructions")
        if done.returncode:
            pytest.fail(f"initdb failed: {done.stdout}{done.stderr}", pytrace=False)

    def start(self) -> None:
        """Start on a free port of 127.0.0.1 (:attr:`port`), trying another if it was taken."""
        for _ in range(ATTEMPTS):
            self.port = _free_port()
            options = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
                       "-c fsync=off -c full_page_writes=off")
            done = self._ctl("start", "-o", options)
            if done.returncode == 0:
                return
        pytest.fail(f"a private PostgreSQL server did not start: {done.stdout}{done.stderr}\n"
                    f"{self.log.read_text(errors='replace')[-3000:]}", pytrace=False)

    def restart(self) -> None:
        """Restart (fast shutdown: every session ends) on the same port; waits until it is up."""
        done = self._ctl("restart", "-m", "fast")
        assert done.returncode == 0, (done.stdout, done.stderr, self.log.read_text()[-3000:])

    def stop(self) -> None:
        """Stop at once, whatever the sessions are doing."""
        self._ctl("stop", "-m", "immediate")


@contextlib.contextmanager
def private_server() -> Iterator[PrivateServer]:
    """A started :class:`PrivateServer`; stopped and its directory removed afterwards."""
    # not tmp_path: under root that is in a 0700 directory the postgres user cannot enter
    root = Path(tempfile.mkdtemp(prefix="durable-flow-pg-"))
    try:
        server = PrivateServer(root)
        server.init()
        server.start()
        try:
            yield server
        finally:
            server.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
