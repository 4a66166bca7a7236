"""The ``durable-flow`` command: a thin layer over :class:`durable_flow.Runtime`.

``app`` is the typer application; ``main`` is the console-script entry point.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._app import main

if TYPE_CHECKING:
    import typer

    app: typer.Typer

__all__ = ["app", "main"]


def __getattr__(name: str) -> typer.Typer:
    if name == "app":  # built on first use: the console script builds only what it runs
        from . import _app

        return _app.app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
