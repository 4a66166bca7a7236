"""Node histories stored by reference to the thread's ``messages`` log.

A node that returns messages under ``messages`` appends them to the global
log and to its own history. Its history chunk then holds, instead of the
messages again, a reference ``{"__df_messages__": [start, count]}`` to the
items ``start`` to ``start + count - 1`` of the same thread's ``messages`` log
(what it only ``remember``-ed is stored as it is). Reading a history expands
the references from that log, so each message is stored, decoded and
validated once. Histories written before, and the copies forks and
migrations write, hold the messages themselves; both read back the same.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..model._serde import encode

if TYPE_CHECKING:
    from ._task import TaskResult

__all__ = ["MESSAGES", "expand", "has_refs", "history_chunk"]

#: The global conversation: the ``append`` field histories refer to.
MESSAGES = "messages"
_KEY = "__df_messages__"
_KEY_BYTES = b'"__df_messages__"'


def history_chunk(r: TaskResult, start: int) -> bytes:
    """The chunk a finished task appends to its node's history.

    ``start`` is the length of the thread's ``messages`` log before this
    task's messages were appended to it (tasks merge in order).
    """
    returned = r.update.get(MESSAGES) or ()
    count = len(returned)
    whole = r.history_bytes or b"[]"
    if not count or list(r.history[len(r.history) - count:]) != list(returned):
        return whole  # nothing of the global log (or not its tail): stored as it is
    ref = b'[{"%s":[%d,%d]}]' % (_KEY.encode(), start, count)
    remembered = r.history[:len(r.history) - count]
    if not remembered:
        return ref
    return b"[" + encode(list(remembered))[1:-1] + b"," + ref[1:]


def has_refs(joined: bytes) -> bool:
    """Whether a history's joined chunks may hold references (a cheap bytes test)."""
    return _KEY_BYTES in joined


def expand(items: list[Any], messages: Callable[[], Sequence[Any]], length: int,
           *, whole: bool = True) -> list[Any]:
    """The first ``length`` items of a history, references replaced by the messages named.

    ``messages`` gives the thread's ``messages`` log as the same checkpoint
    sees it (read once, when a reference is met). Items past ``length``
    belong to later checkpoints (a merged segment holds them too) and are not
    expanded; a reference outside the log, or a history shorter than
    ``length``, raises ``ValueError``. ``whole=False`` expands a slice of a
    history (``items`` may give fewer than ``length``).
    """
    refs = [item.get(_KEY) if type(item) is dict and len(item) == 1 else None for item in items]
    span = _span(refs) if refs and None not in refs else None
    if span is not None:
        # a node that only ever returned its messages: its history is one slice of the log
        first, covered = span
        log = messages()
        if whole:
            if first + length > len(log) or covered < length:
                raise ValueError(f"a history of {length} refers past a log of {len(log)}")
            return list(log[first:first + length])
        count = min(covered, length)
        if count <= 0:
            return []
        if first + count > len(log):
            raise ValueError(f"a history refers to messages {first}..{first + count - 1} "
                             f"of a log of {len(log)}")
        return list(log[first:first + count])
    out: list[Any] = []
    log_: Sequence[Any] | None = None
    for item, ref in zip(items, refs, strict=True):
        if len(out) >= length:
            break
        if ref is None:
            out.append(item)
            continue
        start, count = _ref(ref)
        count = min(count, length - len(out))
        log_ = messages() if log_ is None else log_
        if start + count > len(log_):
            raise ValueError(f"a history refers to messages {start}..{start + count - 1} "
                             f"of a log of {len(log_)}")
        out.extend(log_[start:start + count])
    if len(out) < length and whole:
        raise ValueError(f"log has {len(out)} items, checkpoint expects {length}")
    return out


def _span(refs: list[Any]) -> tuple[int, int] | None:
    """The ``(start, count)`` of the log slice that ``refs``, one after another, name.

    None when a reference is not ``[start, count]`` (two ints, start >= 0,
    count > 0) or they leave a gap. Checked a column at a time: a long run's
    history holds one reference per superstep.
    """
    if any(type(r) is not list or len(r) != 2 for r in refs):
        return None
    starts, counts = [r[0] for r in refs], [r[1] for r in refs]
    if set(map(type, starts)) != {int} or set(map(type, counts)) != {int}:
        return None  # (a bool is not an int here)
    if min(starts) < 0 or min(counts) <= 0:
        return None
    if list(map(operator.add, starts[:-1], counts[:-1])) != starts[1:]:
        return None
    return starts[0], sum(counts)


def _ref(value: Any) -> tuple[int, int]:
    if (type(value) is list and len(value) == 2 and type(value[0]) is int
            and type(value[1]) is int and value[0] >= 0 and value[1] > 0):
        return value[0], value[1]
    raise ValueError(f"a history reference is not [start, count]: {value!r:.60}")
