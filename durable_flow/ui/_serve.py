"""Serving the app with uvicorn, refusing an open address without a token."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import uvicorn

from ..model._graph import Workflow
from ..runtime.notifications._notifiers import Notifier
from ..store._protocols import CheckpointStore
from ._app import create_app
from ._bearer import JwtVerifier
from ._security import check_bind

__all__ = ["serve"]


def serve(store: CheckpointStore, *, workflows: Sequence[Workflow] = (), host: str = "127.0.0.1",
          port: int = 8765, token: str | None = None,
          on_ready: Callable[[str], None] | None = None, notifiers: Sequence[Notifier] = (),
          base_url: str | None = None, jwt: JwtVerifier | None = None) -> None:
    """Serve the UI until SIGINT or SIGTERM.

    Raises ``ValueError`` before listening when ``host`` is not a loopback
    address and no ``token`` is given. ``on_ready`` receives the URL once the
    server listens.
    """
    check_bind(host, token)
    app = create_app(store, workflows=workflows, token=token, notifiers=notifiers,
                     base_url=base_url, jwt=jwt)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on",
                            access_log=False, server_header=False)
    server = uvicorn.Server(config)
    if on_ready is not None:
        shown = f"[{host}]" if ":" in host else host
        original = server.startup

        async def startup(sockets: object = None) -> None:
            await original(sockets=sockets)  # type: ignore[arg-type]
            if server.started:
                on_ready(f"http://{shown}:{port}/")

        server.startup = startup  # type: ignore[method-assign]
    server.run()
