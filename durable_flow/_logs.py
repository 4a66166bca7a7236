"""The package's structlog logger, imported only when a line is written.

``import structlog`` costs more than the rest of the runtime's imports (it
loads its console renderer and, when installed, rich and pygments), and most
processes that import durable-flow (a command that lists runs, a web
request that reads one) never log. :func:`get_logger` returns a logger that
binds like structlog's and imports structlog on its first line.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

__all__ = ["get_logger", "is_configured"]

_NAME = "durable_flow"


class _LazyLogger:
    """Binds values now; resolves structlog's logger (current configuration) per line."""

    __slots__ = ("_context",)

    def __init__(self, context: dict[str, Any]) -> None:
        self._context = context

    def bind(self, **values: Any) -> FilteringBoundLogger:
        return cast("FilteringBoundLogger", _LazyLogger({**self._context, **values}))

    def __getattr__(self, name: str) -> Any:
        import structlog

        if not structlog.is_configured():
            return getattr(_quiet().bind(**self._context), name)
        return getattr(structlog.get_logger(_NAME).bind(**self._context), name)


def _quiet() -> Any:
    """Until structlog is configured: warnings and errors only, on standard error.

    structlog's own defaults print every level to standard output, which a
    library must not do to the application that imports it.
    """
    import logging

    import structlog

    return structlog.wrap_logger(
        structlog.PrintLogger(sys.stderr), processors=structlog.get_config()["processors"],
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def get_logger() -> FilteringBoundLogger:
    """durable-flow's logger (``structlog.get_logger("durable_flow")``, imported lazily)."""
    return cast("FilteringBoundLogger", _LazyLogger({}))


def is_configured() -> bool:
    """Whether structlog was configured (by ``configure_logging`` or the application).

    A structlog that was never imported was never configured either.
    """
    structlog = sys.modules.get("structlog")
    return structlog is not None and bool(structlog.is_configured())
