"""The approver's screens in a finance approver's words (in-process, on a memory store).

Titles and who asked come first, run ids after; no class names, no
"payload", no "queued ... worker"; after an answer the page says what
happens next; the "mine" and "all" tabs say which is shown, and "all" holds
every request of the runs a person may read; a form's problems come at once.
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import jwt as pyjwt
from pydantic import BaseModel, Field

from durable_flow import END, Blackboard, MemoryStore, Policy, Runtime, WorkflowBuilder
from durable_flow.ui import create_app
from durable_flow.ui._bearer import JwtVerifier

JWT_KEY = "jwt-key-0123456789abcdef0123456789abcdef"
ADMIN = {"authorization": "Bearer admin-token-1"}
STYLE = Path(__file__).resolve().parents[2] / "durable_flow" / "ui" / "static" / "style.css"


class FinanceAnswer(BaseModel):
    approved: bool
    note: str = Field(default="", max_length=8)
    cost_center: int


class Claim(Blackboard):
    claimant: str = ""
    amount: int = 0
    verdict: Any = None


def claim_flow(**asks: Any) -> Any:
    b = WorkflowBuilder("expense", state=Claim, viewers=("audit",))

    @b.node()
    async def approve(state: Claim, ctx: Any) -> dict[str, Any]:
        claim = {"question": f"Approve {state.amount} EUR for {state.claimant}?",
                 "amount": state.amount, "claimant": state.claimant}
        answer = await ctx.request(claim, FinanceAnswer, **(asks or {"roles": ["finance"]}))
        return {"verdict": answer.model_dump()}

    b.set_entry("approve").add_edge("approve", END)
    return b.build()


def person(sub: str, *roles: str) -> dict[str, str]:
    claims = {"sub": sub, "roles": list(roles), "exp": int(time.time()) + 3600}
    return {"authorization": f"Bearer {pyjwt.encode(claims, JWT_KEY, algorithm='HS256')}"}


FAY = person("fay", "finance")


@asynccontextmanager
async def app_on(store: Any, *workflows: Any) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(store, workflows=list(workflows), token="admin-token-1",
                     jwt=JwtVerifier(JWT_KEY, public=False))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as c:
            yield c


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([0-9a-f]+)"', html)
    assert found, html
    return found.group(1)


def visible_text(page: str) -> str:
    """The words a person reads: no tags, no attribute values."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


async def test_a_card_reads_title_who_asked_and_amount_first_in_plain_words() -> None:
    store = MemoryStore()
    async with Runtime(store) as rt:
        run = await rt.run(claim_flow(), {"claimant": "erik", "amount": 900}, by="erik")
        async with app_on(store) as client:
            page = await client.get("/", headers=FAY)
    text = visible_text(page.text)
    for word in ("FinanceAnswer", "payload", "queued", "worker"):
        assert word not in text, word
    title = text.index("Approve 900 EUR for erik?")
    assert title < text.index("asked by erik") < text.index("Amount 900") < text.index(run.run_id)
    assert "Cost Center" in text and "Claimant erik" in text
    assert text.count("Approve 900 EUR for erik?") == 1  # the question is the title, once
    assert f"run {run.run_id} · step approve" in text  # the step says what it is


async def test_after_approve_or_reject_the_page_says_what_happens_next() -> None:
    store = MemoryStore()
    flow = claim_flow()
    async with Runtime(store) as rt:
        yes = await rt.run(flow, {"claimant": "erik", "amount": 900}, by="erik")
        no = await rt.run(flow, {"claimant": "ida", "amount": 50})
        outcomes = []
        async with app_on(store, flow) as client:
            csrf = csrf_of((await client.get("/", headers=FAY)).text)
            for run, approved in ((yes, "true"), (no, "false")):
                card = await client.post("/respond", headers={**FAY, "hx-request": "true"}, data={
                    "csrf_token": csrf, "run_id": run.run_id,
                    "request_id": run.pending_requests[0].id, "answer/approved": approved,
                    "answer/cost_center": "4711"})
                assert card.status_code == 200, card.text
                outcomes.append(visible_text(card.text))
        async with app_on(store) as client:  # no worker serves the workflow here
            later = await rt.run(flow, {"claimant": "jo", "amount": 70})
            csrf = csrf_of((await client.get("/", headers=FAY)).text)
            card = await client.post("/respond", headers={**FAY, "hx-request": "true"}, data={
                "csrf_token": csrf, "run_id": later.run_id,
                "request_id": later.pending_requests[0].id, "answer/approved": "true",
                "answer/cost_center": "1"})
            outcomes.append(visible_text(card.text))
    assert "Approved. The run goes on now. See the run" in outcomes[0]
    assert "asked by erik" in outcomes[0]  # the answered card still says who asked
    assert "Rejected. The run goes on now." in outcomes[1]
    assert ("Approved. The run goes on as soon as the service that runs expense picks it up."
            in outcomes[2])
    assert not any("worker" in o or "queued" in o for o in outcomes)


