"""The sections of ``bench/RESULTS.md`` each benchmark writes between its own markers."""

from __future__ import annotations

import re
from pathlib import Path

_START = re.compile(r"<!-- ([A-Za-z0-9_-]+):start -->")


def markers(name: str) -> tuple[str, str]:
    """The start and end markers of section ``name``."""
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def kept_section(path: Path, name: str) -> str:
    """Section ``name`` of ``path`` with its markers, as it is ("" when there is none)."""
    start, end = markers(name)
    text = path.read_text() if path.exists() else ""
    if start in text and end in text:
        return start + text.split(start, 1)[1].split(end, 1)[0] + end
    return ""


def replace_section(path: Path, name: str, section: str) -> None:
    """Put ``section`` (its markers included) in place of section ``name``, or at the end."""
    start, end = markers(name)
    text = path.read_text() if path.exists() else ""
    if start in text and end in text:
        before, rest = text.split(start, 1)
        text = before + section + rest.split(end, 1)[1]
    else:
        text = (text.rstrip("\n") + "\n\n" if text else "") + section + "\n"
    path.write_text(text)


def top_sections(path: Path) -> list[str]:
    """The names of the sections of ``path`` not inside another one, in file order."""
    text = path.read_text() if path.exists() else ""
    names, pos = [], 0
    for found in _START.finditer(text):
        name = found.group(1)
        end = text.find(markers(name)[1], found.end())
        if found.start() < pos or end < 0:
            continue  # nested in the section before, or never closed
        names.append(name)
        pos = end
    return names
