"""Waits that let other branches go on: 8 branches, one waits for an answer given after 1 s.

Usage::

    python bench/parked.py [--repeat N] [--answer-after S] [--work S] [--steps N] [--write]

One workflow of 8 branches after a ``start`` node, joined by a fan-in: one
branch asks a person (``ctx.request``), the 7 others do I/O-bound work
(``asyncio.sleep(--work)``) in each of ``--steps`` supersteps. A concurrent
task answers the request with ``Runtime.respond`` ``--answer-after`` seconds
after the run started (as soon as the request exists, if that is later). The
wall time is from the start of the run to the end of the join, on a fresh
SQLite file:

* ``waits="superstep"`` (the default): the barrier of the first superstep
  waits for the request, so the run is ``waiting`` after one step of work;
  the answer comes at 1 s and the remaining steps run after it.
* ``waits="branch"``: the asking branch is parked, the 7 others go on; the
  answer is recorded while the run executes, the executor takes it at its
  next barrier, and the join runs once both are done.

The two modes alternate ``--repeat`` times in the same process; medians are
compared. ``--write`` replaces the ``parked`` section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from machine import cpu_and_memory
from sections import markers, replace_section

from durable_flow import (
    END,
    Blackboard,
    NodeContext,
    RunLockedError,
    RunStatus,
    Runtime,
    SqliteStore,
    Workflow,
    WorkflowBuilder,
    append,
)

HERE = Path(__file__).resolve().parent
START, END_MARK = markers("parked")
MODES = ("superstep", "branch")
BRANCHES = 8


class Work(Blackboard):
    done: Annotated[list[str], append] = []
    answer: bool = False
    joined: bool = False


def workflow(mode: str, work: float, steps: int) -> Workflow:
    """start -> ask | w1..w7 (``steps`` nodes each) -> join (fan-in of all 8 branches)."""
    b = WorkflowBuilder(f"parked-{mode}", state=Work, waits=mode)  # type: ignore[arg-type]

    async def start(state: Work) -> dict[str, Any]:
        return {}

    async def ask(state: Work, ctx: NodeContext) -> dict[str, Any]:
        return {"answer": await ctx.request({"question": "go on?"}, response_type=bool)}

    async def step(state: Work, ctx: NodeContext) -> dict[str, Any]:
        await asyncio.sleep(work)  # I/O-bound work: a call to another service
        return {"done": [ctx.node]}

    async def join(state: Work) -> dict[str, Any]:
        return {"joined": True}

    b.add_node("start", start).add_node("ask", ask).add_node("join", join)
    b.set_entry("start").add_edge("start", "ask")
    lasts = ["ask"]
    for branch in range(1, BRANCHES):
        previous = "start"
        for k in range(steps):
            node = f"w{branch}_{k}"
            b.add_node(node, step).add_edge(previous, node)
            previous = node
        lasts.append(previous)
    b.add_fan_in(lasts, "join")
    b.add_edge("join", END)
    return b.build()


async def answer(rt: Runtime, run_id: str, at: float) -> RunStatus:
    """Answer the run's request at ``at`` (perf_counter), once it exists; the run's status then."""
    while True:
        open_requests = [r for r in await rt.pending_requests() if r.run_id == run_id]
        if open_requests:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(max(0.0, at - time.perf_counter()))
    while True:
        try:
            return (await rt.respond(run_id, {open_requests[0].id: True})).status
        except RunLockedError:  # the default mode: the run is still closing its superstep
            await asyncio.sleep(0.01)


async def one(mode: str, args: argparse.Namespace, n: int) -> tuple[float, RunStatus]:
    """Wall time of one run on a fresh file, start to join; the run's status when answered."""
    flow = workflow(mode, args.work, args.steps)
    with tempfile.TemporaryDirectory() as tmp:
        async with Runtime(SqliteStore(Path(tmp) / "runs.db")) as rt:
            run_id = f"{mode}-{n}"
            begun = time.perf_counter()
            answering = asyncio.create_task(answer(rt, run_id, begun + args.answer_after))
            result = await rt.run(flow, {}, run_id=run_id)
            answered = await answering
            # the answer came after the run stopped (waiting), or as it stopped: a commit that
            # would leave it waiting finds the answer and leaves it queued for whoever resumes
            while result.status in (RunStatus.WAITING, RunStatus.QUEUED):
                result = await rt.resume(flow, run_id)
            took = time.perf_counter() - begun
            state = result.state
            assert result.status is RunStatus.COMPLETED, (mode, result.status, result.error)
            assert isinstance(state, Work) and state.joined and state.answer
            assert len(state.done) == (BRANCHES - 1) * args.steps, state.done
            return took, answered


