"""``durable-flow users`` in scripts: a password from stdin, a password reset, no warnings."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from clikit import one_error_line, script

from durable_flow import SqliteStore
from durable_flow.runtime.people._users import Users
from durable_flow.ui._sessions import Sessions

pytestmark = pytest.mark.process


async def _login(db: Path, name: str, password: str) -> bool:
    store = SqliteStore(db)
    await store.setup()
    try:
        return await Users(store).login(name, password) is not None
    finally:
        await store.close()


def logs_in(tmp_path: Path, name: str, password: str) -> bool:
    return asyncio.run(_login(tmp_path / "runs.db", name, password))


def test_users_add_reads_the_password_from_stdin_without_warnings(tmp_path: Path) -> None:
    added = script(tmp_path, "users", "add", "ann", "--role", "finance", "--password-stdin",
                   stdin="pw with spaces \n")
    assert added.returncode == 0, added.stderr
    assert added.stderr == "" and "Warning" not in added.stdout
    assert "user ann added with roles finance" in added.stdout
    assert logs_in(tmp_path, "ann", "pw with spaces ")  # the line as typed, less its newline
    one_error_line(script(tmp_path, "users", "add", "bob", "--password-stdin", stdin="\n"),
                   1, "--password-stdin read no password")


def test_a_password_asked_on_a_pipe_prints_no_warning(tmp_path: Path) -> None:
    added = script(tmp_path, "users", "add", "cy", stdin="pw-cy-1\npw-cy-1\n")
    assert added.returncode == 0 and added.stderr == ""
    assert "GetPassWarning" not in added.stdout + added.stderr
    assert logs_in(tmp_path, "cy", "pw-cy-1")


def test_users_set_password_resets_it_and_ends_the_sessions(tmp_path: Path) -> None:
    assert script(tmp_path, "users", "add", "ann", "--password-stdin", stdin="old-pw\n"
                  ).returncode == 0

    async def session() -> str:
        store = SqliteStore(tmp_path / "runs.db")
        await store.setup()
        try:
            return await Sessions(store).start("ann")
        finally:
            await store.close()

    async def still(session_id: str) -> bool:
        store = SqliteStore(tmp_path / "runs.db")
        await store.setup()
        try:
            return await Sessions(store).find(session_id, admin=False) is not None
        finally:
            await store.close()

    sid = asyncio.run(session())
    assert asyncio.run(still(sid))
    reset = script(tmp_path, "users", "set-password", "ann", "--password-stdin", stdin="new-pw\n")
    assert reset.returncode == 0, reset.stderr
    assert "password changed" in reset.stdout
    assert not asyncio.run(still(sid))
    assert logs_in(tmp_path, "ann", "new-pw") and not logs_in(tmp_path, "ann", "old-pw")
    one_error_line(script(tmp_path, "users", "set-password", "nobody", "--password-stdin",
                          stdin="x\n"), 1, "no user named 'nobody'")
