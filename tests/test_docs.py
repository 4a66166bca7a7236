"""The user guide runs as written, the API reference names every public name, and the
README's examples of paths and request ids are the ones the code produces.

Each guide page's Python blocks run in order in a fresh process, in a temporary
directory (a block titled ``title="file.py"``, of any language, is written to that file instead);
then its ``durable-flow`` lines of ``console`` blocks run against what the blocks
left (``sh`` blocks show commands for another setting and are not run).
"""

from __future__ import annotations

import asyncio
import re
import shlex
import sys
from pathlib import Path

import forkrun
import pytest
from typer.testing import CliRunner

import durable_flow
from durable_flow import MemoryStore, Runtime
from durable_flow.cli import app

ROOT = Path(__file__).resolve().parent.parent
GUIDE = sorted((ROOT / "docs" / "guide").glob("*.md"))
BLOCK = re.compile(r"```(\w+)([^\n]*)\n(.*?)```", re.S)
TITLE = re.compile(r'title="([^"]+)"')


def _blocks(page: Path) -> list[tuple[str, str, str]]:
    return [(lang, info, body) for lang, info, body in BLOCK.findall(page.read_text())]


def test_every_guide_page_of_the_navigation_exists() -> None:
    nav = re.findall(r":\s+(guide/[\w-]+\.md)", (ROOT / "mkdocs.yml").read_text())
    assert sorted(nav) == sorted(f"guide/{p.name}" for p in GUIDE)


