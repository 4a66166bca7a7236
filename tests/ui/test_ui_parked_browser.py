"""A parked task on the run page in a real browser: listed, and drawn parked on the graph."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import uikit
from uikit import expect

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

from durable_flow import RunStatus, Runtime, SqliteStore

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ui-parked") / "runs.db"


@pytest.fixture(scope="module")
def run(db: Path) -> Any:
    async def go() -> Any:
        async with Runtime(SqliteStore(db)) as rt:
            return await rt.run(uikit.research, {"topic": "roofs"})

    # before the server, so the database exists when it opens it; in a thread, as
    # Playwright's loop may run in this one
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, go()).result()


@pytest.fixture(scope="module")
def url(db: Path, run: Any) -> Iterator[str]:
    with uikit.ui_server(db, "uikit:research") as base:
        yield base


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with uikit.browser() as b:
        yield b


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    p = context.new_page()
    p.set_default_timeout(15_000)
    yield p
    context.close()


def test_the_run_page_lists_the_parked_task_and_draws_it_parked(
        page: Page, url: str, run: Any) -> None:
    assert run.status is RunStatus.WAITING
    [request] = run.pending_requests
    page.goto(f"{url}/runs/{run.run_id}")
    row = page.locator('#parked tr[data-node="approve"]')
    expect(row).to_contain_text("superstep #2")
    expect(row).to_contain_text(request.id)
    parked = page.locator("#graph svg g.node.parked")  # Mermaid puts the class on the node
    expect(parked).to_have_count(1)
    expect(parked).to_contain_text("approve")
    expect(page.locator("#graph svg g.node.parked", has_text="check")).to_have_count(0)
