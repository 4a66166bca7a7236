"""Printing: JSON for scripts, rich tables for people.

User data (payloads, values, messages) is always wrapped in ``Text`` so that
brackets in it are never read as rich markup.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ..model._records import (
    CheckpointInfo,
    ParkedTask,
    PendingRequest,
    RunInfo,
    RunStatus,
    Snapshot,
)
from ..model._task_id import TaskId, group_tasks
from ._support import CliOptions, compact, jsonable

__all__ = [
    "STATUS_STYLE",
    "byte_size",
    "cell",
    "emit_json",
    "history_table",
    "make_console",
    "parked_text",
    "preview",
    "requests_table",
    "respond_command",
    "runs_table",
    "snapshot_view",
    "status_text",
    "when",
]

STATUS_STYLE = {
    RunStatus.RUNNING: "cyan", RunStatus.WAITING: "yellow", RunStatus.COMPLETED: "green",
    RunStatus.FAILED: "red", RunStatus.CANCELLED: "dim", RunStatus.PAUSED: "magenta",
}
_NON_TERMINAL_WIDTH = 160  # wide enough that ids in tables stay whole when piped


def make_console() -> Console:
    """A console on the current standard output (rich picks terminal or not)."""
    width = None if sys.stdout.isatty() else _NON_TERMINAL_WIDTH
    return Console(width=width, highlight=False)


def emit_json(data: Any) -> None:
    """Write ``data`` as indented JSON on standard output (records by their field names)."""
    out = orjson.dumps(data, default=jsonable,
                       option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
    sys.stdout.write(out.decode() + "\n")


def when(moment: datetime | None) -> str:
    """A timestamp for tables: UTC, to the second."""
    return moment.strftime("%Y-%m-%d %H:%M:%SZ") if moment else ""


def preview(value: Any, limit: int = 120) -> str:
    """One-line JSON of ``value``, cut at ``limit`` characters."""
    text = value if isinstance(value, str) else compact(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def cell(value: Any, style: str = "") -> Text:
    """A table cell showing ``value`` literally (no markup)."""
    return Text(value if isinstance(value, str) else preview(value), style=style)


def status_text(status: RunStatus) -> Text:
    """The status, coloured."""
    return Text(status.value, style=STATUS_STYLE.get(status, ""))


def _table(*columns: str, title: str | None = None) -> Table:
    table = Table(title=title, title_justify="left", header_style="bold")
    for name in columns:
        table.add_column(name, overflow="fold")
    return table


def runs_table(runs: Sequence[RunInfo]) -> Table:
    """One row per run."""
    labelled = any(r.labels for r in runs)  # the column only when some run has labels
    table = _table("run", "workflow", "version", "status", "updated", "wakes", "ref", "error",
                   *(["labels"] if labelled else []))
    for r in runs:
        error = f"{r.error.type}: {r.error.message}" if r.error else ""
        if r.pause_reason:  # why an operator paused it
            error = f"paused: {r.pause_reason}" + (f"; {error}" if error else "")
        labels = " ".join(f"{k}={v}" for k, v in sorted(r.labels.items()))
        table.add_row(cell(r.run_id), cell(r.workflow_name), cell(r.workflow_version),
                      status_text(r.status), when(r.updated_at), when(r.wake_at),
                      cell(r.workflow_ref or ""), cell(preview(error, 60)),
                      *([cell(labels)] if labelled else []))
    return table


def history_table(checkpoints: Sequence[CheckpointInfo]) -> Table:
    """One row per checkpoint, newest first."""
    table = _table("superstep", "checkpoint", "created", "source", "status", "nodes",
                   "parked", "routing reason", "size")
    for c in checkpoints:
        ref = f"@{c.superstep}" if c.namespace == "" else str(c.superstep)
        table.add_row(ref, cell(c.id), when(c.created_at), c.source,
                      status_text(c.status), cell(tasks_text(c.nodes)),
                      cell(tasks_text(c.parked), "yellow"), cell(c.routing_reason or ""),
                      byte_size(c.size))
    return table


def byte_size(size: int) -> str:
    """A size with its unit: ``812 B``, ``14.2 kB``, ``3.1 MB`` (powers of 1000)."""
    value, unit = float(size), "B"
    for bigger in ("kB", "MB", "GB"):
        if value < 1000:
            break
        value, unit = value / 1000, bigger
    return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"


def tasks_text(tasks: Sequence[str]) -> str:
    """Task ids for a table: a node's consecutive ``Send`` instances as ``summarize[0..39]``."""
    return ", ".join(group_tasks(tasks))


