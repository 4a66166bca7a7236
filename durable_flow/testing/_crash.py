"""``assert_crash_safe``: kill a workflow's run after each durable point, resume, compare.

One uninterrupted run (in a child process, like every run here) learns the
workflow's durable points: each key its
:class:`~durable_flow.testing._points.PointStore` journals. Then, for each
point, a child runs the workflow with a fresh run id and dies by SIGKILL
right after that point; a second child resumes the run to its end. The
resumed run must end with the reference run's status and values, and no
``ctx.step`` result or saved task write may be written twice across the two
processes (that is a step or a finished task that ran again). The points are
checked a few at a time, each in its own SQLite file (or with its own run id
on PostgreSQL).

The children import the workflow: it must live in a module variable the
children can import (``MODULE:NAME``, found from the object; a module loaded
from a file path is loaded again from that file), or be given as
``"MODULE:NAME"`` / ``"PATH.py:NAME"``. Inputs, answers and events travel as
stored JSON, so they must be storable values (no functions).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any

import orjson

from ..errors import InvalidInputError
from ..model._approvals import Principal, principal_of
from ..model._blackboard import Blackboard
from ..model._graph import Workflow
from ..model._ids import new_id
from ..model._serde import encode
from ._forks import ForkServer, fork_server
from ._points import Point

__all__ = ["CrashSafetyError", "assert_crash_safe"]

_CHILD = "durable_flow.testing._child"
_TEMPLATE = "template.db"


class CrashSafetyError(AssertionError):
    """A run killed after ``point`` did not resume to what an uninterrupted run gives.

    ``node`` is the node that wrote the first difference (or that ran
    again); ``differences`` lists what differed, one line each; ``failed``
    is how many points failed in all (this error describes the first).
    """

    def __init__(self, message: str, *, point: str | None = None, node: str | None = None,
                 differences: tuple[str, ...] = (), failed: int = 1) -> None:
        super().__init__(message)
        self.point = point
        self.node = node
        self.differences = differences
        self.failed = failed


@dataclass(frozen=True)
class _Plan:
    """What every child of one ``assert_crash_safe`` call shares."""

    target: str
    db: str | None  # a PostgreSQL URL, or None for one SQLite file per run
    folder: Path
    token: str
    payload: dict[str, Any]
    timeout: float
    server: ForkServer | None = None  # forks the children; None: a fresh interpreter each


@dataclass
class _Failure:
    index: int
    point: Point
    node: str | None
    differences: list[str] = field(default_factory=list)


def assert_crash_safe(workflow: Workflow | str, input: Mapping[str, Any] | Blackboard | None = None,
                      *, answers: Mapping[str, Any] | None = None,
                      events: Mapping[str, Any] | None = None, store: str = "sqlite",
                      timeout: float = 120.0, workers: int | None = None,
                      by: Principal | str | None = None) -> int:
    """Kill a run of ``workflow`` after each durable point, resume it, and compare.

    ``answers`` answers requests (by request id, else by node id; an
    in-doubt step, found only after a kill, by ``"in_doubt:STEP"`` or
    ``"in_doubt"``, e.g. ``{"in_doubt": {"done": False}}``; an approved agent
    tool's calls by ``"tool:NAME"``); ``events``
    gives the payload sent when the run waits for an event of that name;
    timers are waited out. ``by`` (a ``Principal``, or a principal id) gives
    the answers, so requests with ``assignees`` or ``roles`` can be answered
    (without it, only requests that name nobody). ``store`` is ``"sqlite"`` (a file per run in a
    temporary folder) or a PostgreSQL URL. Each child gets ``timeout``
    seconds; ``workers`` points are checked at once (default: 4 per CPU, at
    most 8). Returns how many points were checked. Raises
    :class:`CrashSafetyError` naming the first point after which the
    resumed run differs (final status or values, or a recorded step or saved
    task that ran again), the node, and what differed.
    """
    who = principal_of(by)
    plan_args = (workflow_target(workflow), _database(store), answers, events, input, timeout,
                 None if who is None else {"id": who.id, "roles": list(who.roles)})
    with tempfile.TemporaryDirectory(prefix="crash-safe-") as folder, \
            contextlib.closing(_Servers()) as servers:
        plan = _plan(Path(folder), *plan_args, servers.start())
        reference, keys = _reference(plan)
        count = workers or min(8, 4 * (os.cpu_count() or 1))
        with ThreadPoolExecutor(max_workers=max(1, count)) as pool:
            found = pool.map(lambda item: _check(plan, reference, *item), enumerate(keys, 1))
            failures = [f for f in found if f is not None]
    if failures:
        raise _error(failures, len(keys))
    return len(keys)


class _Servers:
    """The fork server of one ``assert_crash_safe`` call (none where it cannot fork)."""

    def __init__(self) -> None:
        self.server: ForkServer | None = None

    def start(self) -> ForkServer | None:
        self.server = fork_server(_child_path())
        return self.server

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


def workflow_target(workflow: Workflow | str) -> str:
    """``MODULE:NAME`` (or ``PATH.py:NAME``) under which a child process finds ``workflow``."""
    if isinstance(workflow, str):
        return workflow
    if not isinstance(workflow, Workflow):
        raise InvalidInputError(f"assert_crash_safe needs a Workflow or 'MODULE:NAME', "
                                f"got {type(workflow).__name__}")
    for name, module in list(sys.modules.items()):
        attr = _attribute(module, workflow)
        if attr is None:
            continue
        if name != "__main__" and _importable(name, module):
            return f"{name}:{attr}"
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and path.endswith(".py"):
            return f"{os.path.abspath(path)}:{attr}"
    raise InvalidInputError(
        f"assert_crash_safe runs workflow {workflow.name!r} in child processes, which import it: "
        "keep it in a module-level variable of an importable module, or pass 'MODULE:NAME'")


def _attribute(module: Any, workflow: Workflow) -> str | None:
    try:
        items = list(vars(module).items())
    except TypeError:
        return None
    return next((k for k, v in items if v is workflow and not k.startswith("_")), None)


def _importable(name: str, module: Any) -> bool:
    """Whether importing ``name`` afresh finds the same file (not a module loaded by path)."""
    parent, _, last = name.rpartition(".")
    path = getattr(sys.modules.get(parent), "__path__", None) if parent else None
    try:
        spec = PathFinder.find_spec(last, path)  # the path, not the modules already loaded
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin == getattr(module, "__file__", None)


def _database(store: str) -> str | None:
    if store == "sqlite":
        return None
    if isinstance(store, str) and store.startswith(("postgresql://", "postgres://")):
        return store
    raise InvalidInputError(f"assert_crash_safe runs on 'sqlite' or a postgresql:// URL, got "
                            f"{store!r} (a memory store dies with the process it crashes)")


def _child_path() -> list[str]:
    """The parent's ``sys.path``, absolute: where the children find the workflow's module."""
    return [os.path.abspath(p) if p else os.getcwd() for p in sys.path]


def _plan(folder: Path, target: str, db: str | None, answers: Mapping[str, Any] | None,
          events: Mapping[str, Any] | None, input: Mapping[str, Any] | Blackboard | None,
          timeout: float, by: dict[str, Any] | None, server: ForkServer | None) -> _Plan:
    values = input.model_dump(exclude_unset=True) if isinstance(input, Blackboard) else input
    payload = {"input": _stored(values or {}), "answers": _stored(answers or {}),
               "events": _stored(events or {}), "by": by, "sys_path": _child_path()}
    if db is None:
        with ThreadPoolExecutor(max_workers=1) as pool:  # works under a running event loop too
            pool.submit(asyncio.run, _empty_database(folder / _TEMPLATE)).result()
    return _Plan(target, db, folder, new_id()[-10:], payload, timeout, server)


async def _empty_database(path: Path) -> None:
    from ..store.sqlite._sqlite import SqliteStore

    store = SqliteStore(path)
    await store.setup()
    await store.close()


def _stored(value: Any) -> Any:
    try:
        return orjson.loads(encode(value))
    except Exception as exc:
        raise InvalidInputError(f"assert_crash_safe sends its input, answers and events to "
                                f"child processes as stored values: {exc}") from None


def _spawn(plan: _Plan, name: str, run: str, kill: str | None) -> tuple[int, str, Path]:
    """Run one child; its exit code, the end of its stderr, and its result file."""
    folder = plan.folder
    result = folder / f"{name}.json"
    spec = {**plan.payload, "target": plan.target, "kill": kill, "lease_ttl": 30.0,
            "run_id": f"crash-{plan.token}-{run}", "journal": str(folder / f"{run}.journal"),
            "result": str(result), "db": plan.db or str(folder / f"{run}.db")}
    if plan.db is None and not Path(spec["db"]).exists():
        shutil.copyfile(folder / _TEMPLATE, spec["db"])  # the schema, without migrating again
    spec_file = folder / f"{name}.spec.json"
    spec_file.write_bytes(orjson.dumps(spec))
    if plan.server is not None:
        stderr = folder / f"{name}.stderr"
        code = plan.server.run(spec_file, stderr, plan.timeout)
        if code is None:
            return -1, f"the child did not finish within {plan.timeout} s", result
        return code, stderr.read_text(errors="replace")[-3000:], result
    try:
        done = subprocess.run([sys.executable, "-m", _CHILD, str(spec_file)], timeout=plan.timeout,
                              capture_output=True, text=True, check=False)
    except subprocess.TimeoutExpired:
        return -1, f"the child did not finish within {plan.timeout} s", result
    return done.returncode, done.stderr[-3000:], result



def _reference(plan: _Plan) -> tuple[dict[str, Any], list[str]]:
    """The uninterrupted run's report and its durable points (each key once, in order)."""
    code, err, result = _spawn(plan, "reference", "reference", None)
    if code != 0:
        raise CrashSafetyError(f"the uninterrupted run of {plan.target} did not finish "
                               f"(exit {code}):\n{err}")
    keys = (plan.folder / "reference.journal").read_text().split("\n")
    return orjson.loads(result.read_bytes()), list(dict.fromkeys(k for k in keys if k))


def _check(plan: _Plan, reference: dict[str, Any], index: int, key: str) -> _Failure | None:
    """Kill a run after point ``key``, resume it, and compare it with the reference.

    Whether a finished task's write is saved on its own or folded into its
    superstep's commit depends on timing: a ``task_write`` point the run did
    not reach this time leaves an uninterrupted run, compared all the same.
    """
    point, run = Point.from_key(key), f"p{index}"
    code, err, result = _spawn(plan, f"{run}-crash", run, key)
    if code == 0 and point.kind != "task_write":
        return _Failure(index, point, point.node or None, [
            "the run finished without reaching this point (is the workflow deterministic?)"])
    if code not in (0, -signal.SIGKILL):
        return _Failure(index, point, point.node or None, [f"the crashing child failed "
                                                           f"(exit {code}):\n{err}"])
    if code == -signal.SIGKILL:
        code, err, result = _spawn(plan, f"{run}-resume", run, None)
    if code != 0:
        return _Failure(index, point, point.node or None,
                        [f"resuming after the crash failed (exit {code}):\n{err}"])
    got = orjson.loads(result.read_bytes())
    journal = (plan.folder / f"{run}.journal").read_text().split("\n")
    return _compare(index, point, reference, got, journal)


def _compare(index: int, point: Point, reference: dict[str, Any], got: dict[str, Any],
             journal: list[str]) -> _Failure | None:
    differences = _ends(reference, got)
    node = _first_writer(reference["history"], got["history"]) if differences else None
    for key, n in Counter(k for k in journal if k).items():
        again = Point.from_key(key)
        if n > 1 and again.kind in ("step", "task_write"):
            differences.append(f"{_ran(again)} ran again after the crash")
            node = node or again.node
    if not differences:
        return None
    return _Failure(index, point, node, differences)


def _ends(reference: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """How the resumed run's end differs from the reference's: status, then field by field."""
    out = []
    if got["status"] != reference["status"]:
        why = f" ({got['error']})" if got["error"] else ""
        out.append(f"status: expected {reference['status']}, got {got['status']}{why}")
    ref, new = reference["values"], got["values"]
    for name in sorted(set(ref) | set(new)):
        if ref.get(name) != new.get(name):
            out.append(f"{name}: expected {_short(ref.get(name))}, got {_short(new.get(name))}")
    return out


def _first_writer(reference: list[dict[str, Any]], got: list[dict[str, Any]]) -> str | None:
    """The node(s) of the first top-level checkpoint whose values differ from the reference's."""
    for ref, new in zip(reference, got, strict=False):
        if ref["values"] != new["values"]:
            return ", ".join(new["nodes"]) or None
    return None


def _ran(point: Point) -> str:
    if point.kind == "step":
        return f"step {point.detail!r} of task {point.node!r}"
    return f"task {point.node!r} (its write was saved)"


def _short(value: Any) -> str:
    text = orjson.dumps(value).decode()
    return text if len(text) <= 200 else text[:197] + "..."


def _error(failures: list[_Failure], total: int) -> CrashSafetyError:
    first = min(failures, key=lambda f: f.index)
    where = f" (node {first.node})" if first.node else ""
    lines = [f"killed after point {first.index} of {total}, {first.point.describe()}: "
             f"the resumed run differs{where}"]
    lines += [f"  {d}" for d in first.differences]
    others = sorted(f.index for f in failures if f is not first)
    if others:
        lines.append(f"  ({len(others)} more points fail: {', '.join(map(str, others))})")
    return CrashSafetyError("\n".join(lines), point=first.point.describe(), node=first.node,
                            differences=tuple(first.differences), failed=len(failures))
