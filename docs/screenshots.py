"""Take the web UI screenshots in docs/: ``python docs/screenshots.py [FOLDER]``.

Fills a temporary database with a few runs of the test workflows
(``tests/uikit.py``), serves ``durable-flow ui`` on it and photographs the
inbox and a run page with headless Chromium (the same setup as the browser
tests). They go to ``docs/`` unless a folder is given (the tests take them
into a temporary one).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent / "tests"))

import uikit  # noqa: E402

from durable_flow import Runtime, SqliteStore  # noqa: E402


async def fill(db: Path) -> str:
    async with Runtime(SqliteStore(db)) as rt:
        done = await rt.run(uikit.approval, {"topic": "the spring catalogue"})
        await rt.resume(uikit.approval, done.run_id, responses={done.pending_requests[0].id: True})
        await rt.run(uikit.review, {"title": "Durable workflows in practice"})
        await rt.run(uikit.parent, {"topic": "the supplier contract"})
        shown = await rt.run(uikit.approval, {"topic": "tides <script>alert(1)</script>"})
        return shown.run_id


#: The files :func:`main` writes.
SHOTS = ("ui-inbox.png", "ui-run.png")


def main(out: Path = DOCS) -> None:
    """Write :data:`SHOTS` into ``out``."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "runs.db"
        run_id = asyncio.run(fill(db))
        with uikit.ui_server(db, *uikit.TARGETS) as url, uikit.browser() as browser:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(url + "/")
            page.screenshot(path=str(out / "ui-inbox.png"), full_page=True)
            page.goto(f"{url}/runs/{run_id}")
            page.wait_for_selector("div.mermaid svg")
            page.screenshot(path=str(out / "ui-run.png"), full_page=True)
    print(f"wrote {', '.join(SHOTS)} into {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else DOCS)
