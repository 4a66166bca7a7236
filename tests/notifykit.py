"""Local receivers for notifier tests: an HTTP endpoint and an SMTP server that start late."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from aiosmtpd.controller import Controller

from durable_flow.runtime.notifications._notifiers import Notification


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class WebhookReceiver:
    """Records every POST (body and Idempotency-Key); the first `fail` replies are 503."""

    def __init__(self, port: int, *, fail: int = 0) -> None:
        self.port, self.fail = port, fail
        self.received: list[tuple[str | None, dict]] = []
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                receiver.received.append((self.headers.get("Idempotency-Key"), body))
                code = 503 if receiver.fail > 0 else 200
                receiver.fail -= 1
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


class _Handler:
    def __init__(self, sink: SmtpReceiver) -> None:
        self.sink = sink

    async def handle_DATA(self, server, session, envelope) -> str:
        self.sink.messages.append((envelope.rcpt_tos, envelope.content.decode()))
        if self.sink.fail > 0:
            self.sink.fail -= 1
            return "451 try again later"
        return "250 OK"


class SmtpReceiver:
    """An aiosmtpd server on `port`; the first `fail` messages get a 451."""

    def __init__(self, port: int, *, fail: int = 0) -> None:
        self.port, self.fail = port, fail
        self.messages: list[tuple[list[str], str]] = []
        self._controller = Controller(_Handler(self), hostname="127.0.0.1", port=port)

    def start(self) -> None:
        self._controller.start()

    def stop(self) -> None:
        self._controller.stop()


class Recorder:
    """A notifier that fails its first ``fail`` sends."""

    def __init__(self, fail: int = 0) -> None:
        self.fail = fail
        self.sent: list[Notification] = []

    async def send(self, notification: Notification) -> None:
        self.sent.append(notification)
        if self.fail > 0:
            self.fail -= 1
            raise OSError("receiver down")
