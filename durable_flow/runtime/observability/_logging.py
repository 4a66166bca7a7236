"""Log output: readable lines for people, JSON lines for machines.

The engine logs through structlog with every line bound to ``run_id``,
``node`` (the qualified path) and ``superstep``; nodes log through
``ctx.log``, bound the same way. :func:`configure_logging` only chooses how
those lines are rendered and where they go. durable-flow never configures
logging on import: an application that sets up structlog itself keeps its
own configuration.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import orjson
import structlog

__all__ = ["configure_logging"]

_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def configure_logging(json: bool = False, level: str = "INFO", *,
                      stream: TextIO | None = None, tracebacks: bool = True) -> None:
    """Send structlog's lines (durable-flow's included) to ``stream``, one per line.

    ``json=True`` renders each line as one JSON object (``event``, ``level``,
    ``timestamp`` and every bound key such as ``run_id``, ``node``,
    ``superstep``) for log collectors; otherwise lines are rendered for a
    terminal, in colour when ``stream`` is one. Lines below ``level``
    (``DEBUG``, ``INFO``, ``WARNING``, ``ERROR``, ``CRITICAL``; any case) are
    dropped. ``stream`` defaults to standard error, looked up at each line so
    that redirections of ``sys.stderr`` are followed. A failed node's line
    carries its traceback (``exception`` in JSON) unless ``tracebacks`` is
    False. Raises ``ValueError`` for an unknown level. Calling it again
    replaces the configuration.

    What is logged at which level (runs, supersteps, nodes, retries,
    requests, leases) is listed in ``durable_flow.runtime.observability._observer``.
    """
    threshold = _level_number(level)
    renderer: Any
    if json:
        renderer = structlog.processors.JSONRenderer(serializer=_dumps)
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=_is_terminal(stream or sys.stderr))
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    if not tracebacks:
        processors.append(_drop_exc_info)
    if json:
        # The console renderer formats exceptions itself; JSON needs them as text.
        processors.append(structlog.processors.format_exc_info)
    structlog.configure(
        processors=[*processors, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        logger_factory=_StreamLoggerFactory(stream),
        # Not cached: each bound logger looks the stream up again (see _StreamLoggerFactory).
        cache_logger_on_first_use=False,
    )


def _drop_exc_info(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
    event.pop("exc_info", None)
    return event


def _level_number(level: str) -> int:
    name = level.upper()
    if name not in _LEVELS:
        raise ValueError(f"unknown log level {level!r}; use one of {', '.join(_LEVELS)}")
    number: int = getattr(logging, name)
    return number


def _dumps(event: dict[str, Any], **kwargs: Any) -> str:
    return orjson.dumps(event, default=kwargs.get("default"),
                        option=orjson.OPT_NON_STR_KEYS).decode()


def _is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class _StreamLoggerFactory:
    """Makes print loggers on a fixed stream, or on whatever ``sys.stderr`` is now.

    Looking standard error up per logger (rather than once) lets test runners
    and rich's live display, which swap ``sys.stderr``, capture the lines.
    """

    def __init__(self, stream: TextIO | None) -> None:
        self._stream = stream

    def __call__(self, *args: Any) -> structlog.PrintLogger:
        return structlog.PrintLogger(self._stream or sys.stderr)
