"""Map review: 20 documents, each reviewed by its own sub-workflow instance.

``split`` sends one ``Send("review", {...})`` per document, so the ``review``
sub-workflow runs 20 times in one superstep (at most 5 at once), each
instance in its own namespace (``review[0]`` ... ``review[19]``). Inside, ``read``
extracts the document through a durable step and ``approve`` asks a person
only when the document is flagged risky: the 5 risky ones wait in the inbox
(``review[3]@2/approve@2#0`` ...) while the 15 others are already done.
``report`` runs once, after every instance has merged its verdict.

The demo answers two of the five, and the process resuming with those
answers is killed (SIGKILL) while the second one is being finished, after
the first has been saved. Resuming in a new process runs again only that
interrupted instance; the three unanswered ones keep waiting until they are
answered too. No document is extracted twice and no finished review runs again.

    python examples/map_review.py                   # on map_review.db (SQLite)
    python examples/map_review.py postgresql://...  # or on PostgreSQL
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

from durable_flow import (
    Blackboard,
    CheckpointStore,
    Command,
    NodeContext,
    PostgresStore,
    RunLockedError,
    RunResult,
    Runtime,
    Send,
    SqliteStore,
    Workflow,
    WorkflowBuilder,
    append,
)

RUN_ID = "map-review"
LOG = Path(os.environ.get("MAP_REVIEW_LOG", "map_review.log"))
DOCUMENTS = [{"title": f"contract-{i:02d}", "risky": i % 4 == 3} for i in range(20)]
FIRST_ANSWERS = {"review[3]@2/approve@2#0": True, "review[7]@2/approve@2#0": False}


def note(line: str) -> None:
    """Count an execution in the log (flushed at once: the process may be killed next)."""
    with LOG.open("a") as fh:
        fh.write(line + "\n")
        fh.flush()
        os.fsync(fh.fileno())


class Document(Blackboard):
    title: str = ""
    risky: bool = False
    reviewer: str = ""
    summary: str = ""
    verdict: str = ""


class Batch(Blackboard):
    documents: list[dict[str, Any]] = []
    reviewer: str = "legal-team"
    verdicts: Annotated[list[str], append] = []
    report: str = ""


def review_workflow() -> Workflow:
    """read (a durable extraction) -> approve (asks a person only for risky documents)."""
    b = WorkflowBuilder("review_document", state=Document)

    @b.node()
    async def read(state: Document, ctx: NodeContext) -> dict[str, Any]:
        def extract() -> str:
            note(f"extract {state.title}")  # the expensive call: once per document
            return f"{state.title}: 3 pages"

        return {"summary": await ctx.step("extract", extract)}

    @b.node()
    async def approve(state: Document, ctx: NodeContext) -> dict[str, Any]:
        note(f"approve {ctx.node}")
        if not state.risky:
            return {"verdict": f"{state.title}: approved (low risk)"}
        ok = await ctx.request({"document": state.title, "summary": state.summary,
                                "reviewer": state.reviewer}, response_type=bool)
        if os.environ.get("MAP_REVIEW_KILL") == ctx.node:
            await _first_answer_saved(ctx.run_id)
            os.kill(os.getpid(), signal.SIGKILL)  # a power cut, mid-review
        return {"verdict": f"{state.title}: {'approved' if ok else 'rejected'} by a person"}

    b.set_entry("read")
    b.add_edge("read", "approve")
    return b.build()


def batch_workflow() -> Workflow:
    """split -> review[i] (one sub-workflow instance per document) -> report."""
    b = WorkflowBuilder("map_review", state=Batch)

    @b.node(goto=["review"])
    def split(state: Batch) -> Command:
        return Command(goto=[Send("review", doc) for doc in state.documents])

    @b.node()
    def report(state: Batch) -> dict[str, Any]:
        note("report")
        rejected = sum("rejected" in v for v in state.verdicts)
        return {"report": f"{len(state.verdicts)} reviewed, {rejected} rejected"}

    b.add_subworkflow("review", review_workflow(), inputs=["reviewer"],
                      outputs={"verdicts": "verdict"}, max_concurrency=5)
    b.set_entry("split")
    b.add_edge("review", "report")
    return b.build()


workflow = batch_workflow()


def open_store(db: str) -> CheckpointStore:
    """A PostgreSQL store for a ``postgresql://`` URL, else a SQLite file."""
    return PostgresStore(db) if db.startswith("postgresql") else SqliteStore(db)


async def _first_answer_saved(run_id: str) -> None:
    """Wait until the first answered review's result is saved (it finished before us)."""
    async with Runtime(open_store(os.environ["MAP_REVIEW_DB"])) as rt:
        head = (await rt.get_state(run_id)).checkpoint_id
        for _ in range(1500):  # another process writes it: poll the store
            if len(await rt.store.get_task_writes(run_id, head)) >= 16:  # 15 low risk + [3]
                return
            await asyncio.sleep(0.02)
        raise RuntimeError("the first answered review was never saved")


async def child(db: str, step: str) -> None:
    """Start the run (``start``), or resume it with the first answers (``answer``)."""
    # a short lease, so the resume after the kill waits little (long enough for a busy machine)
    async with Runtime(open_store(db), lease_ttl=3.0) as rt:
        if step == "start":
            await rt.run(workflow, {"documents": DOCUMENTS}, run_id=RUN_ID)
        else:
            await rt.resume(workflow, RUN_ID, responses=FIRST_ANSWERS)


def in_child(db: str, step: str, kill: str | None = None) -> int:
    env = {**os.environ, "MAP_REVIEW_DB": db, "MAP_REVIEW_LOG": str(LOG.resolve())}
    if kill:
        env["MAP_REVIEW_KILL"] = kill
    proc = subprocess.run([sys.executable, __file__, "--child", step, db], env=env, check=False,
                          timeout=300)
    return proc.returncode


async def resume_when_free(rt: Runtime, responses: dict[str, Any] | None = None) -> RunResult:
    """Resume, waiting out the killed process' lease."""
    while True:
        try:
            return await rt.resume(workflow, RUN_ID, responses=responses)
        except RunLockedError:
            await asyncio.sleep(0.1)


async def main(db: str = "map_review.db") -> RunResult:
    """Start, answer two and crash, resume, answer the rest; returns the final result."""
    print("start:", in_child(db, "start"))
    async with Runtime(open_store(db)) as rt:
        waiting = await rt.pending_requests()
        print("waiting for a person:", ", ".join(q.id for q in waiting))
    code = in_child(db, "answer", kill="review[7].approve")
    print("answered review[3] and review[7]; that process exited with", code, "(-9: SIGKILL)")
    async with Runtime(open_store(db)) as rt:
        result = await resume_when_free(rt)
        print("resumed:", result.status.value, "still waiting:",
              ", ".join(q.id for q in result.pending_requests))
        result = await rt.resume(workflow, RUN_ID,
                                 responses={q.id: True for q in result.pending_requests})
        print("final:", result.status.value, "-", result.state.report)  # type: ignore[attr-defined]
        return result


if __name__ == "__main__":
    if "--child" in sys.argv:
        asyncio.run(child(sys.argv[-1], sys.argv[-2]))
    else:
        asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "map_review.db"))
