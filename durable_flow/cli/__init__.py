"""The ``durable-flow`` command: a thin layer over :class:`durable_flow.Runtime`.

``app`` is the typer application; ``main`` is the console-script entry point.
"""

from ._app import app, main

__all__ = ["app", "main"]
