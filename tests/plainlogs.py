"""In the test process, logged exceptions render as plain Python tracebacks.

structlog's console renderer draws an exception with rich when rich is
installed (it is: the CLI uses it): the source and the locals of every frame,
25 ms to half a second of CPU each. The tests log hundreds of them (failing
nodes, retries, lost leases) into captured output, and none reads more than
their text, which a plain traceback has too: the frames and the message.

Child processes (the CLI tests' ``durable-flow`` subprocesses) are untouched.
"""

from __future__ import annotations

from typing import Any

import structlog
from structlog.dev import ConsoleRenderer, plain_traceback


class PlainTracebackRenderer(ConsoleRenderer):
    """structlog's console renderer with Python's own traceback as its default."""

    def __init__(self, *args: Any, exception_formatter: Any = plain_traceback,
                 **kwargs: Any) -> None:
        super().__init__(*args, exception_formatter=exception_formatter, **kwargs)


def use_plain_tracebacks() -> None:
    """Render exceptions plainly: structlog's defaults, and every renderer made from now on."""
    for processor in structlog.get_config()["processors"]:
        # the default renderer (``structlog.reset_defaults()`` keeps this instance)
        if isinstance(processor, ConsoleRenderer):
            processor.exception_formatter = plain_traceback
    # configure_logging() looks the class up at each call
    structlog.dev.ConsoleRenderer = PlainTracebackRenderer  # type: ignore[misc]
