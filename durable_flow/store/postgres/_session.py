"""How PostgresStore's connections are made so that none can hold a run hostage.

A holder that stops answering in the middle of a transaction (a paused VM,
a network partition, a process stopped by a debugger) keeps the row locks
it took until the server ends its session. With the server's defaults that
takes over two hours (TCP keepalive), and every other process that needs
the run waits or skips it meanwhile. :class:`SessionLimits` bounds every
such wait by the store's ``stall_timeout``:

- the server ends a session idle inside a transaction after
  ``stall_timeout`` (``idle_in_transaction_session_timeout``): its
  transaction rolls back and its locks go;
- a statement waits at most ``lock_timeout`` (a fifth of it) for a row
  another transaction holds (``lock_timeout``; SQLSTATE 55P03);
- TCP keepalives on both ends: the server's (``tcp_keepalives_*``,
  ``tcp_user_timeout``, sent as startup parameters, so they cost no round
  trip) end the sessions of a client that vanished, including those a
  cut-off client left behind once the network heals; the client's
  (``SO_KEEPALIVE``, ``TCP_KEEPIDLE``, ``TCP_KEEPINTVL``, ``TCP_KEEPCNT``,
  ``TCP_USER_TIMEOUT`` on its socket: asyncpg has no option for them) let it
  notice a server that vanished under an idle or a waiting connection;
- the client waits at most ``statement_timeout`` for the reply to one
  statement; the driver then closes the connection (as it does when a call
  is cancelled) instead of asking the server to cancel over a network that
  may be stalled, so the server sees the session end as soon as packets
  flow again.

:class:`OwnConnection` is one connection outside the pool, for calls that
must never wait behind it (lease renewals).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["OwnConnection", "SessionLimits"]

# Probes a keepalive sends before it gives the peer up.
_PROBES = 3


def _ms(seconds: float) -> str:
    return str(max(1, round(seconds * 1000)))


def _whole(seconds: float) -> int:
    return max(1, round(seconds))


@dataclass(frozen=True, slots=True)
class SessionLimits:
    """The time limits of a store's sessions, all derived from ``stall_timeout`` (seconds)."""

    stall_timeout: float

    @property
    def lock_timeout(self) -> float:
        """How long a statement waits for a row lock another transaction holds."""
        return self.stall_timeout / 5

    @property
    def statement_timeout(self) -> float:
        """How long the client waits for one statement's reply before it drops the connection.

        Generous: a statement that waits for a lock gives up after
        :attr:`lock_timeout` already; this only catches a stalled network.
        """
        return self.stall_timeout * 6

    @property
    def connect_timeout(self) -> float:
        """How long connecting may take; also a lease renewal's :attr:`statement_timeout`."""
        return self.stall_timeout

    def server_settings(self) -> dict[str, str]:
        """Session settings sent when connecting (PostgreSQL 12 or later)."""
        return {
            "lock_timeout": _ms(self.lock_timeout),
            "idle_in_transaction_session_timeout": _ms(self.stall_timeout),
            "tcp_keepalives_idle": str(_whole(self.stall_timeout)),
            "tcp_keepalives_interval": str(_whole(self.stall_timeout / 5)),
            "tcp_keepalives_count": str(_PROBES),
            "tcp_user_timeout": _ms(self.stall_timeout * 2),
        }

    async def keep_alive(self, conn: Any) -> None:
        """Turn TCP keepalive on for ``conn``'s socket (a pool's ``init``; Unix sockets: nothing)."""
        transport = getattr(conn, "_transport", None)  # asyncpg exposes no public handle
        sock = transport.get_extra_info("socket") if transport is not None else None
        if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
            return
        options = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
        for name, value in (("TCP_KEEPIDLE", _whole(self.stall_timeout)),
                            ("TCP_KEEPINTVL", _whole(self.stall_timeout / 5)),
                            ("TCP_KEEPCNT", _PROBES),
                            ("TCP_USER_TIMEOUT", int(_ms(self.stall_timeout * 2)))):
            if hasattr(socket, name):  # Linux has them all; other systems some
                options.append((socket.IPPROTO_TCP, getattr(socket, name), value))
        for level, option, value in options:
            with contextlib.suppress(OSError):
                sock.setsockopt(level, option, value)


class OwnConnection:
    """One connection of its own, shaped like a pool of one (``acquire``).

    It connects on first use and again, on the next use, once the connection
    closed; callers take turns on it.
    """

    def __init__(self, connect: Callable[[], Awaitable[Any]]) -> None:
        self._connect = connect
        self._conn: Any = None
        self._turn = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[Any]:
        """The connection, connected if need be, for one caller at a time."""
        async with self._turn:
            if self._conn is None or self._conn.is_closed():
                self._conn = None
                self._conn = await self._connect()
            yield self._conn

    async def close(self) -> None:
        """Close the connection (without waiting for a server that may not answer)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.terminate()