async def test_the_tabs_say_which_is_shown_and_all_holds_every_request_one_may_read() -> None:
    store = MemoryStore()
    async with Runtime(store) as rt:
        await rt.run(claim_flow(), {"claimant": "erik", "amount": 900})
        # a claim fay started, waiting for a manager: hers to see, not to answer
        theirs = await rt.run(claim_flow(roles=["manager"]), {"claimant": "fay", "amount": 80},
                              by="fay")
        # a run only auditors may read: not in fay's inbox at all
        await rt.run(claim_flow(assignees=["cfo"]), {"claimant": "kim", "amount": 5})
        async with app_on(store) as client:
            landing = await client.get("/", headers=FAY)  # an approver lands on "mine"
            every = await client.get("/?tab=all", headers=FAY)
            auditor = await client.get("/?tab=all", headers=person("vic", "audit"))
            admin = await client.get("/", headers=ADMIN)
            api = await client.get("/api/inbox?tab=all", headers=FAY)
    assert re.search(r'aria-current="page" data-tab="mine"', landing.text)
    assert 'aria-current="page" data-tab="all"' not in landing.text
    assert "Waiting for you: 1 request" in visible_text(landing.text)
    assert "Approve 80 EUR for fay?" not in landing.text
    assert 'aria-current="page" data-tab="all"' in every.text
    text = visible_text(every.text)
    assert "All open requests you may see: 2" in text
    assert "Approve 80 EUR for fay?" in text and "Approve 5 EUR for kim?" not in text
    assert "This is for role manager: you can see it, not answer it." in text
    assert every.text.count('name="request_id"') == 1  # a form only on the one hers to answer
    assert "All open requests you may see: 3" in visible_text(auditor.text)
    assert 'aria-current="page" data-tab="all"' in admin.text  # the admin lands on everything
    assert "All open requests: 3" in visible_text(admin.text)
    assert {r["run_id"] for r in api.json()["requests"]} >= {theirs.run_id}
    css = STYLE.read_text()
    assert ".tabs a[aria-current]" in css  # the tab shown looks different from the other


async def test_every_problem_of_an_answer_comes_back_at_once_beside_its_field() -> None:
    store = MemoryStore()
    async with Runtime(store) as rt:
        run = await rt.run(claim_flow(), {"claimant": "erik", "amount": 900})
        async with app_on(store) as client:
            csrf = csrf_of((await client.get("/", headers=FAY)).text)
            card = await client.post("/respond", headers={**FAY, "hx-request": "true"}, data={
                "csrf_token": csrf, "run_id": run.run_id,
                "request_id": run.pending_requests[0].id, "answer/approved": "true",
                "answer/note": "far too long a note", "answer/cost_center": "forty"})
            again = await client.get("/", headers=FAY)
    assert card.status_code == 422
    problems = {k: html.unescape(v)
                for k, v in re.findall(r'data-error-for="([^"]+)">([^<]+)<', card.text)}
    assert problems == {"answer/note": "'far too long a note' is too long",
                        "answer/cost_center": "enter a whole number, not 'forty'"}
    assert "data-error-for" not in again.text  # shown again, the form has no old problems


async def test_error_pages_say_what_is_wrong_without_class_names() -> None:
    store = MemoryStore()
    async with Runtime(store), app_on(store, claim_flow()) as client:
        page = await client.get("/runs/no-such-run", headers=ADMIN)
        api = await client.get("/api/runs/no-such-run", headers=ADMIN)
        start = await client.get("/start/expense", headers=FAY)
    assert page.status_code == 404
    assert "Error" not in visible_text(page.text)
    assert "There is no run no-such-run, or it is not one you may see." in page.text
    assert api.status_code == 404 and api.json()["error"] == "RunNotFoundError"
    text = visible_text(start.text)
    assert "queued" not in text and "worker" not in text and "Blackboard" not in text
    assert "the run starts here" in text


class Expense(Blackboard):
    claimant: str
    amount: int = 0
    reason: str = ""
    approved: bool | None = None  # the run decides it
    decided_by: str = ""  # written by a node that says so (produces=)


def expense_flow() -> Any:
    b = WorkflowBuilder("claim", state=Expense)

    @b.node(produces=["approved", "decided_by"])
    async def decide(state: Expense) -> dict[str, Any]:
        return {"approved": state.amount < 100, "decided_by": "policy"}

    b.set_entry("decide").add_edge("decide", END)
    return b.build()


