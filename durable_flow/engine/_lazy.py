"""Loading a thread's head for the engine: trusted bytes, typed only where read.

What this library wrote it trusts on read through a digest. Each checkpoint
the engine writes records in ``CheckpointMeta.digests`` a ``(crc32,
length)`` pair per channel it sees: for a value channel, of the value's
bytes; for a log channel, of its items as the stored chunks join them (the
chunks' insides, ``","`` between them, brackets left out), which is exactly
the prefix a merged segment holds (``store/_segments.py``), so a checkpoint
older than the segment checks too. A commit extends the digests of its base
by the bytes it appends: O(bytes written).

Loading a head (``load_head``, what ``ThreadRunner.load`` uses):

* every channel with a digest is checked against the bytes read; a
  mismatch or a log shorter than its digest raises
  ``CheckpointCorruptedError`` before anything runs (every decoder checks,
  ``get_state``'s too);
* when every channel checks, the ``messages`` log and the node histories
  are :class:`LazyLog`s: the snapshot leaves the field out until a task
  reads it (``StateSchema.build`` of a ``Deferred``), a history is built when
  its node reads ``ctx.history``, merges grow them unbuilt; built, once per
  execution, with pydantic's validation from the bytes in one call, measured
  as fast as building the models unvalidated (``docs/architecture.md``);
* a checkpoint without digests (written before they existed, or a fork's or
  migration's copy) is validated whole at load, as before
  (``decode_checkpoint``).

``plain_state`` is ``get_state``'s decoding, one stored row at a time with a
turn of the event loop after each.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any, overload

from ..errors import CheckpointCorruptedError
from ..model._blackboard import Blackboard, StateSchema
from ..model._frozen import Deferred, LogBuffer, freeze
from ..model._messages import Message, MessageList
from ..model._serde import as_bytes, decode
from ..store._protocols import CheckpointMeta, LoadedCheckpoint
from ._histories import MESSAGES, expand, has_refs

__all__ = [
    "LazyLog", "extend_digest", "load_head", "next_digests", "plain_state", "resolved",
    "value_digest", "verified",
]

Digest = tuple[int, int]


# -- digests ---------------------------------------------------------------------------
def value_digest(data: bytes) -> Digest:
    """The digest of one value's bytes (bytes a database handed back as text included)."""
    data = as_bytes(data)
    return zlib.crc32(data), len(data)


def extend_digest(prev: Digest | None, chunk: bytes) -> Digest:
    """A log's digest after ``chunk`` (a JSON array) is appended to it."""
    chunk = as_bytes(chunk)
    inner = chunk[1:-1] if len(chunk) > 2 else b""
    if prev is None or prev[1] == 0:
        return (zlib.crc32(inner), len(inner)) if inner else (0, 0)
    if not inner:
        return prev
    return zlib.crc32(b"," + inner, prev[0]), prev[1] + 1 + len(inner)


def next_digests(base: CheckpointMeta, vals: Mapping[str, bytes],
                 appends: Mapping[str, bytes], new_logs: Iterable[str] = ()
                 ) -> dict[str, Digest]:
    """The digests of the checkpoint that writes ``vals`` and ``appends`` on ``base``.

    A channel whose base has no digest (written before digests existed) gets
    none: its earlier bytes were never summed. ``new_logs`` are log channels
    the base does not see (they start empty).
    """
    out = {ch: d for ch, d in base.digests.items()
           if ch in base.value_versions or ch in base.log_lengths}
    for ch, data in vals.items():
        out[ch] = value_digest(data)
    fresh = set(new_logs)
    for ch, data in appends.items():
        prev = out.get(ch)
        if prev is None and (ch in base.log_lengths and ch not in fresh):
            continue
        out[ch] = extend_digest(prev, data)
    return out


def first_digests(vals: Mapping[str, bytes], appends: Mapping[str, bytes]) -> dict[str, Digest]:
    """The digests of a thread's first checkpoint (every channel written)."""
    out = {ch: value_digest(data) for ch, data in vals.items()}
    out.update({ch: extend_digest(None, data) for ch, data in appends.items()})
    return out


