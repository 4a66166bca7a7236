"""What an execution reports as it goes: structlog lines and OpenTelemetry spans.

Every event of a run passes through :class:`RunObserver` (it is the
``RunContext``'s event sink), which logs it at its level, bound to
``run_id``, ``node``, ``superstep`` and ``namespace``, advances the run's
trace (:mod:`._tracing`) and hands it to a stream when one listens:

========================================  =========
events                                     level
========================================  =========
run_started, run_completed, run_waiting,   INFO
run_cancelled, request_issued,
request_answered
superstep_started, node_started,           DEBUG
node_completed, checkpoint_saved,
lease_acquired, lease_renewed,
lease_released
node_retrying, lease_renew_failed,         WARNING
lease_lost, answer_rejected
node_failed (with its traceback),          ERROR
run_failed
========================================  =========

The engine logs ``node_retrying``, ``node_failed`` and ``answer_rejected``
itself (it holds the exception); :mod:`._lease` logs the renewals.

INFO and DEBUG lines are written only once structlog is configured (by
:func:`durable_flow.configure_logging` or by the application): structlog's
defaults print every level to standard output, which a library must not
flood. Warnings and errors are written either way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ..._logs import get_logger, is_configured
from ...model._records import Event, RunResult
from ...store._protocols import Lease
from ._tracing import run_trace

__all__ = ["RunObserver"]

_log = get_logger()

_INFO = frozenset({"run_started", "request_issued", "request_answered"})
_DEBUG = frozenset({"superstep_started", "node_started", "node_completed", "checkpoint_saved",
                    "subworkflow_failed"})
_FINAL_LEVEL = {"run_completed": "info", "run_waiting": "info", "run_paused": "info",
                "run_cancelled": "info",
                "run_failed": "error"}
# keys already on the line, or too large for one
_SKIP = frozenset({"traceback"})


class RunObserver:
    """Logs, traces and forwards the events of one execution."""

    def __init__(self, lease: Lease, workflow_name: str,
                 sink: Callable[[Event], None] | None) -> None:
        self.log = _log.bind(run_id=lease.run_id)
        self._verbose = is_configured()
        self._sink = sink
        self._trace = run_trace(lease.run_id, workflow_name)
        if self._verbose:
            self.log.debug("lease_acquired", owner=lease.owner, epoch=lease.epoch,
                           expires_at=lease.expires_at.isoformat(), workflow=workflow_name)

    @property
    def listening(self) -> bool:
        """Whether any event is used: logged (structlog configured), traced or streamed."""
        return self._verbose or self._trace is not None or self._sink is not None

    def emit(self, event: Event) -> None:
        """The event sink: log, trace, then forward ``event``."""
        if self._verbose:
            if event.kind in _DEBUG:
                self._line(self.log.debug, event)
            elif event.kind in _INFO:
                self._line(self.log.info, event)
        if self._trace is not None:
            self._trace.on_event(event)
        if self._sink is not None:
            self._sink(event)

    def finish(self, final: Event | None, error: BaseException | None = None) -> None:
        """Log how the execution ended and close its trace."""
        result: RunResult | None = final.result if final is not None else None
        if final is not None and result is not None:
            level = _FINAL_LEVEL.get(final.kind, "info")
            if level == "info" and not self._verbose:
                level = ""
            fields: dict[str, Any] = {"status": result.status.value,
                                      "checkpoint_id": result.checkpoint_id}
            if result.error is not None:
                fields.update(error=f"{result.error.type}: {result.error.message}",
                              failed_node=result.error.node)
            if result.pending_requests:
                fields["pending_requests"] = [r.id for r in result.pending_requests]
            if level:
                getattr(self.log, level)(final.kind, **fields)
            if self._verbose:
                self.log.debug("lease_released", status=result.status.value)
        elif isinstance(error, asyncio.CancelledError):
            if self._verbose:  # stopped on purpose (Ctrl-C, a worker's stop): no warning
                self.log.info("run_stopped", error="cancelled")
        elif error is not None:
            self.log.warning("run_stopped", error=f"{type(error).__name__}: {error}")
        if self._trace is not None:
            self._trace.finish(result, error)

    def _line(self, method: Callable[..., Any], event: Event) -> None:
        fields = {k: v for k, v in event.data.items() if k not in _SKIP}
        if event.node is not None:
            fields["node"] = event.node
        if event.namespace:
            fields["namespace"] = event.namespace
        method(event.kind, superstep=event.superstep, **fields)
