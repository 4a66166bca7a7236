"""Approvals in a real browser (headless Chromium against ``durable-flow ui`` in a subprocess).

alice answers her request through a signed link without logging in; bob (of
another role) is refused it; a deadline escalates a request to the manager
role and mia, a manager, answers it; a policy answers a small expense without
asking; the run pages show the decisions with who, when, via and the comments typed
in the answer forms.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import uikit
from uikit import expect

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

from durable_flow import Runtime, SqliteStore
from durable_flow.runtime.people._users import Users

pytestmark = pytest.mark.browser

TOKEN = "browser-admin-token"
SECRET = "browser-link-secret"


def run_async(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine to its end in a thread (Playwright's loop runs in this one)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with uikit.browser() as b:
        yield b


def new_page(browser: Browser) -> Page:
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.set_default_timeout(15_000)
    return page


def log_in(page: Page, url: str, name: str, password: str) -> None:
    page.goto(url + "/login")
    page.get_by_label("Name").fill(name)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()


async def setup(db: Path, url: str) -> dict[str, str]:
    async with Runtime(SqliteStore(db)) as rt:
        users = Users(rt.store)
        await users.add("alice", "alice-pw", roles=["finance"])
        await users.add("bob", "bob-pw", roles=["legal"])
        await users.add("mia", "mia-pw", roles=["manager"])
        small = await rt.run(uikit.expense, {"claimant": "carl", "amount": 40})
        linked = await rt.run(uikit.expense, {"claimant": "dora", "amount": 300,
                                              "deadline": 3600})
        escalating = await rt.run(uikit.expense, {"claimant": "erik", "amount": 900,
                                                  "deadline": 8})
        link = await rt.approval_link(linked.run_id, linked.pending_requests[0].id,
                                      for_="alice", base_url=url, secret=SECRET)
        return {"small": small.run_id, "linked": linked.run_id,
                "escalating": escalating.run_id, "link": link}


def test_links_roles_escalation_policy_and_the_audit(browser: Browser, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_async(_created(db))
    with uikit.ui_server(db, "uikit:expense", "--token", TOKEN,
                         env={"DURABLE_FLOW_SECRET": SECRET}) as url:
        runs = run_async(setup(db, url))
        # bob, of the legal role, sees none of the finance requests and may not answer one
        bob = new_page(browser)
        log_in(bob, url, "bob", "bob-pw")
        expect(bob.locator("nav.tabs")).to_contain_text("signed in as bob")
        expect(bob.locator("article.request")).to_have_count(0)
        # alice answers through her link, without logging in
        alice = new_page(browser)
        alice.goto(runs["link"])
        expect(alice.locator("h1")).to_have_text("Approve 300 EUR for dora?")
        alice.get_by_label("yes").check()
        alice.get_by_label("Comment").fill("receipt is in the mail")
        alice.get_by_role("button", name="Send answer").click()
        expect(alice.locator(".outcome")).to_contain_text("Approved. The run goes on now.")
        alice.goto(runs["link"])
        expect(alice.locator("h1")).to_have_text("This link was used")
        # the deadline passes: the request moves to the managers, and mia answers it
        mia = new_page(browser)
        log_in(mia, url, "mia", "mia-pw")
        item = mia.locator("article.request", has_text=runs["escalating"])
        for _ in range(100):  # the inbox is rendered by the server: look again until it is there
            if item.count():
                break
            mia.wait_for_timeout(200)
            mia.goto(url + "/?tab=mine")
        expect(item).to_contain_text("(escalated)")
        item.get_by_label("yes").check()
        item.get_by_label("Comment").fill("over the limit, but agreed")
        item.get_by_role("button", name="Send answer").click()
        expect(mia.locator("article.request", has_text=runs["escalating"])).to_contain_text(
            "Approved. The run goes on")
        # the admin's run pages: who decided, when and via what
        admin = new_page(browser)
        admin.goto(url + "/login")
        admin.get_by_label("Access token").fill(TOKEN)
        admin.get_by_role("button", name="Log in").click()
        audit = {}
        for name in ("small", "linked", "escalating"):
            admin.goto(f"{url}/runs/{runs[name]}")
            rows = admin.locator("section.decisions tr[data-kind]")
            expect(rows.first).to_be_visible()
            audit[name] = rows.all_inner_texts()
        assert "policy small" in audit["small"][0] and "automatically" in audit["small"][0]
        assert "alice" in audit["linked"][0] and "from a signed link" in audit["linked"][0]
        assert "receipt is in the mail" in audit["linked"][0]
        assert "automatic" in audit["escalating"][0]
        assert "by its deadline: passed on to role manager" in audit["escalating"][0]
        assert "mia" in audit["escalating"][1] and "in the web app" in audit["escalating"][1]
        assert "over the limit, but agreed" in audit["escalating"][1]
        # times in the viewer's zone; the title keeps UTC
        shown = admin.locator("section.decisions time").first
        assert "UTC" not in shown.inner_text() and "UTC" in (shown.get_attribute("title") or "")


async def _created(db: Path) -> None:
    async with Runtime(SqliteStore(db)):
        pass  # the schema exists before the server opens the file
