"""The web inbox in a real browser: headless Chromium against ``durable-flow ui`` in a subprocess."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Coroutine, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import uikit
from uikit import expect

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

from durable_flow import (
    END,
    Blackboard,
    ChatChunk,
    ChatResponse,
    Message,
    RunNotFoundError,
    RunStatus,
    Runtime,
    SqliteStore,
    WorkflowBuilder,
)

pytestmark = pytest.mark.browser

TOKEN = "browser-token-123"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ui") / "runs.db"


@pytest.fixture(scope="module")
def url(db: Path) -> Iterator[str]:
    run_async(_setup(db))  # the database exists before the server opens it
    with uikit.ui_server(db, *uikit.TARGETS) as base:
        yield base


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with uikit.browser() as b:
        yield b


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    p = context.new_page()
    p.set_default_timeout(10_000)
    yield p
    context.close()


def run_async(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine to its end; in a thread, as Playwright's loop runs in this one."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


async def _setup(db: Path) -> None:
    async with Runtime(SqliteStore(db)):
        pass


def start(db: Path, workflow: Any, input: dict[str, Any]) -> Any:
    async def go() -> Any:
        async with Runtime(SqliteStore(db)) as rt:
            return await rt.run(workflow, input)

    return run_async(go())


def state(db: Path, run_id: str) -> tuple[RunStatus, dict[str, Any], list[str]]:
    async def go() -> tuple[RunStatus, dict[str, Any], list[str]]:
        async with Runtime(SqliteStore(db)) as rt:
            info = await rt.get_run(run_id)
            snap = await rt.get_state(run_id)
            return info.status, snap.values, [r.id for r in snap.pending_requests]

    return run_async(go())


def card(page: Page, run_id: str) -> Any:
    return page.locator("article.request", has_text=run_id)


def test_an_answer_given_in_the_page_completes_the_run(page: Page, url: str, db: Path) -> None:
    run = start(db, uikit.approval, {"topic": "tides"})
    page.goto(url + "/")
    item = card(page, run.run_id)
    expect(item).to_contain_text("Publish tides?")
    item.get_by_label("yes").check()
    item.get_by_role("button", name="Send answer").click()
    expect(card(page, run.run_id)).to_contain_text("Approved. The run goes on now.")
    card(page, run.run_id).get_by_role("link", name=run.run_id).first.click()
    expect(page.locator("#run-status")).to_have_text("completed")
    assert state(db, run.run_id)[1]["approved"] is True


def test_the_run_page_follows_a_run_answered_on_it(page: Page, url: str, db: Path) -> None:
    run = start(db, uikit.slow, {"topic": "the batch"})
    page.goto(f"{url}/runs/{run.run_id}")
    expect(page.locator("#run-status")).to_have_text("waiting")
    item = card(page, run.run_id)
    item.get_by_label("yes").check()
    item.get_by_role("button", name="Send answer").click()
    # no reload: the page polls the API and swaps its run section in as the run moves on
    expect(page.locator("#run-status")).to_have_text("running")
    expect(page.locator("#run-status")).to_have_text("completed")
    expect(page.locator(".timeline")).to_contain_text("work")


def test_a_wrong_typed_answer_shows_the_error_and_changes_nothing(
        page: Page, url: str, db: Path) -> None:
    run = start(db, uikit.review, {"title": "Tides"})
    page.goto(url + "/")
    item = card(page, run.run_id)
    item.get_by_label("Score").fill("ten")
    item.locator('select[name="answer/verdict"]').select_option("accept")
    item.get_by_role("button", name="+ add item").click()
    item.locator(".rows input[type=text]").first.fill("oceans")
    item.get_by_role("button", name="Send answer").click()
    error = card(page, run.run_id).locator('[data-error-for="answer/score"]')
    expect(error).to_have_text("enter a whole number, not 'ten'")
    assert state(db, run.run_id)[0] is RunStatus.WAITING
    assert len(state(db, run.run_id)[2]) == 1
    item = card(page, run.run_id)  # the form came back with what was typed
    expect(item.locator(".rows input[type=text]").first).to_have_value("oceans")
    item.get_by_label("Score").fill("8")
    # the old problem goes as the field changes, before the form is sent again
    expect(item.locator('[data-error-for="answer/score"]')).to_have_count(0)
    expect(item.locator('.field.invalid')).to_have_count(0)
    item.get_by_role("button", name="Send answer").click()
    expect(card(page, run.run_id)).to_contain_text("Your answer is recorded. The run goes on")
    page.goto(f"{url}/runs/{run.run_id}")
    expect(page.locator("#run-status")).to_have_text("completed")
    values = state(db, run.run_id)[1]
    assert (values["score"], values["verdict"], values["tags"]) == (8, "accept", ["oceans"])


def test_a_nested_request_is_answered_from_the_inbox(page: Page, url: str, db: Path) -> None:
    run = start(db, uikit.parent, {"topic": "the lease"})
    page.goto(url + "/?workflow=contract")
    item = card(page, run.run_id)
    expect(item.locator(".node")).to_have_text("legal.sign")
    item.get_by_label("yes").check()
    item.get_by_role("button", name="Send answer").click()
    expect(card(page, run.run_id)).to_contain_text("Approved.")
    page.goto(f"{url}/runs/{run.run_id}")
    expect(page.locator("#run-status")).to_have_text("completed")
    assert state(db, run.run_id)[1]["approved"] is True


def test_a_payload_with_a_script_is_shown_as_text(page: Page, url: str, db: Path) -> None:
    evil = "<script>window.pwned = 1</script><img src=x onerror='window.pwned = 2'>"
    run = start(db, uikit.approval, {"topic": evil})
    for target in (url + "/", f"{url}/runs/{run.run_id}"):
        page.goto(target)
        expect(card(page, run.run_id).locator(".question")).to_have_text(f"Publish {evil}?")
        assert page.evaluate("window.pwned") is None
    expect(page.locator("table.values")).to_contain_text(evil)


def test_the_token_is_enforced(page: Page, db: Path) -> None:
    with uikit.ui_server(db, "--token", TOKEN) as base:
        response = page.goto(base + "/runs")
        assert response is not None and response.status == 401
        assert page.request.get(base + "/api/inbox").status == 401
        page.get_by_label("Access token").fill("wrong-token")
        page.get_by_role("button", name="Log in").click()
        expect(page.locator(".error")).to_have_text("That token is not right.")
        page.get_by_label("Access token").fill(TOKEN)
        page.get_by_role("button", name="Log in").click()
        expect(page.locator("h1")).to_have_text("Runs")
        assert page.request.get(base + "/api/inbox").status == 200


class Held:
    """Streams its words, holding after ``hold_after`` of them until ``gate`` is set."""

    name = "held"

    def __init__(self, words: list[str], hold_after: int, gate: threading.Event) -> None:
        self.words, self.hold_after, self.gate = words, hold_after, gate

    async def complete(self, messages: Sequence[Message], **_: Any) -> ChatResponse:
        raise AssertionError("streamed models are not asked to complete")

    async def stream(self, messages: Sequence[Message], **_: Any) -> AsyncIterator[ChatChunk]:
        for i, word in enumerate(self.words):
            if i == self.hold_after:
                await asyncio.to_thread(self.gate.wait, 60)
            yield ChatChunk(text=word)
        yield ChatChunk(response=ChatResponse(Message.assistant("".join(self.words))))


class Note(Blackboard):
    question: str = ""
    answer: str = ""


def wait_created(db: Path, run_id: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            state(db, run_id)
            return
        except RunNotFoundError:
            time.sleep(0.05)
    raise TimeoutError(run_id)


def test_tokens_appear_live_on_the_run_page(page: Page, url: str, db: Path) -> None:
    gate = threading.Event()
    b = WorkflowBuilder("notes", Note)
    b.add_agent("writer", Held(["Tides", " turn", " twice", " a", " day."], 3, gate),
                instructions="Write.")
    b.set_entry("writer").add_edge("writer", END)
    flow, run_id = b.build(), f"live-{time.monotonic_ns()}"

    async def go() -> Any:
        async with Runtime(SqliteStore(db)) as rt:
            return await rt.run(flow, {"question": "tides?"}, run_id=run_id)

    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(asyncio.run, go())
        try:
            wait_created(db, run_id)
            page.goto(f"{url}/runs/{run_id}")
            log = page.locator("#stream-log")
            expect(log).to_contain_text("writer Tides turn twice")
            expect(page.locator("#stream")).to_be_visible()  # shown once something streamed
            expect(page.locator("#run-summary")).to_have_text("Running: step writer is at work.")
            # the model is still holding mid-reply: what shows came live, not from the result
            assert state(db, run_id)[0] is RunStatus.RUNNING
            expect(log).not_to_contain_text("day.")
        finally:
            gate.set()
        assert running.result(timeout=60).status is RunStatus.COMPLETED
    expect(log).to_contain_text("writer Tides turn twice a day.")
    expect(page.locator("#stream-state")).to_have_text("ended")
    expect(log.locator(".delta")).to_have_count(1)  # one attempt: nothing shown twice
    expect(page.locator("#run-status")).to_have_text("completed")
