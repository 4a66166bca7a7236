"""OpenTelemetry spans of runs, collected by the SDK's in-memory exporter."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from durable_flow import Blackboard, MemoryStore, RetryPolicy, RunStatus, Runtime, WorkflowBuilder


class _WhileRecording(SimpleSpanProcessor):
    """Exports only during this module's tests (other modules' runs share the provider)."""

    recording = False

    def on_end(self, span: ReadableSpan) -> None:
        if self.recording:
            super().on_end(span)


EXPORTER = InMemorySpanExporter()
_PROCESSOR = _WhileRecording(EXPORTER)
_PROVIDER = TracerProvider()
_PROVIDER.add_span_processor(_PROCESSOR)
# a process has one global provider: tests that need none run in a subprocess
trace.set_tracer_provider(_PROVIDER)


@pytest.fixture(autouse=True)
def spans() -> Iterator[InMemorySpanExporter]:
    EXPORTER.clear()
    _PROCESSOR.recording = True
    yield EXPORTER
    _PROCESSOR.recording = False
    EXPORTER.clear()


class State(Blackboard):
    done: bool = False
    asked: bool = False


def _workflow(*, fail: bool) -> Any:
    async def talk(state: State) -> dict[str, Any]:
        with trace.get_tracer("app").start_as_current_span("model call"):
            return {"done": True}

    def boom(state: State) -> dict[str, Any]:
        if fail:
            raise ValueError("no tide")
        return {}

    inner = WorkflowBuilder("inner", state=State)
    inner.add_node("talk", talk)
    inner.set_entry("talk")
    b = WorkflowBuilder("traced", state=State)
    b.add_subworkflow("review", inner.build(), inputs=[], outputs={"done": "done"})
    b.add_node("boom", boom, retry=RetryPolicy(max_attempts=2, initial_delay=0, jitter=False))
    b.set_entry("review")
    b.add_edge("review", "boom")
    return b.build()


def _by_name(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def _attr(span: ReadableSpan, key: str) -> Any:
    assert span.attributes is not None
    return span.attributes.get(f"durable_flow.{key}")


async def test_a_run_superstep_and_task_spans_nest_with_their_attributes(
        spans: InMemorySpanExporter) -> None:
    async with Runtime(MemoryStore()) as rt:
        result = await rt.run(_workflow(fail=False), {}, run_id="t1")
    assert result.status is RunStatus.COMPLETED
    done = list(spans.get_finished_spans())
    [run] = _by_name(done, "durable_flow.run")
    steps = _by_name(done, "durable_flow.superstep")
    tasks = {_attr(s, "node"): s for s in _by_name(done, "durable_flow.task")}
    assert _attr(run, "run_id") == "t1" and _attr(run, "checkpoint_id") == result.checkpoint_id
    assert sorted((_attr(s, "namespace"), _attr(s, "superstep")) for s in steps) == [
        ("", 1), ("", 2), ("review", 1)]
    assert set(tasks) == {"review", "review.talk", "boom"}
    by_id = {s.context.span_id: s for s in done}

    def parent(span: ReadableSpan) -> ReadableSpan:
        assert span.parent is not None
        return by_id[span.parent.span_id]

    top = {_attr(s, "superstep"): s for s in steps if _attr(s, "namespace") == ""}
    assert parent(top[1]) is run and parent(top[2]) is run
    assert parent(tasks["review"]) is top[1] and parent(tasks["boom"]) is top[2]
    nested = next(s for s in steps if _attr(s, "namespace") == "review")
    assert parent(nested) is tasks["review"] and parent(tasks["review.talk"]) is nested
    [call] = _by_name(done, "model call")  # the node's own span sits under its attempt
    assert parent(call) is tasks["review.talk"]
    assert all(_attr(s, "checkpoint_id") for s in steps)
    assert all(s.status.status_code is not StatusCode.ERROR for s in done)


async def test_every_failed_attempt_is_an_error_span_with_its_exception(
        spans: InMemorySpanExporter) -> None:
    async with Runtime(MemoryStore()) as rt:
        result = await rt.run(_workflow(fail=True), {}, run_id="t2")
    assert result.status is RunStatus.FAILED
    done = list(spans.get_finished_spans())
    attempts = [s for s in _by_name(done, "durable_flow.task") if _attr(s, "node") == "boom"]
    assert [_attr(s, "attempt") for s in attempts] == [1, 2]
    for span in attempts:
        assert span.status.status_code is StatusCode.ERROR
        [event] = span.events
        assert event.name == "exception" and event.attributes is not None
        assert event.attributes["exception.type"] == "ValueError"
        assert event.attributes["exception.message"] == "no tide"
        assert "Traceback" in str(event.attributes["exception.stacktrace"])
    [run] = _by_name(done, "durable_flow.run")
    assert run.status.status_code is StatusCode.ERROR
    assert "ValueError: no tide" in (run.status.description or "")


async def test_the_callers_span_is_the_parent_of_the_run_and_a_resume_is_a_new_run_span(
        spans: InMemorySpanExporter) -> None:
    async def ask(state: State, ctx: Any) -> dict[str, Any]:
        return {"asked": await ctx.request({"q": "?"}, response_type=bool)}

    b = WorkflowBuilder("asking", state=State)
    b.add_node("ask", ask)
    b.set_entry("ask")
    wf = b.build()
    tracer = trace.get_tracer("app")
    async with Runtime(MemoryStore()) as rt:
        with tracer.start_as_current_span("handler") as handler:
            first = await rt.run(wf, {}, run_id="t3")
        await rt.resume(wf, "t3", responses={first.pending_requests[0].id: True})
    done = list(spans.get_finished_spans())
    runs = _by_name(done, "durable_flow.run")
    assert [_attr(s, "status") for s in runs] == ["waiting", "completed"]
    assert runs[0].parent is not None
    assert runs[0].parent.span_id == handler.get_span_context().span_id
    waiting = next(s for s in _by_name(done, "durable_flow.task") if _attr(s, "waiting"))
    assert _attr(waiting, "node") == "ask"


@pytest.mark.process
def test_no_opentelemetry_no_tracing_and_no_import() -> None:
    script = textwrap.dedent('''
        import asyncio, sys
        sys.modules["opentelemetry"] = None  # as if it were not installed
        from durable_flow import Blackboard, MemoryStore, Runtime, WorkflowBuilder
        from durable_flow.runtime.observability._tracing import otel_available, run_trace

        class S(Blackboard):
            done: bool = False

        b = WorkflowBuilder("plain", state=S)
        b.add_node("go", lambda state: {"done": True})
        b.set_entry("go")

        async def main():
            async with Runtime(MemoryStore()) as rt:
                assert (await rt.run(b.build(), {})).state.done

        asyncio.run(main())
        assert not otel_available() and run_trace("r", "w") is None
        assert not [m for m in sys.modules if m.startswith("opentelemetry.")]
        print("ok")
    ''')
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           timeout=60)
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "ok"
