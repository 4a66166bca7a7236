"""The child process of ``assert_crash_safe``: run (or continue) one run, maybe die on the way.

Started as ``python -m durable_flow.testing._child SPEC.json``. The spec names
the workflow (``MODULE:NAME`` or ``PATH.py:NAME``), the parent's ``sys.path``,
the store, the run id, the input, the scripted answers and events, the
journal file, the result file and, for a crash run, the key of the durable
point to die after. The store is wrapped in a
:class:`~durable_flow.testing._points.PointStore` that appends every durable
point's key to the journal (one ``os.write`` on an append-only descriptor:
the kernel keeps it through SIGKILL) and, right after the chosen point,
releases the run's lease (as if it had expired, so the resume does not wait
out ``lease_ttl``) and kills the process with SIGKILL.

Without a point to die at, the child drives the run to its end, answering
requests and sending events from the script and sleeping until timers are
due, then writes the run's final status, values and every top-level
checkpoint's values to the result file (JSON).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import orjson

from ..model._approvals import Principal
from ..model._clock import utcnow
from ..model._graph import Workflow
from ..model._records import PendingRequest, RunResult, RunStatus
from ..model._serde import decode, encode
from ..runtime._runtime import Runtime
from ..store._protocols import CheckpointStore, Lease
from ._points import Point, PointStore

__all__ = ["load_workflow_target", "main"]

_MAX_ROUNDS = 1000


def load_workflow_target(target: str) -> Workflow:
    """The workflow ``MODULE:NAME`` or ``PATH.py:NAME`` names (imported, like ``python -m``)."""
    where, _, name = target.rpartition(":")
    if where.endswith(".py"):
        spec = importlib.util.spec_from_file_location(Path(where).stem, where)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {where}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # pydantic resolves annotations through it
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    found: Any = module
    for part in name.split("."):
        found = getattr(found, part)
    if not isinstance(found, Workflow):
        raise TypeError(f"{target} is a {type(found).__name__}, not a Workflow")
    return found


def _store(db: str) -> CheckpointStore:
    if db.startswith(("postgresql://", "postgres://")):
        from ..store.postgres._postgres import PostgresStore

        return PostgresStore(db)
    from ..store.sqlite._sqlite import SqliteStore

    return SqliteStore(db, synchronous="normal")  # SIGKILL loses nothing NORMAL keeps


def _points_store(inner: CheckpointStore, journal: str, kill: str | None) -> CheckpointStore:
    fd = os.open(journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    async def on_points(points: list[Point], lease: Lease | None) -> None:
        keys = [p.key for p in points]
        os.write(fd, "".join(k + "\n" for k in keys).encode())
        if kill is not None and kill in keys:
            if lease is not None:
                await inner.release_lease(lease)  # as if it expired: the resume needs no wait
            os.kill(os.getpid(), signal.SIGKILL)

    return cast(CheckpointStore, PointStore(inner, on_points))


def _answer(request: PendingRequest, answers: Mapping[str, Any]) -> Any:
    """The scripted answer: by request id, else by node (qualified, then its last part).

    An in-doubt step's request is answered by ``in_doubt:STEP``, else
    ``in_doubt``; a tool approval by ``tool:NAME``: never by the node, whose
    own questions those keys would answer.
    """
    payload = request.payload if isinstance(request.payload, Mapping) else {}
    kind = payload.get("kind")
    if kind == "in_doubt":
        keys: tuple[str, ...] = (request.id, f"in_doubt:{payload.get('step')}", "in_doubt")
    elif kind == "tool_approval":
        keys = (request.id, f"tool:{payload.get('tool')}")
    else:
        keys = (request.id, request.node, request.node.rsplit(".", 1)[-1])
    for key in keys:
        if key in answers:
            return answers[key]
    raise LookupError(f"the run waits for request {request.id!r} of node {request.node!r} and "
                      f"answers= has none for it (give one by {' or '.join(map(repr, keys))})")


async def _send_events(rt: Runtime, run_id: str, events: Mapping[str, Any]) -> bool:
    """Send the scripted event of every open event wait; True when one was sent."""
    sent = False
    for row in await rt.store.get_requests(run_id, open_only=True):
        if row.kind == "event" and (name := decode(row.payload)) in events:
            await rt.send_event(run_id, name, events[name])
            sent = True
    return sent


async def _drive(rt: Runtime, workflow: Workflow, spec: Mapping[str, Any]) -> RunResult:
    """Start (or continue) the run and take it to its end with the scripted answers and events."""
    run_id = spec["run_id"]
    answers, events = _decoded(spec["answers"]), _decoded(spec["events"])
    by = spec.get("by")
    who = None if by is None else Principal(by["id"], tuple(by["roles"]))
    result = await rt.run(workflow, _decoded(spec["input"]), run_id=run_id)
    for _ in range(_MAX_ROUNDS):
        if result.status is RunStatus.QUEUED:
            result = await rt.resume(workflow, run_id)
            continue
        if result.status is not RunStatus.WAITING:
            return result
        responses = {r.id: _answer(r, answers) for r in result.pending_requests}
        if not responses and not await _send_events(rt, run_id, events):
            wake = (await rt.get_run(run_id)).wake_at
            if wake is None:
                raise LookupError(f"run {run_id} waits for an event that events= does not send")
            await asyncio.sleep(max(0.0, (wake - utcnow()).total_seconds()))
        result = await rt.resume(workflow, run_id, responses=responses or None, by=who)
    raise RuntimeError(f"run {run_id} did not finish in {_MAX_ROUNDS} resumes")


def _decoded(value: Any) -> Any:
    return decode(orjson.dumps(value))


def _plain(value: Any) -> Any:
    return orjson.loads(encode(value))


async def _report(rt: Runtime, result: RunResult) -> dict[str, Any]:
    """The run's end as JSON: status, error, values, and each top-level checkpoint's values."""
    history = []
    for cp in reversed(await rt.history(result.run_id)):
        snap = await rt.get_state(result.run_id, cp.id)
        history.append({"superstep": cp.superstep, "nodes": list(cp.nodes),
                        "values": _plain(snap.values)})
    snap = await rt.get_state(result.run_id)
    error = result.error
    return {"status": result.status.value, "values": _plain(snap.values), "history": history,
            "error": None if error is None else f"{error.type}: {error.message}"}


async def _main(spec: Mapping[str, Any]) -> dict[str, Any]:
    workflow = load_workflow_target(spec["target"])
    store = _points_store(_store(spec["db"]), spec["journal"], spec["kill"])
    async with Runtime(store, lease_ttl=spec["lease_ttl"]) as rt:
        result = await _drive(rt, workflow, spec)
        return await _report(rt, result)


def main(argv: list[str]) -> None:
    """Read the spec file, put the parent's ``sys.path`` in place, and run."""
    spec = orjson.loads(Path(argv[1]).read_bytes())
    sys.path[:] = spec["sys_path"]
    report = asyncio.run(_main(spec))
    Path(spec["result"]).write_bytes(orjson.dumps(report))


if __name__ == "__main__":
    main(sys.argv)