def instance_counts(snap: Snapshot) -> list[str]:
    """Per map node among the next tasks: its instances, and how many wait for input."""
    counts: dict[str, list[str]] = {}
    for task in snap.next_tasks:
        if (tid := TaskId.parse(task)).is_instance:
            counts.setdefault(tid.node, []).append(task)
    prefix = f"{snap.namespace}." if snap.namespace else ""
    asking = {r.node.removeprefix(prefix).split(".")[0] for r in snap.pending_requests}
    lines = []
    for node, tasks in counts.items():
        waiting = sum(t in asking for t in tasks)
        lines.append(f"{node}: {len(tasks)} instance{'s' * (len(tasks) != 1)}"
                     + (f", {waiting} waiting for input" if waiting else ""))
    return lines


def parked_text(task: ParkedTask) -> str:
    """One parked task: ``approve since superstep 2, waits for request approve@2#0``.

    A timer's wake time, or a deadline, follows as ``until ...``.
    """
    until = f" until {when(task.wake_at)}" if task.wake_at else ""
    return (f"{task.node} since superstep {task.since_superstep}, waits for {task.kind} "
            f"{', '.join(task.waits_for)}".rstrip() + until)


def schema_summary(schema: dict[str, Any]) -> str:
    """A short name for the expected answer type."""
    kind = schema.get("type")
    if isinstance(kind, str):
        return kind if kind != "array" else f"array of {schema_summary(schema.get('items', {}))}"
    title = schema.get("title")
    return str(title) if title else preview(schema, 60)


def requests_table(requests: Sequence[PendingRequest], *, with_run: bool = True,
                   statuses: Mapping[str, RunStatus] | None = None) -> Table:
    """The pending requests (the inbox); ``statuses``: a column with each one's run status.

    A request of a task parked by ``waits="branch"`` is open while its run is
    still ``running``: the status column says so.
    """
    columns = ("request", *(("run", "workflow") if with_run else ()),
               *(("run status",) if statuses is not None else ()), "node", "asked",
               "deadline", "payload", "expects")
    table = _table(*columns)
    for r in requests:
        run_cols = (cell(r.run_id), cell(r.workflow_name)) if with_run else ()
        status = statuses.get(r.run_id) if statuses is not None else None
        status_col = () if statuses is None else (status_text(status) if status else "",)
        table.add_row(cell(r.id), *run_cols, *status_col, cell(r.node), when(r.created_at),
                      when(r.expires_at) or "none", cell(preview(r.payload, 80)),
                      cell(schema_summary(r.response_schema)))
    return table


_SIMPLE: dict[str, Any] = {"boolean": True, "integer": 0, "number": 0, "string": "...",
                           "array": [], "null": None}


def example_answer(schema: Mapping[str, Any]) -> str:
    """A JSON answer that fits ``schema``, to show how to answer; ``JSON`` when none is found.

    Objects get their required fields (each an example of its own schema),
    enums and constants their first value, numbers their minimum. The result
    is checked against the schema, so a suggestion is never an invalid answer.
    """
    try:
        value = _example(schema, schema.get("$defs", {}), depth=0)
        import jsonschema

        jsonschema.validate(value, dict(schema))
    except Exception:  # no example found, or it does not fit: say what is expected instead
        return "JSON"
    return orjson.dumps(value).decode()


def _example(schema: Mapping[str, Any], defs: Mapping[str, Any], *, depth: int) -> Any:
    if depth > 8:
        raise ValueError("schema too deep for an example")
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return _example(defs[ref.removeprefix("#/$defs/")], defs, depth=depth + 1)
    for key in ("const", "default"):
        if key in schema:
            return schema[key]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return _example(schema[key][0], defs, depth=depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0]
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {name: _example(props.get(name, {}), defs, depth=depth + 1)
                for name in schema.get("required", ())}
    if kind in ("integer", "number") and "minimum" in schema:
        return schema["minimum"]
    if kind == "string" and schema.get("minLength", 0) > 3:
        return "." * int(schema["minLength"])
    return _SIMPLE[str(kind)]


