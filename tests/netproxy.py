"""A TCP proxy the tests control: a network between a client and PostgreSQL that can fail.

    async with NetProxy() as proxy:            # in front of 127.0.0.1:5432
        store = PostgresStore(proxy.dsn(pg_dsn))   # the same database, through the proxy
        ...
        proxy.freeze()     # a stalled network: nothing moves either way, sockets stay open
        proxy.thaw()       # traffic moves again (what was held is delivered, in order)
        proxy.cut()        # every connection reset at once (both ends see RST)
        proxy.refuse()     # new connections refused (a server that is down) ...
        proxy.accept()     # ... and accepted again

``freeze`` holds every byte in flight and every byte sent later, in both
directions, and holds new connections too (accepted, but not forwarded until
``thaw``): from both ends it looks like a partition or a paused peer, and no
TCP error is seen. ``cut`` resets the connections that exist; the proxy keeps
listening. ``refuse`` closes new connections as soon as they are accepted
(a client sees the connection closed or reset before the server's first
byte, as with a server that is restarting), and keeps existing ones.

Counters: :attr:`connections` (accepted and forwarded so far),
:attr:`refused`, :attr:`open` (pairs open now), :attr:`bytes_up` (client to
server), :attr:`bytes_down` (forwarded), :attr:`held` (bytes a freeze is
holding now: a request is in flight) and :attr:`turns` (round trips: on each
connection, every time the client sends after the server last did, or first).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from types import TracebackType
from typing import Self
from urllib.parse import urlsplit, urlunsplit

__all__ = ["NetProxy"]

_CHUNK = 65536


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close a connection with a reset (SO_LINGER 0: RST, not FIN)."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class _Pair:
    """One client connection and its server connection."""

    def __init__(self, client: asyncio.StreamWriter, server: asyncio.StreamWriter) -> None:
        self.client = client
        self.server = server
        self.client_spoke_last = False

    def reset(self) -> None:
        _reset(self.client)
        _reset(self.server)


class NetProxy:
    """An asyncio TCP proxy on a free port of 127.0.0.1, in front of ``target``."""

    def __init__(self, target: tuple[str, int] = ("127.0.0.1", 5432)) -> None:
        self.target = target
        self.port = 0
        self.connections = 0
        self.refused = 0
        self.held = 0
        self.bytes_up = 0
        self.bytes_down = 0
        self.turns = 0
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._refusing = False
        self._pairs: set[_Pair] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None

    @property
    def open(self) -> int:
        """Connection pairs open now."""
        return len(self._pairs)

    @property
    def frozen(self) -> bool:
        """Whether traffic is held (:meth:`freeze`)."""
        return not self._flowing.is_set()

    def dsn(self, dsn: str) -> str:
        """``dsn`` with its host and port replaced by the proxy's."""
        parts = urlsplit(dsn)
        userinfo = parts.netloc.rpartition("@")[0]
        netloc = f"{userinfo}@127.0.0.1:{self.port}" if userinfo else f"127.0.0.1:{self.port}"
        return urlunsplit(parts._replace(netloc=netloc))

    async def start(self) -> None:
        """Listen on a free port (:attr:`port`)."""
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        """Stop listening and reset every connection."""
        if self._server is not None:
            self._server.close()
        self._refusing = True
        self.thaw()
        self.cut()  # every pipe then ends by itself
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    def freeze(self) -> None:
        """Stop forwarding in both directions; sockets stay open (a stalled network)."""
        self._flowing.clear()

    def thaw(self) -> None:
        """Forward again, held bytes first."""
        self._flowing.set()

    def cut(self) -> None:
        """Reset every open connection (both sides see a connection reset)."""
        for pair in list(self._pairs):
            pair.reset()
        self._pairs.clear()

    def refuse(self) -> None:
        """Close new connections at once (existing ones go on)."""
        self._refusing = True

    def accept(self) -> None:
        """Forward new connections again."""
        self._refusing = False

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, OSError):
            _reset(writer)
        finally:
            self._tasks.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._refusing:
            self.refused += 1
            _reset(writer)
            return
        self.connections += 1
        await self._flowing.wait()  # a frozen network does not get the client through either
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        pair = _Pair(writer, up_writer)
        self._pairs.add(pair)
        try:
            await asyncio.gather(self._pipe(reader, up_writer, pair, up=True),
                                 self._pipe(up_reader, writer, pair, up=False))
        finally:
            self._pairs.discard(pair)
            writer.transport.abort()
            up_writer.transport.abort()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    pair: _Pair, *, up: bool) -> None:
        """Copy one direction until EOF or an error; holds while frozen."""
        try:
            while data := await reader.read(_CHUNK):
                self.held += len(data)
                try:
                    await self._flowing.wait()
                finally:
                    self.held -= len(data)
                if up:
                    self.bytes_up += len(data)
                    self.turns += not pair.client_spoke_last
                else:
                    self.bytes_down += len(data)
                pair.client_spoke_last = up
                writer.write(data)
                await writer.drain()
            await self._flowing.wait()  # an EOF is traffic too: held while frozen
            if writer.can_write_eof():
                writer.write_eof()
        except (ConnectionError, OSError):
            writer.transport.abort()