async def measure(args: argparse.Namespace) -> tuple[dict[str, list[float]], dict[str, list[str]]]:
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    statuses: dict[str, list[str]] = {mode: [] for mode in MODES}
    quick = argparse.Namespace(**{**vars(args), "answer_after": 0.0, "work": 0.0})
    for mode in MODES:  # warm up: imports, statement cache
        await one(mode, quick, -1)
    for n in range(args.repeat):
        for mode in MODES if n % 2 == 0 else MODES[::-1]:
            took, answered = await one(mode, args, n)
            times[mode].append(took)
            statuses[mode].append(answered.value)
    return times, statuses


def render(times: dict[str, list[float]], statuses: dict[str, list[str]],
           args: argparse.Namespace) -> str:
    cpu, mem = cpu_and_memory()
    default, branch = (statistics.median(times[m]) for m in MODES)
    ideal_default = args.answer_after + args.work * (args.steps - 1)
    ideal_branch = max(args.answer_after, args.work * args.steps)
    lines = [
        START,
        "## Waits that let other branches go on",
        "",
        f"`python bench/parked.py --repeat {args.repeat} --answer-after {args.answer_after:g} "
        f"--work {args.work:g} --steps {args.steps} --write` (`make bench-parked`) on "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M}Z, {cpu}, {mem}. A workflow of {BRANCHES} branches "
        "after a start node, joined by a fan-in, on a fresh SQLite file: one branch asks "
        f"(`ctx.request`) and is answered with `Runtime.respond` {args.answer_after:g} s after "
        f"the start by a concurrent task; each of the {BRANCHES - 1} others runs {args.steps} "
        f"nodes of {args.work * 1000:g} ms of I/O (`asyncio.sleep`). Wall time from the start "
        "to the end of the join; the two modes alternate in the same process, medians of "
        f"{args.repeat} runs each.",
        "",
        "| waits | median | min | max | no-overhead floor | the run when answered |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for mode, ideal in zip(MODES, (ideal_default, ideal_branch), strict=True):
        ts = times[mode]
        lines.append(f"| `{mode}`{' (default)' if mode == 'superstep' else ''} | "
                     f"{statistics.median(ts) * 1000:,.0f} ms | {min(ts) * 1000:,.0f} ms | "
                     f"{max(ts) * 1000:,.0f} ms | {ideal * 1000:,.0f} ms | "
                     f"{_counted(statuses[mode])} |")
    lines += [
        "",
        f"`waits=\"branch\"` reaches the join in {branch / default:.2f} times the default's wall "
        f"time ({(default - branch) * 1000:,.0f} ms sooner): the {BRANCHES - 1} working "
        "branches no longer stop at the first barrier while the answer is awaited. The floor "
        "is the answer's delay plus the work that must follow it (default: every step after "
        "the first; branch: none, as long as the work ends after the answer). The last column "
        "is the run's status as `respond` returned it: `running` is an answer recorded while "
        "the run executed the other branches, taken at its next barrier; `queued` is a run "
        "that had stopped `waiting` and was resumed.",
        END_MARK,
    ]
    return "\n".join(lines)


def _counted(statuses: list[str]) -> str:
    """``running 5/5`` (the status after ``respond``, by how many runs had it)."""
    return ", ".join(f"{s} {statuses.count(s)}/{len(statuses)}" for s in dict.fromkeys(statuses))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--answer-after", type=float, default=1.0)
    parser.add_argument("--work", type=float, default=0.4)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    text = render(*asyncio.run(measure(args)), args)
    print(text)
    if args.write:
        replace_section(HERE / "RESULTS.md", "parked", text)


if __name__ == "__main__":
    main()