def respond_command(opts: CliOptions, request: PendingRequest) -> str:
    """The shell command that answers ``request``, with an answer that fits its schema.

    An assigned request's command names who answers (``--by``): its one
    assignee, else a placeholder.
    """
    args = ["durable-flow", *opts.db_args, "respond", request.run_id, request.id,
            "--value", example_answer(request.response_schema)]
    if request.assignees or request.roles:
        one = request.assignees[0] if len(request.assignees) == 1 and not request.roles else "USER"
        args += ["--by", one]
    return shlex.join(args)


def values_table(values: dict[str, Any], title: str = "blackboard") -> Table:
    """One row per blackboard field."""
    table = _table("field", "value", title=title)
    for key in values:
        table.add_row(cell(key), cell(preview(values[key], 200)))
    return table


def _facts(rows: Iterable[tuple[str, RenderableType | str]]) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    for name, value in rows:
        grid.add_row(name, value)
    return grid


def superstep_text(snap: Snapshot) -> str:
    """The checkpoint's superstep; for a run stopped in the next one, which it is.

    A run waits *in* the superstep after its last checkpoint (``run`` says so,
    and its request ids are numbered by it: ``approve@2#0``).
    """
    if snap.status is RunStatus.WAITING and snap.next_tasks:
        return f"{snap.superstep} committed; waiting in superstep {snap.superstep + 1}"
    return str(snap.superstep)


def snapshot_view(snap: Snapshot, info: RunInfo | None = None) -> RenderableType:
    """A snapshot with its nested sub-workflows, for ``show``."""
    rows: list[tuple[str, RenderableType | str]] = []
    if info is not None:
        rows += [("run", cell(info.run_id)), ("workflow", cell(info.workflow_name)),
                 ("ref", cell(info.workflow_ref or "(not recorded)"))]
        if info.forked_from is not None:
            rows.append(("forked from", cell(f"{info.forked_from.run_id} @ "
                                             f"{info.forked_from.checkpoint_id}")))
        if info.status is RunStatus.PAUSED:  # the run row's status, and why
            why = info.pause_reason or ("a node failed (on_failure=\"pause\"): unpause runs "
                                        "it again" if info.error else "")
            rows.append(("paused", cell(why or "(no reason given)", "magenta")))
        if info.labels:
            rows.append(("labels", cell(" ".join(f"{k}={v}"
                                                 for k, v in sorted(info.labels.items())))))
        if info.concurrency_key is not None:  # workers run its key's runs in turn
            rows.append(("concurrency key", cell(info.concurrency_key)))
    else:
        rows.append(("namespace", cell(snap.namespace)))
    rows += [("status", status_text(snap.status)), ("checkpoint", cell(snap.checkpoint_id)),
             ("superstep", superstep_text(snap)),
             ("next tasks", cell(tasks_text(snap.next_tasks) or "(none)"))]
    rows += [("map", cell(line)) for line in instance_counts(snap)]
    rows += [("parked", cell(parked_text(task), "yellow")) for task in snap.parked]
    if snap.error is not None:
        where = f" in {snap.error.node}" if snap.error.node else ""
        rows.append(("error", cell(f"{snap.error.type}{where}: {snap.error.message}", "red")))
    if snap.node_histories:
        rows.append(("node histories", cell(", ".join(
            f"{n} ({len(msgs)} message{'s' * (len(msgs) != 1)})"
            for n, msgs in snap.node_histories.items()))))
    parts: list[RenderableType] = [_facts(rows), values_table(snap.values)]
    if info is not None and snap.pending_requests:
        parts.append(requests_table(snap.pending_requests, with_run=False))
    for node, sub in snap.subworkflows.items():
        kind = "sub-workflow instance" if TaskId.parse(node).is_instance else "sub-workflow"
        parts.append(Text(f"{kind} {node} (namespace {sub.namespace or node})",
                          style="bold"))
        parts.append(Padding(snapshot_view(sub), (0, 0, 0, 4), expand=False))
    return Group(*parts)
