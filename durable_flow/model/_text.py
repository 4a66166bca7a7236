r"""Text that can be stored: valid Unicode, which rules out surrogate code points.

A Python ``str`` may hold a lone surrogate (``"\ud800"``, from a JSON
``\ud800`` escape or ``surrogateescape`` decoding); UTF-8, orjson and the
databases refuse it. Names and conditions are checked when a workflow is
built, so such text fails there, named, instead of when a run stores it.
"""

from __future__ import annotations

import re

__all__ = ["printable", "surrogate_at", "unstorable"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def surrogate_at(text: str) -> int | None:
    """The offset of the first surrogate code point in ``text``, or None if there is none."""
    found = _SURROGATE.search(text)
    return found.start() if found else None


def unstorable(text: object, where: str) -> str | None:
    """A problem naming ``where`` when ``text`` is a string that cannot be stored, else None."""
    if not isinstance(text, str):
        return None
    pos = surrogate_at(text)
    if pos is None:
        return None
    return (f"{where}: {text!r:.60} contains the surrogate code point {text[pos]!r} at offset "
            f"{pos}, which is not valid Unicode text and cannot be stored")


def printable(text: str) -> str:
    r"""``text`` with any surrogate written as an escape (``\ud800``), so it can be printed."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
