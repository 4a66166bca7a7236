"""The package's layout rules: small modules."""

from __future__ import annotations

from pathlib import Path

import durable_flow

PACKAGE = Path(durable_flow.__file__).resolve().parent
MAX_LINES = 600


def test_every_module_is_under_the_line_limit() -> None:
    sizes = {str(path.relative_to(PACKAGE)): len(path.read_text(encoding="utf-8").splitlines())
             for path in PACKAGE.rglob("*.py")}
    assert len(sizes) > 40  # the walk found the package
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}