def verified(loaded: LoadedCheckpoint) -> bool:
    """Check every digest of ``loaded``; True when its digests cover every byte it read.

    False when a channel has no digest, or its rows hold items past the
    checkpoint (a segment merged later): the caller then validates.

    Raises ``CheckpointCorruptedError`` naming the channel whose bytes do not
    match their digest.
    """
    try:
        return _verified(loaded)
    except (ValueError, TypeError) as exc:  # a cell a driver cannot hand back as bytes
        from ._state import corrupted

        raise corrupted(loaded.meta.run_id, loaded.meta.id, exc) from None


def _verified(loaded: LoadedCheckpoint) -> bool:
    meta = loaded.meta
    digests = meta.digests
    complete = bool(digests)
    for ch, data in loaded.values.items():
        d = digests.get(ch)
        if d is None:
            complete = False
        elif value_digest(as_bytes(data)) != d:
            raise _mismatch(meta, ch)
    for ch in meta.log_lengths:
        d = digests.get(ch)
        if d is None:
            complete = False
            continue
        chunks = [as_bytes(c) for c in loaded.logs.get(ch, [])]
        if any(c[:1] != b"[" or c[-1:] != b"]" for c in chunks) or not _log_matches(chunks, *d):
            raise _mismatch(meta, ch)
        filled = [len(c) - 2 for c in chunks if len(c) > 2]
        if sum(filled) + len(filled) - 1 > d[1]:
            complete = False  # rows holding later items too (an older checkpoint): not vouched for
    return complete


def _log_matches(chunks: list[bytes], crc: int, n: int) -> bool:
    """Whether the first ``n`` bytes of the chunks' joined items have checksum ``crc``.

    Summed in place, a chunk at a time (nothing copied); the ``n`` bytes must
    end where an item does (a ``","`` follows, or nothing).
    """
    if n == 0:
        return crc == 0
    acc = seen = 0
    for c in chunks:
        if len(c) <= 2:
            continue
        piece = memoryview(c)[1:-1]
        if seen:  # a "," joins this chunk's items to those before
            if seen == n:
                return acc == crc  # the prefix ends where this chunk begins
            acc = zlib.crc32(b",", acc)
            seen += 1
        take = min(len(piece), n - seen)
        acc = zlib.crc32(piece[:take], acc)
        seen += take
        if take < len(piece):
            return acc == crc and piece[take] == 0x2C  # an item ends here: a "," follows
    return seen == n and acc == crc


def _mismatch(meta: CheckpointMeta, channel: str) -> CheckpointCorruptedError:
    return CheckpointCorruptedError(
        meta.run_id, meta.id, f"channel {channel!r}: the stored bytes do not match their digest")


# -- lazy logs ------------------------------------------------------------------------
class LazyLog(Deferred, Sequence[Message]):
    """A messages log or node history the engine holds unbuilt until it is read.

    ``build`` makes the stored items (``length`` of them) into messages on
    first read (:meth:`resolve`, once: the buffer is then the thread's log for
    the rest of the execution); ``grow`` (a merge) appends without building,
    ``shrink`` undoes it, and the length is known without building. A
    blackboard built on it leaves the field out until the field is read
    (``StateSchema.build``); a node's context copies its history into a list
    when the node asks for it.
    """

    __slots__ = ("_build", "_built", "_length", "_tail")

    def __init__(self, build: Callable[[], list[Message]], length: int) -> None:
        self._build: Callable[[], list[Message]] | None = build
        self._built: LogBuffer | None = None
        self._length = length
        self._tail: list[Message] = []

    @property
    def built(self) -> bool:
        """Whether the stored items were made into messages."""
        return self._built is not None

    def resolve(self) -> LogBuffer:
        """The log as the engine's buffer, built on the first call."""
        if self._built is None:
            assert self._build is not None
            base = self._build()
            self._build = None
            self._built = LogBuffer.adopt([*base, *self._tail])
            self._tail = []
        return self._built

    def __len__(self) -> int:
        if self._built is None:
            return self._length + len(self._tail)
        return len(self._built)

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | Sequence[Message]:
        return self.resolve()[index]

    def __iter__(self) -> Iterator[Message]:
        return iter(self.resolve())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        state = "built" if self.built else "not built"
        return f"LazyLog({len(self)} messages, {state})"

    def grow(self, items: Iterable[Any]) -> None:
        """Append ``items`` (frozen on the way in), building nothing."""
        new = [freeze(v) for v in items]
        if self._built is None:
            self._tail.extend(new)
        else:
            self._built.grow(new)

    def shrink(self, length: int) -> None:
        """Drop every item from ``length`` on (a merge that did not commit)."""
        if self._built is None and length >= self._length:
            del self._tail[length - self._length:]
        else:
            self.resolve().shrink(length)


