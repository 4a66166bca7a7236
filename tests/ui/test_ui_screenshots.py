"""The guides' screenshot scripts run (Chromium against ``durable-flow ui``), so they cannot rot."""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.browser

DOCS = Path(__file__).resolve().parents[2] / "docs"
PNG = b"\x89PNG\r\n\x1a\n"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"docs_{name}", DOCS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def size_of(png: bytes) -> tuple[int, int]:
    """A PNG's width and height (its IHDR chunk comes first)."""
    assert png[:8] == PNG and png[12:16] == b"IHDR", png[:16]
    width, height = struct.unpack(">II", png[16:24])
    return width, height


def test_the_approvals_screenshots_are_taken_into_a_folder(tmp_path: Path) -> None:
    script = load("screenshots_approvals")
    script.main(tmp_path)
    sizes = {name: size_of((tmp_path / name).read_bytes()) for name in script.SHOTS}
    for page in ("approvals-link.png", "approvals-inbox.png", "approvals-refused.png",
                 "approvals-live.png"):  # whole pages (the 403 card, a live stream)
        assert sizes[page][0] >= 1000, page
    width, height = sizes["approvals-audit.png"]  # the decisions table only
    assert width >= 600 and height >= 60
    for name in script.SHOTS:
        # a page with text and tables, not a blank or error page (those compress to a few KB)
        assert (tmp_path / name).stat().st_size > 12_000, name
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(script.SHOTS)


def test_the_ui_screenshots_are_taken_into_a_folder(tmp_path: Path) -> None:
    script = load("screenshots")
    script.main(tmp_path)
    for name in script.SHOTS:
        width, _ = size_of((tmp_path / name).read_bytes())
        assert width >= 1000 and (tmp_path / name).stat().st_size > 12_000, name
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(script.SHOTS)