async def test_the_start_form_offers_only_what_the_person_starting_the_run_gives() -> None:
    store = MemoryStore()
    async with Runtime(store) as rt, app_on(store, expense_flow()) as client:
        page = await client.get("/start/claim", headers=FAY)
        offered = set(re.findall(r'name="answer/([a-z_]+)"', page.text))
        sent = await client.post("/start/claim", headers=FAY, data={
            "csrf_token": csrf_of(page.text), "answer/claimant": "fay", "answer/amount": "40",
            "answer/reason": "taxi"})
        assert sent.status_code == 303, sent.text
        run_id = sent.headers["location"].rsplit("/", 1)[-1]
        await rt.wait(run_id, timeout=10)
        values = (await rt.get_state(run_id)).values
    # the run fills in approved (default None) and decided_by (produces=); claimant is required
    assert offered == {"claimant", "amount", "reason"}
    assert (values["claimant"], values["reason"], values["approved"]) == ("fay", "taxi", True)


def section(page: str, css_class: str) -> str:
    found = re.search(rf'<section class="{css_class}">(.*?)</section>', page, re.S)
    assert found, page
    return found.group(1)


async def test_the_decisions_read_as_sentences_and_keep_the_records_folded() -> None:
    store = MemoryStore()
    async with Runtime(store) as rt:
        run = await rt.run(claim_flow(), {"claimant": "erik", "amount": 900}, by="erik")
        rid = run.pending_requests[0].id
        await rt.reassign(run.run_id, rid, roles=["finance"], by="admin")
        small = await rt.run(claim_flow(roles=["finance"], policy=Policy(
            "small", "amount < 100", {"approved": True, "cost_center": 1})),
            {"claimant": "ida", "amount": 50})
        async with app_on(store) as client:
            csrf = csrf_of((await client.get("/", headers=FAY)).text)
            await client.post("/respond", headers={**FAY, "hx-request": "true"}, data={
                "csrf_token": csrf, "run_id": run.run_id, "request_id": rid,
                "answer/approved": "false", "answer/note": "no bill", "answer/cost_center": "4711",
                "comment": "receipt missing"})
            page = (await client.get(f"/runs/{run.run_id}", headers=ADMIN)).text
            by_policy = (await client.get(f"/runs/{small.run_id}", headers=ADMIN)).text
    trail = section(page, "decisions")
    shown = visible_text(re.sub(r"<details.*?</details>", "", trail, flags=re.S))
    assert "admin Gave \u201cApprove 900 EUR for erik?\u201d to role finance" in shown
    assert ("fay Rejected \u201cApprove 900 EUR for erik?\u201d in the web app "
            "Note no bill Cost center 4711 receipt missing") in shown
    for engineer in (rid, '"', "{", "answer", "api", "ui", "reassign"):  # no ids, JSON or kinds
        assert engineer not in shown.lower(), engineer
    raw = re.search(r'<details class="raw">(.*?)</details>', trail, re.S)
    assert raw and '"cost_center": 4711' in html.unescape(raw.group(1))
    assert rid in html.unescape(raw.group(1))  # the stored records stay there for engineers
    policy = visible_text(section(by_policy, "decisions"))
    assert ("policy small Approved \u201cApprove 50 EUR for ida?\u201d automatically, by a rule of "
            "the workflow Cost center 1 The records") in policy  # a field left empty is not shown


def run_text(page: str) -> str:
    """The words of a run page, from its heading on (not the window's title)."""
    return visible_text(page[page.index('<div id="run-main"'):])


async def test_the_run_page_says_where_the_run_stands_before_its_internals() -> None:
    store = MemoryStore()
    async with Runtime(store) as rt:
        run = await rt.run(claim_flow(), {"claimant": "erik", "amount": 900}, by="erik")
        other = await rt.run(claim_flow(roles=["manager"]), {"claimant": "fay", "amount": 80},
                             by="fay")
        async with app_on(store) as client:
            mine = run_text((await client.get(f"/runs/{run.run_id}", headers=FAY)).text)
            theirs = run_text((await client.get(f"/runs/{other.run_id}", headers=FAY)).text)
        async with app_on(store, claim_flow()) as client:
            csrf = csrf_of((await client.get("/", headers=FAY)).text)
            await client.post("/respond", headers=FAY, data={
                "csrf_token": csrf, "run_id": run.run_id,
                "request_id": run.pending_requests[0].id, "answer/approved": "true",
                "answer/cost_center": "7"})
            await rt.wait(run.run_id, timeout=10)
            done = run_text((await client.get(f"/runs/{run.run_id}", headers=FAY)).text)
    summary = ("Waiting for an answer to \u201cApprove 900 EUR for erik?\u201d "
               "(yours to answer, below).")
    assert mine.index("expense started by erik") < mine.index(summary) < mine.index(run.run_id)
    first = mine.index(summary)
    assert first < mine.index("Send answer") < mine.index("Inside the run")
    for internal in ("Superstep timeline", "Blackboard", "Graph", "Node histories"):
        assert mine.index("Inside the run") < mine.index(internal), internal  # all still there
    assert ("Waiting for an answer to \u201cApprove 80 EUR for fay?\u201d (for role manager)."
            in theirs)
    assert "Finished." in done and done.index("Finished.") < done.index("Decisions")
