"""The approvals commands, run as the real console script: users, audit, link."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

import pytest
from clikit import one_error_line, script

from durable_flow import END, Blackboard, Principal, Runtime, SqliteStore, WorkflowBuilder
from durable_flow.runtime.people._links import LinkSigner

pytestmark = pytest.mark.process


class Expense(Blackboard):
    approved: bool | None = None


def flow() -> Any:
    b = WorkflowBuilder("expense", state=Expense)

    @b.node()
    async def approve(state: Expense, ctx: Any) -> dict[str, Any]:
        first = await ctx.request({"question": "Approve 40 EUR?"}, bool, roles=["finance"])
        second = await ctx.request({"question": "Really?"}, bool, assignees=["ann"])
        third = await ctx.request({"question": "Pay it?"}, bool)
        return {"approved": first and second and third}

    b.set_entry("approve")
    b.add_edge("approve", END)
    return b.build()


def answered_run(db: Path) -> str:
    """A run whose three requests were answered: three decisions."""
    async def go() -> str:
        async with Runtime(SqliteStore(db)) as rt:
            wf = flow()
            result = await rt.run(wf, {})
            for by in (Principal("fay", ("finance",)), "ann", None):
                result = await rt.resume(wf, result.run_id, by=by,
                                         responses={result.pending_requests[0].id: True})
            return result.run_id
    return asyncio.run(go())


def broken(proc: subprocess.CompletedProcess[str], fragment: str) -> None:
    """``audit --verify`` printed the chain, then one error line naming the broken record."""
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    (line,) = proc.stderr.splitlines()
    assert line.startswith("error: the audit trail of run ") and fragment in line, line


def test_users_add_list_set_roles_remove(tmp_path: Path) -> None:
    added = script(tmp_path, "users", "add", "ann", "--role", "finance", "--email",
                   "ann@example.com", stdin="s3cret pw\ns3cret pw\n")
    assert added.returncode == 0, added.stderr
    assert "user ann added with roles finance" in added.stdout
    mismatch = script(tmp_path, "users", "add", "bob", stdin="one\ntwo\none\none\n")
    assert mismatch.returncode == 0 and "do not match" in (mismatch.stdout + mismatch.stderr)
    listed = json.loads(script(tmp_path, "users", "list", "--json").stdout)
    assert [(u["name"], u["roles"], u["email"]) for u in listed] == [
        ("ann", ["finance"], "ann@example.com"), ("bob", [], None)]
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        (stored,) = conn.execute("SELECT password_hash FROM users WHERE name = 'ann'").fetchone()
    assert stored.startswith("$argon2id$") and "s3cret" not in stored
    assert script(tmp_path, "users", "set-roles", "ann", "--role", "manager").returncode == 0
    assert script(tmp_path, "users", "remove", "bob").returncode == 0
    listed = json.loads(script(tmp_path, "users", "list", "--json").stdout)
    assert [(u["name"], u["roles"]) for u in listed] == [("ann", ["manager"])]
    one_error_line(script(tmp_path, "users", "remove", "bob"), 1, "no user named 'bob'")


def test_audit_prints_and_verifies_and_names_an_edited_or_deleted_row(tmp_path: Path) -> None:
    run_id = answered_run(tmp_path / "runs.db")
    shown = script(tmp_path, "audit", run_id, "--verify")
    assert shown.returncode == 0, shown.stderr
    assert "fay" in shown.stdout and "chain intact: 3 decision(s)" in shown.stdout
    data = json.loads(script(tmp_path, "audit", run_id, "--json").stdout)
    assert [(d["seq"], d["by"], d["kind"]) for d in data] == [
        (1, "fay", "answer"), (2, "ann", "answer"), (3, None, "answer")]
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        conn.execute("UPDATE decisions SET answer = 'false' WHERE seq = 2")
    broken(script(tmp_path, "audit", run_id, "--verify"), "decision 2 was changed")
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        conn.execute("UPDATE decisions SET answer = 'true' WHERE seq = 2")
    assert script(tmp_path, "audit", run_id, "--verify").returncode == 0
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        conn.execute("DELETE FROM decisions WHERE seq = 1")
    broken(script(tmp_path, "audit", run_id, "--verify"), "decision 1 is missing")


def test_audit_verify_says_keyed_catches_a_deleted_tail_and_require_keyed_refuses_sha256(
        tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.delenv("DURABLE_FLOW_SECRET", raising=False)
    plain = answered_run(tmp_path / "runs.db")
    shown = script(tmp_path, "audit", plain, "--verify")
    assert shown.returncode == 0 and "unkeyed" in shown.stdout, shown
    refused = script(tmp_path, "audit", plain, "--verify", "--require-keyed")
    assert refused.returncode == 1 and "unkeyed" in refused.stderr, refused
    monkeypatch.setenv("DURABLE_FLOW_SECRET", "s3cret-for-the-chain")
    keyed = answered_run(tmp_path / "runs.db")
    shown = script(tmp_path, "audit", keyed, "--verify", "--require-keyed")
    assert shown.returncode == 0 and "chain intact: 3 decision(s), keyed" in shown.stdout, shown
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        conn.execute("DELETE FROM decisions WHERE run_id = ? AND seq = 3", (keyed,))
    broken(script(tmp_path, "audit", keyed, "--verify"), "the run records 3 decision(s)")
    monkeypatch.setenv("DURABLE_FLOW_SECRET", "another secret")
    broken(script(tmp_path, "audit", keyed, "--verify"), "decision 1 was changed")
    assert script(tmp_path, "audit", plain, "--verify").returncode == 0  # sha256 needs no key


def test_link_prints_a_signed_url_for_an_open_request(tmp_path: Path,
                                                      monkeypatch: Any) -> None:
    async def waiting() -> tuple[str, str]:
        async with Runtime(SqliteStore(tmp_path / "runs.db")) as rt:
            result = await rt.run(flow(), {})
            return result.run_id, result.pending_requests[0].id
    run_id, rid = asyncio.run(waiting())
    monkeypatch.setenv("DURABLE_FLOW_SECRET", "s3cret")
    made = script(tmp_path, "link", run_id, rid, "--for", "fay@example.com", "--expires", "1h",
                  "--base-url", "https://inbox.example.com")
    one_error_line(made, 1, "may not", "fay@example.com")  # not of the finance role
    assert script(tmp_path, "users", "add", "fay", "--role", "finance",
                  stdin="pw\npw\n").returncode == 0
    made = script(tmp_path, "link", run_id, rid, "--for", "fay", "--expires", "1h",
                  "--base-url", "https://inbox.example.com")
    assert made.returncode == 0, made.stderr
    url = urlparse(made.stdout.strip())
    assert (url.scheme, url.netloc, unquote(url.path)) == ("https", "inbox.example.com",
                                                          f"/approve/{run_id}/{rid}")
    grant = LinkSigner("s3cret").check(parse_qs(url.query)["token"][0], run_id, rid)
    assert grant.principal == "fay"
    one_error_line(script(tmp_path, "link", run_id, "nope", "--for", "fay"), 1, "nope")
    monkeypatch.delenv("DURABLE_FLOW_SECRET")
    one_error_line(script(tmp_path, "link", run_id, rid, "--for", "fay"), 1,
                   "DURABLE_FLOW_SECRET")


def test_worker_takes_notifiers_and_refuses_a_malformed_smtp_address(tmp_path: Path) -> None:
    (tmp_path / "wmod.py").write_text(
        "from durable_flow import Blackboard, WorkflowBuilder\n"
        "class S(Blackboard):\n    x: int = 0\n"
        "b = WorkflowBuilder('w', state=S)\nb.add_node('a', lambda s: None)\nb.set_entry('a')\n"
        "wf = b.build()\n")
    helped = script(tmp_path, "worker", "--help")
    assert all(flag in helped.stdout for flag in ("--notify-webhook", "--smtp", "--base-url"))
    one_error_line(script(tmp_path, "worker", "wmod:wf", "--smtp", "nohost"), 2,
                   "--smtp takes HOST:PORT")


APPROVALS_MODULE = '''
from typing import Any

from durable_flow import END, Blackboard, WorkflowBuilder


class Expense(Blackboard):
    approved: bool | None = None


b = WorkflowBuilder("expense", state=Expense)


@b.node()
async def approve(state: Expense, ctx: Any) -> dict[str, Any]:
    first = await ctx.request({"question": "Approve 40 EUR?"}, bool, roles=["finance"])
    second = await ctx.request({"question": "Really?"}, bool, assignees=["ann"])
    return {"approved": first and second}


b.set_entry("approve")
b.add_edge("approve", END)
workflow = b.build()
'''


def test_respond_by_a_user_with_a_comment_is_a_cli_decision(tmp_path: Path) -> None:
    (tmp_path / "expenses.py").write_text(APPROVALS_MODULE)
    started = script(tmp_path, "run", "expenses:workflow", "--json")
    assert started.returncode == 0, started.stderr
    run = json.loads(started.stdout)
    run_id, (first,) = run["run_id"], [r["id"] for r in run["pending_requests"]]
    one_error_line(script(tmp_path, "respond", run_id, first, "--value", "true", "--by", "bob"),
                   1, "bob", "may not")
    nobody = one_error_line(script(tmp_path, "respond", run_id, first, "--value", "true"), 1,
                            "nobody was named", "only role 'finance' may", "--by USER")
    assert "may not" not in nobody  # no double negative
    assert json.loads(script(tmp_path, "audit", run_id, "--json").stdout) == []
    assert script(tmp_path, "users", "add", "fay", "--role", "finance",
                  stdin="pw\npw\n").returncode == 0
    answered = script(tmp_path, "respond", run_id, first, "--value", "true", "--by", "fay",
                      "--comment", "receipt checked", "--json")  # answers, then resumes
    assert answered.returncode == 0, answered.stderr
    resumed = json.loads(answered.stdout)
    (second,) = [r["id"] for r in resumed["pending_requests"]]
    assert resumed["status"] == "waiting" and second != first
    recorded = script(tmp_path, "respond", run_id, second, "--value", "true", "--by", "ann",
                      "--comment", "fine by me", "--no-resume")  # records only
    assert recorded.returncode == 0, recorded.stderr
    trail = json.loads(script(tmp_path, "audit", run_id, "--json").stdout)
    assert [(d["request_id"], d["by"], d["via"], d["comment"], d["answer"]) for d in trail] == [
        (first, "fay", "cli", "receipt checked", True), (second, "ann", "cli", "fine by me", True)]


def test_the_inbox_lists_a_late_request_until_its_escalation_is_recorded(tmp_path: Path) -> None:
    from datetime import timedelta

    from durable_flow.model._clock import utcnow

    b = WorkflowBuilder("late", state=Expense)

    @b.node()
    async def approve(state: Expense, ctx: Any) -> dict[str, Any]:
        return {"approved": await ctx.request({"question": "Late?"}, bool, assignees=["ann"],
                                              timeout=timedelta(seconds=0.5),
                                              escalate_to=["role:manager"])}

    b.set_entry("approve").add_edge("approve", END)
    wf = b.build()

    async def late() -> str:
        async with Runtime(SqliteStore(tmp_path / "runs.db")) as rt:
            result = await rt.run(wf, {})
            due = result.pending_requests[0].expires_at
            assert due is not None
            await asyncio.sleep((due - utcnow()).total_seconds() + 0.05)
            return result.run_id
    run_id = asyncio.run(late())
    listed = json.loads(script(tmp_path, "inbox", "--json").stdout)
    assert [(r["run_id"], r["assignees"], r["escalated"]) for r in listed] == [
        (run_id, ["ann"], False)]

    async def escalate() -> None:
        async with Runtime(SqliteStore(tmp_path / "runs.db")) as rt:
            await rt.resume(wf, run_id)
            (moved,) = await rt.pending_requests()
            assert (moved.roles, moved.escalated) == (("manager",), True)
    asyncio.run(escalate())
    # the new deadline passes too: escalated once, it is no one's to answer any more
    asyncio.run(asyncio.sleep(0.6))
    assert json.loads(script(tmp_path, "inbox", "--json").stdout) == []
