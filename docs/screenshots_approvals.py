"""Take the screenshots of the Approvals guide: ``python docs/screenshots_approvals.py [FOLDER]``.

A finance approver's inbox (signed in as alice, of the finance role: the
claims waiting for her), the page a signed link opens, a run page with its
decisions, the card refused when alice answers a claim given to the managers
meanwhile, and the page of a run whose agent is still writing (its stream,
live), from headless Chromium
against ``durable-flow ui`` (the browser tests' setup, ``tests/uikit.py``).
They go to ``docs/`` unless a folder is given (the tests take them into a
temporary one, so this script cannot rot unnoticed).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent / "tests"))

import uikit  # noqa: E402

from durable_flow import (  # noqa: E402
    END,
    Blackboard,
    ChatChunk,
    ChatResponse,
    Message,
    Principal,
    RunNotFoundError,
    Runtime,
    SqliteStore,
    ToolCall,
    WorkflowBuilder,
)
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
        fred = await rt.run(uikit.expense, {"claimant": "fred", "amount": 650}, by="fred")
        return link, decided.run_id, fred.run_id


class Claim(Blackboard):
    claimant: str = ""
    amount: int = 0
    answer: str = ""


def receipts(claimant: str) -> str:
    """The receipts a claimant sent in."""
    return "hotel 620 EUR, train 180 EUR, meals 100 EUR"


NOTE = ("The three receipts add up to 900 EUR: hotel 620, train 180 and meals 100, all dated "
        "within the conference week. The hotel is over the travel policy's 150 EUR a night")


class Checker:
    """Looks the receipts up, then writes its note a word at a time.

    It holds two thirds of the way until ``gate`` is set, so the page is
    taken while the note is still coming.
    """

    name = "checker"

    def __init__(self, gate: threading.Event) -> None:
        self.gate = gate

    async def complete(self, messages: Sequence[Message], **_: Any) -> ChatResponse:
        raise AssertionError("the checker streams")

    async def stream(self, messages: Sequence[Message], **_: Any) -> AsyncIterator[ChatChunk]:
        if not any(m.role == "tool" for m in messages):
            call = ToolCall(id="r1", name="receipts", arguments={"claimant": "erik"})
            yield ChatChunk(response=ChatResponse(Message.assistant("", tool_calls=[call])))
            return
        words = [w + " " for w in NOTE.split(" ")]
        for i, word in enumerate(words):
            if i == len(words) * 2 // 3:
                await asyncio.to_thread(self.gate.wait, 60)
            yield ChatChunk(text=word)
        yield ChatChunk(response=ChatResponse(Message.assistant("".join(words))))


def checking(gate: threading.Event) -> Any:
    """A claim's receipts checked by an agent before anyone is asked."""
    b = WorkflowBuilder("expense_check", state=Claim)
    b.add_agent("checker", Checker(gate), instructions="Check the receipts of the claim.",
                input_template="{claimant} claims {amount} EUR", tools=[receipts])
    b.set_entry("checker").add_edge("checker", END)
    return b.build()


async def check(db: Path, gate: threading.Event, run_id: str) -> None:
    async with Runtime(SqliteStore(db)) as rt:
        await rt.run(checking(gate), {"claimant": "erik", "amount": 900}, by="erik",
                     run_id=run_id)


async def started(db: Path, run_id: str) -> None:
    """Until the run's note has begun to stream (the page then shows it coming)."""
    async with Runtime(SqliteStore(db)) as rt:
        for _ in range(600):
            try:
                if any(e.kind == "model_delta" for e in await rt.read_stream(run_id)):
                    return
            except RunNotFoundError:  # not created yet
                pass
            await asyncio.sleep(0.05)
    raise TimeoutError(run_id)


async def reassign_first(db: Path, run_id: str) -> None:
    """The admin gives a claim alice sees in her inbox to the managers."""
    async with Runtime(SqliteStore(db)) as rt:
        (req,) = [r for r in await rt.pending_requests() if r.run_id == run_id]
        await rt.reassign(run_id, req.id, roles=["manager"], by="admin")


async def created(db: Path) -> None:
    async with Runtime(SqliteStore(db)):
        pass  # the schema exists before the server opens the file


#: The files :func:`main` writes.
SHOTS = ("approvals-link.png", "approvals-inbox.png", "approvals-audit.png",
         "approvals-refused.png", "approvals-live.png")


def main(out: Path = DOCS) -> None:
    """Write :data:`SHOTS` into ``out``."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "runs.db"
        asyncio.run(created(db))
        with uikit.ui_server(db, "uikit:expense", "--token", TOKEN,
                             env={"DURABLE_FLOW_SECRET": SECRET}) as url, \
                uikit.browser() as browser:
            with ThreadPoolExecutor(1) as pool:  # Playwright's loop runs in this thread
                link, run_id, fred = pool.submit(asyncio.run, fill(db, url)).result()
            page = browser.new_page(viewport={"width": 1100, "height": 800})
            page.goto(link)
            page.screenshot(path=str(out / "approvals-link.png"), full_page=True)
            page.goto(url + "/login")
            page.get_by_label("Name").fill("alice")
            page.get_by_label("Password").fill(ALICE_PW)
            page.get_by_role("button", name="Log in").click()
            page.goto(url + "/")  # where she lands: the "Mine" tab
            page.screenshot(path=str(out / "approvals-inbox.png"), full_page=True)
            # meanwhile fred's claim goes to the managers; alice answers it from the page she has
            with ThreadPoolExecutor(1) as pool:
                pool.submit(asyncio.run, reassign_first(db, fred)).result()
            card = page.locator("article.request", has_text="Approve 650 EUR for fred?")
            card.get_by_label("yes").check()
            card.get_by_role("button", name="Send answer").click()
            page.locator("p.refused").wait_for()
            page.screenshot(path=str(out / "approvals-refused.png"), full_page=True)
            page = browser.new_page(viewport={"width": 1100, "height": 800})
            page.goto(url + "/login")
            page.get_by_label("Access token").fill(TOKEN)
            page.get_by_role("button", name="Log in").click()
            page.goto(f"{url}/runs/{run_id}")
            page.locator("section.decisions").screenshot(path=str(out / "approvals-audit.png"))
            gate, live = threading.Event(), "expense-check-erik"
            with ThreadPoolExecutor(2) as pool:
                running = pool.submit(asyncio.run, check(db, gate, live))
                try:
                    pool.submit(asyncio.run, started(db, live)).result()
                    page.goto(f"{url}/runs/{live}")
                    page.locator("#stream-log .delta").wait_for()
                    page.locator("#stream-state", has_text="live").wait_for()
                    log = page.locator("#stream-log").inner_text()
                    assert "checker uses receipts (claimant: erik)" in log, log  # in words
                    assert "receipts answered: hotel 620 EUR" in log, log
                    page.screenshot(path=str(out / "approvals-live.png"))  # what shows first
                finally:
                    gate.set()
                running.result(timeout=60)
    print(f"wrote {', '.join(SHOTS)} into {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else DOCS)