def resolved(value: Any) -> Any:
    """``value``, a lazy log built (what leaves the engine must be a plain value)."""
    return value.resolve() if isinstance(value, Deferred) else value


# -- the head --------------------------------------------------------------------------
async def load_head(loaded: LoadedCheckpoint, schema: StateSchema,
                    eager: Callable[[LoadedCheckpoint, StateSchema], Any]) -> Any:
    """The engine's typed state of ``loaded``; ``eager`` (``decode_checkpoint``) when untrusted.

    Trusted (every channel has a matching digest, and the blackboard's
    ``messages`` is the standard field): the messages log and the node
    histories are :class:`LazyLog`s, built when first read; the other values
    are validated as usual (one value each).
    """
    from ._state import (
        HISTORY_PREFIX,
        ThreadState,
        corrupted,
        frozen_values,
        log_channels,
        log_name,
        raw_values,
    )

    meta = loaded.meta
    if not verified(loaded):
        return eager(loaded, schema)
    own = schema.cls.model_fields.get(MESSAGES)
    channel = log_channels(meta).get(MESSAGES)
    if channel is not None and (own is None or own.annotation
                                != Blackboard.model_fields[MESSAGES].annotation):
        return eager(loaded, schema)
    await asyncio.sleep(0)
    raw = raw_values(loaded, skip=MESSAGES if channel is not None else None)
    try:
        state = schema.cls.model_validate(raw)
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise corrupted(meta.run_id, meta.id, exc) from None
    values = frozen_values(schema, state)
    source = _Source(loaded, channel)
    if channel is not None:
        values[MESSAGES] = source.log
    histories: dict[str, Sequence[Message]] = {}
    for ch, length in meta.log_lengths.items():
        if ch.startswith(HISTORY_PREFIX):
            histories[log_name(ch)[len(HISTORY_PREFIX):]] = LazyLog(
                partial(source.history, ch), length)
    return ThreadState(meta=meta, values=values, histories=histories,  # type: ignore[arg-type]
                       value_bytes=dict(loaded.values))


class _Source:
    """What one loaded checkpoint's lazy logs are built from."""

    def __init__(self, loaded: LoadedCheckpoint, channel: str | None) -> None:
        self.loaded = loaded
        self.channel = channel
        self._plain: list[Any] | None = None
        length = loaded.meta.log_lengths[channel] if channel is not None else 0
        self.log = LazyLog(self._log, length)

    def _build(self, channel: str, refer: Callable[[], Sequence[Any]]) -> list[Message]:
        from ._state import DAMAGE, corrupted, messages_of

        meta = self.loaded.meta
        try:
            return messages_of(self.loaded.logs.get(channel, []), meta.log_lengths[channel], refer)
        except DAMAGE as exc:
            raise corrupted(meta.run_id, meta.id, exc, f"channel {channel!r}") from None

    def _log(self) -> list[Message]:
        """The messages log, validated from its bytes in one call (the fast path measured)."""
        return self._build(self.channel, list) if self.channel is not None else []

    def _referred(self) -> Sequence[Any]:
        """What a history's references point into: the built log, else its plain items."""
        if self.log.built or self.channel is None:
            return self.log.resolve() if self.channel is not None else []
        if self._plain is None:
            from ._state import log_items

            self._plain = log_items(self.loaded, self.channel)
        return self._plain

    def history(self, channel: str) -> list[Message]:
        """A node history: references share the log's messages once it is built."""
        return self._build(channel, self._referred)


