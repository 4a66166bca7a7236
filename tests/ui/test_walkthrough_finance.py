"""The approvals guide followed end to end as a finance team would, in one walk.

Real processes: people added with `durable-flow users add --password-stdin`,
`durable-flow ui` serving the team's workflow with a chat webhook and an SMTP
server, a claimant who logs in and starts a claim from the start form, the
approver's email with her personal link, the chat message with the run's
page, the approval given in headless Chromium, `durable-flow audit --verify`,
and the run exported and imported into another database.
"""

from __future__ import annotations

import email
import re
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import uikit
from clikit import script
from notifykit import SmtpReceiver, WebhookReceiver, free_port
from uikit import expect

pytestmark = [pytest.mark.process, pytest.mark.browser]

TOKEN = "finance-admin-token"
SECRET = "finance-team-secret"

EXPENSES = textwrap.dedent('''
    from datetime import timedelta
    from typing import Any

    from durable_flow import END, Blackboard, Policy, WorkflowBuilder


    class Expense(Blackboard):
        claimant: str = ""
        amount: int = 0
        approved: bool | None = None


    b = WorkflowBuilder("expense", state=Expense)


    @b.node()
    async def approve(state: Expense, ctx: Any) -> dict[str, Any]:
        claim = {"question": f"Approve {state.amount} EUR for {state.claimant}?",
                 "claimant": state.claimant, "amount": state.amount}
        answer = await ctx.request(claim, bool, roles=["finance"], timeout=timedelta(days=2),
                                   escalate_to=["role:manager"],
                                   policy=Policy("small", "amount < 100", True))
        return {"approved": answer}


    b.set_entry("approve").add_edge("approve", END)
    flow = b.build()
''')


def until(found: Callable[[], Any], what: str, timeout: float = 30) -> Any:
    """Wait for ``found()`` to be truthy (the outbox delivers about once a second)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"no {what} within {timeout} s")


def plain_text(raw: str) -> str:
    """The text/plain part of an email, decoded."""
    for part in email.message_from_string(raw).walk():
        if part.get_content_type() == "text/plain":
            payload = part.get_payload(decode=True)
            assert isinstance(payload, bytes)
            return payload.decode(part.get_content_charset() or "utf-8")
    raise AssertionError(raw)


def test_a_finance_team_follows_the_approvals_guide(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "expenses.py").write_text(EXPENSES)
    monkeypatch.setenv("DURABLE_FLOW_SECRET", SECRET)  # the CLI, the app and the links share it
    db = tmp_path / "runs.db"
    # people, each password piped in as a script would
    for name, role, address in (("alice", "finance", "alice@example.com"),
                                ("carl", "staff", "carl@example.com")):
        added = script(tmp_path, "users", "add", name, "--role", role, "--email", address,
                       "--password-stdin", stdin=f"{name}-secret-pw\n")
        assert added.returncode == 0 and added.stderr == "", (added.stdout, added.stderr)
    hook, mail = WebhookReceiver(free_port()), SmtpReceiver(free_port())
    hook.start()
    mail.start()
    try:
        with uikit.ui_server(db, "expenses:flow", "--token", TOKEN,
                             "--notify-webhook", hook.url, "--smtp", f"127.0.0.1:{mail.port}",
                             "--smtp-from", "approvals@example.com",
                             env={"PYTHONPATH": str(tmp_path)}) as url, \
                uikit.browser() as browser:
            # carl claims 900 EUR from the web app's start form
            carl = browser.new_page()
            carl.set_default_timeout(15_000)
            carl.goto(url + "/login")
            carl.get_by_label("Name").fill("carl")
            carl.get_by_label("Password").fill("carl-secret-pw")
            carl.get_by_role("button", name="Log in").click()
            carl.goto(url + "/start/expense")
            carl.get_by_label("claimant").fill("carl")
            carl.get_by_label("amount").fill("900")
            carl.get_by_role("button", name="Start").click()
            carl.wait_for_url(re.compile(r".*/runs/[^/?]+$"))
            run_id = carl.url.rsplit("/", 1)[1]
            # alice is emailed her own link; the team's chat gets the run's page
            (_, raw), = until(lambda: [m for m in mail.messages
                                        if "alice@example.com" in m[0]], "email to alice")
            body = plain_text(raw)
            assert "Approve 900 EUR for carl?" in body and "Date:" in raw
            (link,) = re.findall(r"http://127\.0\.0\.1:\d+/approve/\S+", body)
            (_, chat), = until(lambda: list(hook.received), "chat message")
            assert "Approve 900 EUR for carl?" in chat["text"]
            assert f"{url}/runs/{run_id}" in chat["text"] and "/approve/" not in chat["text"]
            # alice approves in her browser, without logging in
            alice = browser.new_page()
            alice.set_default_timeout(15_000)
            alice.goto(link)
            expect(alice.locator("h1")).to_have_text("Approve 900 EUR for carl?")
            expect(alice.locator(".asked")).to_contain_text("asked by carl")
            alice.get_by_label("yes").check()
            alice.get_by_label("Comment").fill("conference travel, receipts attached")
            alice.get_by_role("button", name="Send answer").click()
            expect(alice.locator(".outcome")).to_contain_text("Approved. The run goes on now.")
            # carl's run page follows the run to its end
            expect(carl.locator("#run-status")).to_have_text("completed", timeout=30_000)
    finally:
        hook.stop()
        mail.stop()
    # the audit trail holds, keyed under the team's secret
    audit = script(tmp_path, "audit", run_id, "--verify", "--require-keyed")
    assert audit.returncode == 0, (audit.stdout, audit.stderr)
    assert "alice" in audit.stdout and "conference travel" in audit.stdout
    assert "chain intact: 1 decision(s), keyed (HMAC-SHA256)" in audit.stdout
    # the run moves to another database, signed, and its trail still holds there
    exported = script(tmp_path, "export", run_id, "--output", str(tmp_path / "run.json"))
    assert exported.returncode == 0, exported.stderr
    other = tmp_path / "other.db"
    imported = script(tmp_path, "--db", str(other), "import", str(tmp_path / "run.json"))
    assert imported.returncode == 0, (imported.stdout, imported.stderr)
    assert f"imported run {run_id} (completed" in imported.stdout
    moved = script(tmp_path, "--db", str(other), "audit", run_id, "--verify", "--require-keyed")
    assert moved.returncode == 0, (moved.stdout, moved.stderr)
    assert "chain intact: 2 decision(s), keyed (HMAC-SHA256)" in moved.stdout  # with the import
