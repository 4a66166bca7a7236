"""The tests' TCP proxy (tests/netproxy.py): forwards, freezes, thaws, cuts, refuses."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest
from netproxy import NetProxy
from stores.pgdb import server_dsn


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(1024):
        writer.write(data)
        await writer.drain()
    writer.close()


@pytest.fixture
async def proxy() -> AsyncIterator[NetProxy]:
    echo = await asyncio.start_server(_echo, "127.0.0.1", 0)
    async with NetProxy(("127.0.0.1", echo.sockets[0].getsockname()[1])) as p:
        yield p
    echo.close()


async def _connect(proxy: NetProxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", proxy.port)


async def _silent(reader: asyncio.StreamReader, seconds: float = 0.2) -> bool:
    try:
        await asyncio.wait_for(reader.read(1), seconds)
    except TimeoutError:
        return True
    return False


async def test_it_forwards_both_ways_and_counts(proxy: NetProxy) -> None:
    reader, writer = await _connect(proxy)
    writer.write(b"ping")
    assert await reader.readexactly(4) == b"ping"
    assert (proxy.connections, proxy.open, proxy.bytes_up, proxy.bytes_down) == (1, 1, 4, 4)
    writer.close()


async def test_a_frozen_proxy_holds_traffic_and_delivers_it_on_thaw(proxy: NetProxy) -> None:
    reader, writer = await _connect(proxy)
    writer.write(b"a")
    assert await reader.readexactly(1) == b"a"
    proxy.freeze()
    writer.write(b"bc")
    assert await _silent(reader)
    late_reader, late_writer = await _connect(proxy)  # a new connection is held too
    late_writer.write(b"d")
    assert await _silent(late_reader)
    assert proxy.bytes_up == 1 and proxy.held == 2 and not writer.is_closing()
    proxy.thaw()
    assert await reader.readexactly(2) == b"bc"
    assert await late_reader.readexactly(1) == b"d"
    writer.close()
    late_writer.close()


async def test_cut_resets_every_connection_and_refuse_keeps_new_ones_out(
    proxy: NetProxy,
) -> None:
    reader, writer = await _connect(proxy)
    writer.write(b"x")
    assert await reader.readexactly(1) == b"x"
    proxy.cut()
    with pytest.raises(ConnectionResetError):
        await reader.readexactly(1)
    assert proxy.open == 0
    proxy.refuse()
    reader, writer = await _connect(proxy)
    writer.write(b"x")
    with pytest.raises((ConnectionResetError, asyncio.IncompleteReadError)):
        await reader.readexactly(1)
    assert proxy.refused == 1
    proxy.accept()
    reader, writer = await _connect(proxy)
    writer.write(b"y")
    assert await reader.readexactly(1) == b"y"
    writer.close()


async def test_it_stands_in_front_of_postgresql() -> None:
    async with NetProxy() as proxy:
        conn = await asyncpg.connect(proxy.dsn(server_dsn()))
        try:
            assert await conn.fetchval("SELECT 41 + 1") == 42
            assert proxy.open == 1
        finally:
            await conn.close()