# -- plain state in pieces ---------------------------------------------------------------
async def plain_state(loaded: LoadedCheckpoint
                      ) -> tuple[dict[str, Any], dict[str, Sequence[Message]]]:
    """``decode_plain`` (what ``get_state`` returns), one stored row at a time.

    The same values and histories, but each row of a log is decoded on its
    own with a turn of the event loop after it, so reading a long run's state
    does not hold up the other tasks of the process; the messages log is
    decoded once for every history that refers to it.
    """
    from ._state import DAMAGE, HISTORY_PREFIX, corrupted, damaged_item, log_channels, log_name

    meta = loaded.meta
    verified(loaded)
    channel = ""
    stored: dict[str, list[Any]] = {}
    referring = {ch for ch in meta.log_lengths if ch.startswith(HISTORY_PREFIX)
                 and any(has_refs(as_bytes(c)) for c in loaded.logs.get(ch, []))}
    try:
        raw: dict[str, Any] = {}
        for channel, data in loaded.values.items():
            raw[channel] = decode(data)
        for channel in meta.log_lengths:
            if channel not in referring:  # expanded as they are decoded, below
                stored[channel] = await _rows(loaded.logs.get(channel, []))
        for channel, length in meta.log_lengths.items():
            if not log_name(channel).startswith(HISTORY_PREFIX):
                raw[log_name(channel)] = _cut(stored[channel], length)
    except DAMAGE as exc:
        raise corrupted(meta.run_id, meta.id, exc, f"channel {channel!r}") from None
    messages = log_channels(meta).get(MESSAGES)
    histories: dict[str, Sequence[Message]] = {}
    for channel, length in meta.log_lengths.items():
        if not channel.startswith(HISTORY_PREFIX):
            continue
        try:
            if channel in referring:
                log = [] if messages is None else \
                    _cut(stored[messages], meta.log_lengths[messages])
                items = await _expand(loaded.logs.get(channel, []), log, length)
            else:
                items = _cut(stored[channel], length)
        except DAMAGE as exc:
            raise corrupted(meta.run_id, meta.id, exc, f"channel {channel!r}") from None
        histories[log_name(channel)[len(HISTORY_PREFIX):]] = MessageList(
            items, partial(damaged_item, meta.run_id, meta.id, channel))
        await asyncio.sleep(0)
    return raw, histories


async def _expand(chunks: list[bytes], log: list[Any], length: int) -> list[Any]:
    """A referring history's rows, each decoded and expanded whole, a loop turn after each.

    A reference decodes to a dict holding a list, two objects the garbage
    collector tracks: decoding every row first kept a whole history of them
    alive (20,000 supersteps: 40,000), and a row of a few thousand, decoded
    at once, still set off collections that promote them; enough to start
    collections of the oldest generation (10-40 ms each, on the event loop)
    at nearly every read. So a row is decoded and expanded with automatic
    collections paused (nothing awaited meanwhile), and its references are
    freed before they resume: nothing is left for a collection to find.
    Every row is decoded, as ``_rows`` does, those past ``length`` too.
    """
    out: list[Any] = []
    for chunk in chunks:
        with _collections_paused():
            items = decode(chunk)
            if type(items) is not list:
                raise ValueError("a log chunk is not a JSON array")
            if len(out) < length:
                out.extend(expand(items, lambda: log, length - len(out), whole=False))
            del items
        await asyncio.sleep(0)
    if len(out) < length:
        raise ValueError(f"log has {len(out)} items, checkpoint expects {length}")
    return out


async def _rows(chunks: list[bytes]) -> list[Any]:
    """Every item of a log's rows, each row decoded on its own, the loop given a turn after it."""
    out: list[Any] = []
    for chunk in chunks:
        items = decode(chunk)
        if type(items) is not list:
            raise ValueError("a log chunk is not a JSON array")
        out.extend(items)
        await asyncio.sleep(0)
    return out


@contextlib.contextmanager
def _collections_paused() -> Iterator[None]:
    """Automatic garbage collections paused for a synchronous stretch (left off if they were)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _cut(items: list[Any], length: int) -> list[Any]:
    if not 0 <= length <= len(items):
        raise ValueError(f"log has {len(items)} items, checkpoint expects {length}")
    return items[:length]
