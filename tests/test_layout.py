"""The package's layout rules: modules of a readable size.

A class lives whole in one module; a module is split by meaning, and this cap only
catches one that has grown past what anyone reads (STYLE.md: usually under ~800).
"""

from __future__ import annotations

from pathlib import Path

import durable_flow

PACKAGE = Path(durable_flow.__file__).resolve().parent
MAX_LINES = 800


def test_every_module_is_under_the_line_limit() -> None:
    sizes = {str(path.relative_to(PACKAGE)): len(path.read_text(encoding="utf-8").splitlines())
             for path in PACKAGE.rglob("*.py")}
    assert len(sizes) > 40  # the walk found the package
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_the_package_installs_without_setuptools_warnings() -> None:
    """An SPDX license string, and every folder of files shipped is a listed package."""
    import tomllib

    project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml")
                            .read_text())
    assert isinstance(project["project"]["license"], str)
    listed = set(project["tool"]["setuptools"]["packages"])
    root = Path(__file__).resolve().parent.parent
    shipped = {str(d.relative_to(root)).replace("/", ".")
               for d in (root / "durable_flow").rglob("*") if d.is_dir()
               and d.name != "__pycache__" and any(f.is_file() for f in d.iterdir())}
    assert shipped <= listed, shipped - listed


TESTS = Path(__file__).resolve().parent


def test_the_tests_folder_mirrors_the_package() -> None:
    """Each folder of tests is named for a folder of the package, and each package folder has one."""
    package = {p.name for p in PACKAGE.iterdir()
               if p.is_dir() and (p / "__init__.py").exists() and not p.name.startswith("_")}
    tests = {p.name for p in TESTS.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert tests == package
    for folder in tests:  # every test module sits with the layer it tests
        assert list((TESTS / folder).glob("test_*.py")), folder
