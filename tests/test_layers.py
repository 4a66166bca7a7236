"""The package's folders are layers: each module imports only from its own layer or lower.

Every import counts, at the top of a module or inside a function (a lazy import
is still a dependency), so the map in docs/architecture.md stays true.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "durable_flow"

# lowest first; a unit is a folder (or a top-level module) of the package
LAYERS: list[set[str]] = [
    {"errors", "_logs", "_version"},
    {"model"},
    {"store"},  # the contract: protocols, rows, the run state machine
    {"engine"},
    {"transforms", "agents"},
    {"building"},
    {"store.sql"},
    {"store.sqlite", "store.postgres"},
    {"store.memory"},
    {"runtime.observability", "runtime.people"},
    {"runtime.notifications"},
    {"runtime"},
    {"testing"},
    {"ui"},
    {"cli"},
    {"__main__", "__init__"},
]
RANK = {unit: n for n, layer in enumerate(LAYERS) for unit in layer}
SUBFOLDERS = {"store": {"sql", "sqlite", "postgres", "memory"},
              "runtime": {"people", "notifications", "observability"}}


def unit_of(parts: list[str]) -> str:
    """The layer unit of a module path inside the package (``["store", "sql", "_base"]``)."""
    if not parts or parts == ["__init__"]:
        return "__init__"
    head = parts[0]
    if len(parts) > 1 and parts[1] in SUBFOLDERS.get(head, ()):
        return f"{head}.{parts[1]}"
    return head


def imported(path: Path, package: Path = PACKAGE) -> list[tuple[int, list[str], list[str]]]:
    """(line, module path inside the package, names) of every import of the package in ``path``.

    ``names`` are those of ``from ... import names``; none for ``import ...``.
    """
    rel = list(path.relative_to(package).with_suffix("").parts)
    here = rel[:-1]  # the package the module is in
    found: list[tuple[int, list[str], list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                target = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.split(".")[0] == "durable_flow":
                target = node.module.split(".")[1:]
            else:
                continue
            if not target:  # ``from durable_flow import X``: the names' own modules
                target = ["__init__"]
            found.append((node.lineno, target, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[1:], []) for alias in node.names
                      if alias.name.split(".")[0] == "durable_flow"]
    return found


def imports_of(path: Path, package: Path = PACKAGE) -> list[tuple[int, list[str]]]:
    """(line, module path inside the package) of every import of the package in ``path``."""
    return [(line, target) for line, target, _names in imported(path, package)]


def test_every_folder_of_the_package_has_a_layer() -> None:
    units = {unit_of(list(p.relative_to(PACKAGE).with_suffix("").parts))
             for p in PACKAGE.rglob("*.py")}
    assert units - set(RANK) == set()


def upward_imports(package: Path = PACKAGE) -> list[str]:
    """Every import in ``package`` of a module in a layer above the importing one."""
    wrong = []
    for path in sorted(package.rglob("*.py")):
        source = unit_of(list(path.relative_to(package).with_suffix("").parts))
        for line, target in imports_of(path, package):
            dest = unit_of(target)
            if RANK[dest] > RANK[source]:
                wrong.append(f"{path.relative_to(package)}:{line} ({source}) imports "
                             f"{'.'.join(target)} ({dest})")
    return wrong


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    assert upward_imports() == []


def test_an_upward_import_is_reported_even_inside_a_function(tmp_path: Path) -> None:
    package = tmp_path / "durable_flow"
    (package / "model").mkdir(parents=True)
    (package / "engine").mkdir()
    (package / "model" / "_graph.py").write_text(
        "from ._records import Row\n\n\ndef explain():\n"
        "    from ..building import _dataflow\n")
    (package / "engine" / "_loop.py").write_text(
        "from ..model import _graph\nfrom durable_flow.runtime._runtime import Runtime\n")
    assert upward_imports(package) == [
        "engine/_loop.py:2 (engine) imports runtime._runtime (runtime)",
        "model/_graph.py:5 (model) imports building (building)",
    ]


def engine_bypasses(package: Path = PACKAGE) -> list[str]:
    """Every import in ``runtime/`` of an engine name other than ``durable_flow.engine``'s public ones.

    The engine's front door is its ``__init__``: the runtime imports from
    ``durable_flow.engine`` only, and only the names in its ``__all__``.
    """
    import durable_flow.engine

    public = set(durable_flow.engine.__all__)
    wrong = []
    for path in sorted((package / "runtime").rglob("*.py")):
        for line, target, names in imported(path, package):
            if target[:1] != ["engine"]:
                continue
            where = f"{path.relative_to(package)}:{line} imports"
            if target != ["engine"]:
                wrong.append(f"{where} {'.'.join(target)}")
            else:
                wrong += [f"{where} engine.{name}" for name in names if name not in public]
    return wrong


def test_the_runtime_uses_only_the_engines_front_door() -> None:
    assert engine_bypasses() == []


def test_a_runtime_import_of_a_private_engine_module_is_reported(tmp_path: Path) -> None:
    package = tmp_path / "durable_flow"
    (package / "runtime").mkdir(parents=True)
    (package / "runtime" / "_x.py").write_text(
        "from ..engine import RunReader\nfrom ..engine._loop import ThreadRunner\n\n\n"
        "def f():\n    from ..engine import _lazy\n    import durable_flow.engine._state\n")
    assert engine_bypasses(package) == [
        "runtime/_x.py:2 imports engine._loop",
        "runtime/_x.py:6 imports engine._lazy",
        "runtime/_x.py:7 imports engine._state",
    ]
