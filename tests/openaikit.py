"""A local OpenAI-compatible HTTP server for tests: JSON replies, server-sent event streams,
status codes with headers, and streams cut off in the middle (the connection closed).

Each request takes the next scripted reply; the server records every request body.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer: ``status`` + ``body`` (JSON), or ``events`` streamed as SSE."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    events: list[Any] | None = None
    cut_after: int | None = None  # close the connection after this many events


class Server:
    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        self.url = ""


def text_events(*pieces: str, usage: tuple[int, int] = (7, 3)) -> list[Any]:
    """A streamed text reply: one delta per piece, a finish, the usage, then [DONE]."""
    out: list[Any] = [{"choices": [{"index": 0, "delta": {"role": "assistant"}}]}]
    out += [{"choices": [{"index": 0, "delta": {"content": p}}]} for p in pieces]
    out.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    out.append({"choices": [], "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]}})
    out.append("[DONE]")
    return out


def tool_events(call_id: str, name: str, *argument_parts: str, index: int = 0) -> list[Any]:
    """A streamed tool call whose arguments come in ``argument_parts``."""
    out: list[Any] = [{"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": index, "id": call_id, "type": "function",
         "function": {"name": name, "arguments": ""}}]}}]}]
    out += [{"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": index, "function": {"arguments": part}}]}}]} for part in argument_parts]
    out.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    out.append("[DONE]")
    return out


def serve() -> Iterator[Server]:
    """Run the server in a thread for the duration of a fixture."""
    state = Server()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            state.requests.append({"path": self.path, "headers": dict(self.headers),
                                   "body": json.loads(self.rfile.read(length))})
            reply = state.replies.pop(0)
            if reply.events is None:
                self.send_json(reply)
            else:
                self.send_events(reply)

        def send_json(self, reply: Reply) -> None:
            body = reply.body
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in reply.headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def send_events(self, reply: Reply) -> None:
            self.send_response(reply.status)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()  # HTTP/1.0, no length: the body ends when the connection closes
            assert reply.events is not None
            for i, event in enumerate(reply.events):
                if reply.cut_after is not None and i >= reply.cut_after:
                    break
                data = event if isinstance(event, str) else json.dumps(event)
                self.wfile.write(f": keep-alive\n\ndata: {data}\n\n".encode())
                self.wfile.flush()
            self.close_connection = True

        def log_message(self, *args: Any) -> None:
            pass

    with serving(Handler) as url:
        state.url = url
        yield state


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve ``handler`` on a free local port in a thread; yields the ``/v1`` base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
