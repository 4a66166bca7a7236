"""Write docs/modules.md, the module index, from the package's module docstrings.

Each module opens with a docstring whose first line says what it is for; the
index lists them folder by folder, so the map in docs/architecture.md can stay
one page and the index stays true (tests/test_docs.py checks that the file is
what this script writes). Run ``python docs/modules.py`` after adding, moving
or re-describing a module.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "durable_flow"
TARGET = ROOT / "docs" / "modules.md"

HEADER = """# Module index

Every module of the package, folder by folder, with the first line of its
docstring. [The architecture page](architecture.md) is the map; this is the
index. It is written by `python docs/modules.py` (a test checks that it is
current).
"""


def summary(path: Path) -> str:
    """The first line of a module's docstring (empty when it has none)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    return doc.strip().splitlines()[0].strip() if doc else ""


def folders() -> dict[str, list[Path]]:
    """The package's modules by folder (relative to the package), folders sorted."""
    found: dict[str, list[Path]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        found.setdefault(str(path.parent.relative_to(ROOT)), []).append(path)
    return dict(sorted(found.items()))


def render() -> str:
    """The whole index as Markdown."""
    parts = [HEADER]
    for folder, paths in folders().items():
        parts.append(f"\n## `{folder}/`\n\n| module | what it is |\n| --- | --- |\n")
        for path in sorted(paths, key=lambda p: (p.name != "__init__.py", p.name)):
            text = summary(path).replace("|", "\\|")
            parts.append(f"| `{path.name}` | {text} |\n")
    return "".join(parts)


def main(argv: list[str]) -> int:
    """Write the index (``--check``: exit 1 when the file is not current, writing nothing)."""
    text = render()
    if "--check" in argv:
        return 0 if TARGET.exists() and TARGET.read_text(encoding="utf-8") == text else 1
    TARGET.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
