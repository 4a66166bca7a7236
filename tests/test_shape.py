"""Classes kept whole: none over ~400 lines, and no module reaches into another's private names.

A class that outgrows the limit is split by meaning (a collaborator of its
own), not spread over modules; a module uses another module's objects
through their public names. ``x._name`` is a reach unless the module itself
defines ``_name`` (a function, a class, a method, a class attribute or an
attribute it sets on ``self``/``cls``): then it is the module's own, used on
another instance of its class.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "durable_flow"
MAX_CLASS_LINES = 400
#: private names of the standard library's public API (namedtuple, os)
STDLIB_API = {"_replace", "_asdict", "_fields", "_make", "_exit"}


def big_classes(package: Path = PACKAGE) -> dict[str, int]:
    """``module:Class`` -> lines, for each class over the limit."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_CLASS_LINES:
                    out[f"{path.relative_to(package)}:{node.name}"] = lines
    return out


def own_names(tree: ast.Module) -> set[str]:
    """The names a module defines: functions, classes, their attributes, module globals."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)  # module globals, class attributes (and locals: harmless)
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
              and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            names.add(node.attr)
    return names


def private_reaches(package: Path = PACKAGE) -> list[str]:
    """``module:line obj._name`` for each use of a private name another module defines."""
    out = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text())
        own = own_names(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__") and node.attr not in STDLIB_API):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            if node.attr in own:
                continue
            out.append(f"{path.relative_to(package)}:{node.lineno} {ast.unparse(node)}")
    return out


def test_no_class_is_over_the_limit() -> None:
    assert big_classes() == {}


def test_no_module_reaches_into_another_modules_private_attributes() -> None:
    assert private_reaches() == []


def test_a_big_class_and_a_reach_are_reported(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_CLASS_LINES))
    (tmp_path / "big.py").write_text(f"class Big:\n{body}\n")
    (tmp_path / "mod.py").write_text(
        "class Own:\n"
        "    def __init__(self) -> None:\n        self._mine = 1\n\n"
        "    def same(self, other: 'Own') -> int:\n        return other._mine\n\n\n"
        "def reach(ctx: object) -> object:\n"
        "    ctx._theirs = 2\n    return ctx._io  # noqa\n")
    assert big_classes(tmp_path) == {"big.py:Big": MAX_CLASS_LINES + 1}
    assert private_reaches(tmp_path) == ["mod.py:10 ctx._theirs", "mod.py:11 ctx._io"]
