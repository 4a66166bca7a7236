"""OpenTelemetry spans of run executions, built from the run's events (extra ``otel``).

One ``durable_flow.run`` span per execution (``run``, ``resume``, ``fork``, a
worker's claim), a ``durable_flow.superstep`` child per superstep and a
``durable_flow.task`` child of its superstep per attempt of a task; a
sub-workflow's supersteps are children of its node's task span. Spans carry
``durable_flow.run_id``, ``durable_flow.node``, ``durable_flow.superstep`` and
``durable_flow.checkpoint_id``; a failed attempt has status ERROR and its
exception recorded (type, message, traceback).

The spans follow the events the engine emits anyway, so the engine holds no
tracing code. Without the ``opentelemetry`` package nothing here is imported
beyond one look-up per process (:func:`run_trace` returns None); with it but
without an SDK, the API's spans do nothing.
"""

from __future__ import annotations

import contextlib
import importlib.util
from datetime import timedelta
from functools import cache
from typing import TYPE_CHECKING, Any

from ...model._records import Event, RunResult, RunStatus

if TYPE_CHECKING:
    from opentelemetry.trace import Span

__all__ = ["RunTrace", "otel_available", "run_trace"]

_PREFIX = "durable_flow."
_ENDS_TASK = {"node_completed", "node_failed", "request_issued"}


@cache
def otel_available() -> bool:
    """Whether the OpenTelemetry API is installed (looked up once per process)."""
    return importlib.util.find_spec("opentelemetry") is not None


def run_trace(run_id: str, workflow_name: str) -> RunTrace | None:
    """A trace for one execution of ``run_id``, or None when nothing would record it.

    None without OpenTelemetry, and with its API but no tracer provider set
    (its spans would record nothing): that execution builds no spans.
    """
    if not otel_available():
        return None
    from opentelemetry import trace

    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return RunTrace(run_id, workflow_name)


def _ns(dt: Any) -> int:
    return int(dt.timestamp() * 1_000_000_000)


class RunTrace:
    """The open spans of one execution, advanced event by event."""

    def __init__(self, run_id: str, workflow_name: str) -> None:
        from opentelemetry import trace

        self._trace = trace
        self._tracer = trace.get_tracer("durable_flow")
        self.run_id = run_id
        # the caller's current span (a request handler's, say) is the parent
        self.run = self._tracer.start_span("durable_flow.run", attributes={
            _PREFIX + "run_id": run_id, _PREFIX + "workflow": workflow_name})
        self._supersteps: dict[str, Span] = {}  # namespace -> its open superstep
        self._tasks: dict[str, Span] = {}  # qualified node -> its open attempt
        self._attempts: dict[str, int] = {}
        self._tokens: dict[str, object] = {}

    def on_event(self, event: Event) -> None:
        """Open or close the spans ``event`` starts or ends."""
        kind = event.kind
        if kind == "superstep_started":
            self._start_superstep(event)
        elif kind == "checkpoint_saved":
            span = self._supersteps.pop(event.namespace, None)
            if span is not None:
                span.set_attribute(_PREFIX + "checkpoint_id", str(event.data["checkpoint_id"]))
                span.end(_ns(event.ts))
        elif event.node is not None:
            self._task_event(event, event.node)

    def _start_superstep(self, event: Event) -> None:
        self._end_superstep(event.namespace, event)
        parent = self._tasks.get(event.namespace, self.run) if event.namespace else self.run
        self._supersteps[event.namespace] = self._tracer.start_span(
            "durable_flow.superstep", context=self._trace.set_span_in_context(parent),
            start_time=_ns(event.ts), attributes={
                _PREFIX + "run_id": self.run_id, _PREFIX + "superstep": event.superstep,
                _PREFIX + "namespace": event.namespace,
                _PREFIX + "tasks": [str(t) for t in event.data.get("tasks", ())]})

    def _task_event(self, event: Event, node: str) -> None:
        if event.kind == "node_started":
            self._attempts[node] = 1
            self._start_task(event, node, _ns(event.ts))
        elif event.kind == "node_retrying":
            self._end_task(node, event, failed=True)
            delay = float(event.data.get("delay") or 0.0)
            self._attempts[node] = self._attempts.get(node, 1) + 1
            self._start_task(event, node, _ns(event.ts + timedelta(seconds=delay)))
        elif event.kind in _ENDS_TASK and node in self._tasks:
            self._end_task(node, event, failed=event.kind == "node_failed")

    def _start_task(self, event: Event, node: str, start: int) -> None:
        parent = self._supersteps.get(event.namespace, self.run)
        span = self._tracer.start_span(
            "durable_flow.task", context=self._trace.set_span_in_context(parent),
            start_time=start, attributes={
                _PREFIX + "run_id": self.run_id, _PREFIX + "node": node,
                _PREFIX + "superstep": event.superstep, _PREFIX + "namespace": event.namespace,
                _PREFIX + "attempt": self._attempts.get(node, 1)})
        self._tasks[node] = span
        # the node's own code runs in this task: spans it starts (an HTTP
        # client's, say) become children of its attempt
        from opentelemetry import context

        self._tokens[node] = context.attach(self._trace.set_span_in_context(span))

    def _end_task(self, node: str, event: Event, *, failed: bool) -> None:
        span = self._tasks.pop(node, None)
        token = self._tokens.pop(node, None)
        if token is not None:
            from opentelemetry import context

            with contextlib.suppress(Exception):
                context.detach(token)  # type: ignore[arg-type]  # the token attach returned
        if span is None:
            return
        if failed:
            self._record_failure(span, event)
        elif event.kind == "request_issued":
            span.set_attribute(_PREFIX + "waiting", True)
        for namespace in [ns for ns in self._supersteps if ns == node or ns.startswith(node + ".")]:
            self._end_superstep(namespace, event)
        span.end(_ns(event.ts))

    def _record_failure(self, span: Span, event: Event) -> None:
        from opentelemetry.trace import Status, StatusCode

        error = str(event.data.get("error", ""))
        kind, _, message = error.partition(": ")
        attributes = {"exception.type": str(event.data.get("error_type") or kind),
                      "exception.message": message or error}
        if event.data.get("traceback"):
            attributes["exception.stacktrace"] = str(event.data["traceback"])
        span.add_event("exception", attributes, timestamp=_ns(event.ts))
        span.set_status(Status(StatusCode.ERROR, error))

    def _end_superstep(self, namespace: str, event: Event) -> None:
        span = self._supersteps.pop(namespace, None)
        if span is not None:
            span.end(_ns(event.ts))

    def finish(self, result: RunResult | None, error: BaseException | None = None) -> None:
        """End every open span and the run's, with its status (ERROR when it failed)."""
        for node in list(self._tasks):
            span = self._tasks.pop(node)
            self._tokens.pop(node, None)  # their tasks ended with their own contexts
            span.end()
        for span in self._supersteps.values():
            span.end()
        self._supersteps.clear()
        if result is not None:
            self.run.set_attribute(_PREFIX + "status", result.status.value)
            self.run.set_attribute(_PREFIX + "checkpoint_id", result.checkpoint_id)
            if result.status is RunStatus.FAILED and result.error is not None:
                self._fail_run(f"{result.error.type}: {result.error.message}")
        elif error is not None:
            self.run.record_exception(error)
            self._fail_run(f"{type(error).__name__}: {error}")
        self.run.end()

    def _fail_run(self, description: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        self.run.set_status(Status(StatusCode.ERROR, description))
