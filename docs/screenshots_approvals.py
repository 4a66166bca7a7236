"""Take the screenshots of the Approvals guide: ``python docs/screenshots_approvals.py [FOLDER]``.

A finance approver's inbox (signed in as alice, of the finance role: the
claims waiting for her), the page a signed link opens, and a run page with
its decisions, from headless Chromium
against ``durable-flow ui`` (the browser tests' setup, ``tests/uikit.py``).
They go to ``docs/`` unless a folder is given (the tests take them into a
temporary one, so this script cannot rot unnoticed).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent / "tests"))

import uikit  # noqa: E402

from durable_flow import Principal, Runtime, SqliteStore  # noqa: E402
from durable_flow.runtime.people._users import Users  # noqa: E402

TOKEN, SECRET, ALICE_PW = "screenshot-token", "screenshot-secret", "alice-pw"


async def fill(db: Path, url: str) -> tuple[str, str]:
    async with Runtime(SqliteStore(db)) as rt:
        await Users(rt.store).add("alice", ALICE_PW, roles=["finance"])
        await rt.run(uikit.expense, {"claimant": "carl", "amount": 40}, by="carl")
        asked = await rt.run(uikit.expense, {"claimant": "dora", "amount": 300}, by="dora")
        decided = await rt.run(uikit.expense, {"claimant": "erik", "amount": 900}, by="erik")
        rid = decided.pending_requests[0].id
        await rt.reassign(decided.run_id, rid, roles=["manager"], by="admin")
        await rt.respond(decided.run_id, {rid: True}, by=Principal("mia", ("manager",)),
                         comment="within the travel budget")
        link = await rt.approval_link(asked.run_id, asked.pending_requests[0].id,
                                      for_=Principal("alice", ("finance",)), base_url=url,
                                      secret=SECRET)
        await rt.run(uikit.expense, {"claimant": "fred", "amount": 650}, by="fred")
        return link, decided.run_id


async def created(db: Path) -> None:
    async with Runtime(SqliteStore(db)):
        pass  # the schema exists before the server opens the file


#: The files :func:`main` writes.
SHOTS = ("approvals-link.png", "approvals-inbox.png", "approvals-audit.png")


def main(out: Path = DOCS) -> None:
    """Write :data:`SHOTS` into ``out``."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "runs.db"
        asyncio.run(created(db))
        with uikit.ui_server(db, "uikit:expense", "--token", TOKEN,
                             env={"DURABLE_FLOW_SECRET": SECRET}) as url, \
                uikit.browser() as browser:
            with ThreadPoolExecutor(1) as pool:  # Playwright's loop runs in this thread
                link, run_id = pool.submit(asyncio.run, fill(db, url)).result()
            page = browser.new_page(viewport={"width": 1100, "height": 800})
            page.goto(link)
            page.screenshot(path=str(out / "approvals-link.png"), full_page=True)
            page.goto(url + "/login")
            page.get_by_label("Name").fill("alice")
            page.get_by_label("Password").fill(ALICE_PW)
            page.get_by_role("button", name="Log in").click()
            page.goto(url + "/")  # where she lands: the "Mine" tab
            page.screenshot(path=str(out / "approvals-inbox.png"), full_page=True)
            page = browser.new_page(viewport={"width": 1100, "height": 800})
            page.goto(url + "/login")
            page.get_by_label("Access token").fill(TOKEN)
            page.get_by_role("button", name="Log in").click()
            page.goto(f"{url}/runs/{run_id}")
            page.locator("section.decisions").screenshot(path=str(out / "approvals-audit.png"))
    print(f"wrote {', '.join(SHOTS)} into {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else DOCS)
