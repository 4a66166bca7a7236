"""``durable-flow ui`` at startup: links without ``--base-url``, a warning without ``--token``."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import uikit
from notifykit import WebhookReceiver, free_port

from durable_flow import Runtime, SqliteStore
from durable_flow.cli._ui import OPEN_WARNING, own_url


def test_the_own_url_is_the_listening_address() -> None:
    assert own_url("127.0.0.1", 8765) == "http://127.0.0.1:8765"
    assert own_url("::1", 9000) == "http://[::1]:9000"
    assert own_url("0.0.0.0", 80) == f"http://{socket.gethostname()}:80"


@pytest.mark.process
def test_ui_without_base_url_links_notifications_to_its_own_address(tmp_path: Path) -> None:
    db = tmp_path / "ui.db"

    async def start() -> str:
        async with Runtime(SqliteStore(db)) as rt:
            return (await rt.run(uikit.approval, {"topic": "links"})).run_id

    run_id = asyncio.run(start())
    hook = WebhookReceiver(free_port())
    hook.start()
    port = uikit.free_port()
    try:
        with uikit.ui_server(db, "--notify-webhook", hook.url, port=port):
            deadline = time.monotonic() + 30
            while not hook.received and time.monotonic() < deadline:
                time.sleep(0.1)
    finally:
        hook.stop()
    assert hook.received, "no notification arrived"
    (_, body), *_ = hook.received
    assert body["run"] == run_id
    assert body["link"] == f"http://127.0.0.1:{port}/runs/{run_id}"
    assert f"<http://127.0.0.1:{port}/runs/{run_id}|Open the request>" in body["text"]


def startup_output(db: Path, *args: str) -> str:
    """What ``durable-flow ui ARGS`` prints until it listens (then it is stopped)."""
    port = uikit.free_port()
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "400"}
    env.pop("DURABLE_FLOW_UI_TOKEN", None)
    proc = subprocess.Popen([sys.executable, "-m", "durable_flow", "--db", str(db), "ui", *args,
                             "--port", str(port)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", port), 0.2):
                    break
            except OSError:
                time.sleep(0.05)
        time.sleep(0.3)  # the ready lines are printed as it starts listening
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=15)
    return out


@pytest.mark.process
def test_ui_without_a_token_warns_that_nobody_can_log_in(tmp_path: Path) -> None:
    out = startup_output(tmp_path / "open.db")
    assert "durable-flow ui on http://127.0.0.1:" in out
    assert " ".join(OPEN_WARNING.split()) in " ".join(out.split())
    assert "nobody can log in" in out
    with_token = startup_output(tmp_path / "closed.db", "--token", "admin-token-123")
    assert "token required" in with_token and "nobody can log in" not in with_token