@pytest.mark.process
@pytest.mark.parametrize("page", GUIDE, ids=[p.stem for p in GUIDE])
def test_guide_page_runs(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code: list[str] = []
    for lang, info, body in _blocks(page):
        title = TITLE.search(info)
        if title:  # a file the page's code and commands use (Python, JSON, YAML)
            (tmp_path / title.group(1)).write_text(body)
        elif lang == "python":
            code.append(body)
    if code:
        script = tmp_path / "page.py"
        script.write_text("\n".join(code))
        # as `python page.py` in that folder (forked from a warm interpreter)
        done = forkrun.run([script], cwd=tmp_path, timeout=120, plain=True)
        assert done.returncode == 0, f"{page.name}: {done.stderr}"
    monkeypatch.chdir(tmp_path)
    for lang, _info, body in _blocks(page):
        if lang != "console":
            continue
        for line in body.splitlines():
            command = re.sub(r"\s+#\s.*$", "", line).strip()
            if not command.startswith("durable-flow ") or "RUN" in command.split():
                continue  # a template such as `respond RUN ...`, not a command to run
            result = CliRunner().invoke(app, shlex.split(command)[1:])
            assert result.exit_code == 0, f"{page.name}: {command}: {result.output}"
            assert result.output.strip(), command
            if command.endswith(" inbox"):
                assert "no pending requests" not in result.output, command


def test_the_api_reference_documents_every_public_name() -> None:
    text = "\n".join(p.read_text() for p in (ROOT / "docs" / "reference").glob("*.md"))
    documented = set(re.findall(r"^::: durable_flow\.[\w.]+\.(\w+)$", text, re.M))
    assert set(durable_flow.__all__) - documented == set()


def test_the_readme_names_a_nested_request_by_its_real_id_and_path() -> None:
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import nested_review
    finally:
        sys.path.remove(str(ROOT / "examples"))

    async def ask() -> tuple[str, str]:
        async with Runtime(MemoryStore()) as rt:
            result = await rt.run(nested_review.workflow, {"topic": "tides"})
            [request] = result.pending_requests
            return request.id, request.node

    request_id, node = asyncio.run(ask())
    readme = (ROOT / "README.md").read_text()
    assert f"`{request_id}`" in readme and f"`{node}`" in readme
    guide = (ROOT / "docs" / "guide" / "human-in-the-loop.md").read_text()
    assert f"`{request_id}`" in guide and f"`{node}`" in guide


def test_the_readme_compares_with_dbos_and_temporal_and_cites_every_row() -> None:
    readme = (ROOT / "README.md").read_text()
    table = readme.split("## How it compares", 1)[1].split("\n\n")[2]
    header, _rule, *rows = table.strip().splitlines()
    assert [c.strip() for c in header.strip("|").split("|")][1:] == [
        "durable-flow", "LangGraph + a checkpointer", "Agent Framework workflows",
        "DBOS (Python)", "Temporal"]
    for row in rows:
        for cell in [c.strip() for c in row.strip("|").split("|")][1:]:
            assert cell == "—" or re.search(r"\[\d+\]$", cell), f"uncited: {cell!r}"
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", table)}
    sources = readme.split("Sources:", 1)[1].split("##", 1)[0]
    assert cited == {int(n) for n in re.findall(r"\[(\d+)\]", sources)}


def test_the_cli_page_names_every_command_and_the_home_page_every_guide_page() -> None:
    from durable_flow.cli._app import _COMMANDS

    table = [line for line in (ROOT / "docs/guide/cli.md").read_text().splitlines()
             if line.startswith("| `")]
    named = {word.strip("`,") for line in table for word in line.split("|")[1].split()}
    assert {name for name, _, _ in _COMMANDS} <= named
    home = (ROOT / "docs/index.md").read_text()
    assert all(f"(guide/{page.name})" in home for page in GUIDE)


def test_the_guarantees_say_which_runs_may_run_again() -> None:
    text = " ".join((ROOT / "README.md").read_text().split())
    assert ("A failed run can be resumed on purpose (after fixing the cause); a completed or "
            "cancelled run never runs again.") in text


def test_the_declarative_guide_shows_the_design_records_example_verbatim() -> None:
    record = (ROOT / "examples" / "adr006.json").read_text()
    shown = {body for lang, info, body in _blocks(ROOT / "docs" / "guide" / "declarative.md")
             if lang == "json" and 'title="adr006.json"' in info}
    assert shown == {record}, "the guide's adr006.json differs from examples/adr006.json"
    nodes = list(durable_flow.load_workflow(
        ROOT / "examples" / "adr006.json",
        {name: (lambda state: {}) for name in ("greeter-agent", "meal-agent", "glucose-agent",
                                               "feedback-agent")}).nodes)
    assert nodes == ["node-greeter", "node-meal", "node-glucose", "node-feedback"]


def test_the_cli_pages_sample_inbox_has_the_columns_the_command_prints(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = ROOT / "docs" / "guide" / "cli.md"
    for _lang, info, body in _blocks(page):
        if (title := TITLE.search(info)) is not None:
            (tmp_path / title.group(1)).write_text(body)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    runner = CliRunner()
    started = runner.invoke(app, ["--db", "cli.db", "run", "tour.py:workflow", "--input",
                                  '{"topic": "tides"}', "--run-id", "tides"])
    assert started.exit_code == 0, started.output
    printed = runner.invoke(app, ["--db", "cli.db", "inbox"]).output

    def header(text: str) -> list[str]:
        row = next(line for line in text.splitlines() if line.startswith("┃"))
        return [cell.strip() for cell in row.strip("┃").split("┃")]

    sample = next(body for lang, _info, body in _blocks(page)
                  if lang == "text" and "┃ request" in body)
    assert header(sample) == header(printed)
    assert "run status" in header(printed)


def test_the_module_index_is_written_from_the_docstrings_and_current() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_modules", ROOT / "docs" / "modules.py")
    assert spec is not None and spec.loader is not None
    writer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(writer)
    assert writer.main(["--check"]) == 0, "docs/modules.md is stale: run `python docs/modules.py`"
    index = (ROOT / "docs" / "modules.md").read_text()
    modules = sorted((ROOT / "durable_flow").rglob("*.py"))
    for path in modules:  # every module is listed, each with what it is for
        folder = path.parent.relative_to(ROOT)
        assert f"## `{folder}/`" in index, folder
        row = next(line for line in index.splitlines() if line.startswith(f"| `{path.name}` |"))
        assert row.removeprefix(f"| `{path.name}` |").strip(" |"), f"{path} has no docstring"
