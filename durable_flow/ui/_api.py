"""The JSON API under ``/api/``: the same operations the pages use, as JSON.

Errors answer with a :class:`ProblemOut` body: 403 for what is not the
caller's to do (another's request, reassigning as anyone but the admin,
cancelling or forking as anyone but the run's operators and admins), 404
for an unknown run or checkpoint and for a run the caller may not see, 409 when the run's state refuses the
action (locked, finished, a request no longer open), 422 for a bad answer
or argument.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Request
from sse_starlette import EventSourceResponse

from ..model._records import RunStatus
from ._doors import actor, inbox_filter, readable, require
from ._live import start_after, stream_response
from ._models import (
    CheckpointOut,
    DecisionOut,
    ForkIn,
    HistoryOut,
    InboxOut,
    PauseIn,
    ProblemOut,
    ReassignIn,
    RequestOut,
    RespondIn,
    RunOut,
    RunsOut,
    SnapshotOut,
)
from ._service import UiService

__all__ = ["router", "service"]


def service(request: Request) -> UiService:
    """The app's :class:`UiService`."""
    found: UiService = request.app.state.service
    return found


Service = Annotated[UiService, Depends(service)]
Limit = Annotated[int, Query(ge=1, le=500)]
_PROBLEMS: dict[int | str, dict[str, object]] = {
    code: {"model": ProblemOut, "description": text}
    for code, text in ((403, "not the caller's to do"), (404, "unknown run or checkpoint"),
                       (409, "refused in the run's state"), (422, "bad answer or argument"))}

# every route naming a {run_id} needs "read" on it (404 otherwise): see _doors
router = APIRouter(prefix="/api", tags=["durable-flow"], responses=_PROBLEMS,
                   dependencies=[Depends(readable)])


@router.get("/runs", summary="List runs, newest first")
async def list_runs(request: Request, svc: Service, status: RunStatus | None = None,
                    workflow: str | None = None, offset: Annotated[int, Query(ge=0)] = 0,
                    limit: Limit = 50, label: str | None = None) -> RunsOut:
    """Runs filtered by status, workflow name and labels (``label=k=v,k2=v2``), a page at a time.

    Only the runs the caller may read (filtered before paging).
    """
    page = await svc.runs(status=status, workflow=workflow, offset=offset, limit=limit,
                          who=request.state.principal, label=label)
    return RunsOut(runs=[RunOut.of(r) for r in page.runs], total=page.total,
                   next_offset=page.next_offset)


@router.get("/runs/{run_id}", summary="One run")
async def get_run(svc: Service, run_id: str) -> RunOut:
    """The run's status, head checkpoint, error and fork origin."""
    return RunOut.of(await svc.run(run_id))


@router.get("/runs/{run_id}/stream", summary="A run's stream log, live (server-sent events)",
            response_class=EventSourceResponse,
            responses={200: {"content": {"text/event-stream": {}},
                             "description": "`entry` events (id: seq), then one `end`"}})
async def stream(svc: Service, run_id: str, after: Annotated[int, Query(ge=0)] = 0,
                 last_event_id: Annotated[str | None, Header()] = None) -> EventSourceResponse:
    """What the run's agents streamed after entry ``after``, then live until it stops running.

    Reconnect with ``after=`` the last ``seq`` seen (or ``Last-Event-ID``) to miss nothing.
    """
    await svc.run(run_id)  # an unknown run is a 404 before any event
    return stream_response(svc.runtime, run_id, start_after(after, last_event_id))


@router.get("/runs/{run_id}/history", summary="A page of a run's checkpoints")
async def history(svc: Service, run_id: str, namespace: str = "", before: str | None = None,
                  limit: Limit = 50) -> HistoryOut:
    """The superstep timeline of one namespace ("" is the top level), newest first."""
    page = await svc.history(run_id, namespace=namespace, before=before, limit=limit)
    return HistoryOut(checkpoints=[CheckpointOut.of(c) for c in page.checkpoints],
                      next_before=page.next_before)


@router.get("/runs/{run_id}/checkpoints/{checkpoint_id}", summary="The state at a checkpoint")
async def checkpoint(svc: Service, run_id: str, checkpoint_id: str) -> SnapshotOut:
    """Blackboard values, node histories, next tasks, open requests and nested state."""
    return SnapshotOut.of(await svc.snapshot(run_id, checkpoint_id))


@router.get("/runs/{run_id}/decisions", summary="A run's decisions, oldest first")
async def decisions(svc: Service, run_id: str) -> list[DecisionOut]:
    """Every answer, policy answer, escalation, reassignment and timeout, with who and via."""
    return [DecisionOut.of(d) for d in await svc.runtime.decisions(run_id)]


@router.get("/inbox", summary="Open requests, oldest first")
async def inbox(request: Request, svc: Service, workflow: str | None = None,
                after: str | None = None, limit: Limit = 50, tab: str = "all") -> InboxOut:
    """Open requests across runs and nesting levels, one page at a time.

    A person sees those assigned to them or their roles (``tab=mine``), or
    every open request of the runs they may read (``tab=all``); the admin sees
    every one.
    """
    person = request.state.principal
    page = await svc.inbox(workflow=workflow, after=after, limit=limit,
                           shown=inbox_filter(svc, person, tab))
    return InboxOut(requests=[RequestOut.of(r) for r in page.requests],
                    next_after=page.next_after)


@router.post("/runs/{run_id}/respond", summary="Answer open requests of a run")
async def respond(request: Request, svc: Service, run_id: str, body: RespondIn) -> RunOut:
    """Record answers, each checked against its request's JSON Schema.

    Nothing is written if one is bad. Once no request is left open the run is
    queued for a worker.
    """
    return RunOut.of(await svc.respond(run_id, body.responses, by=request.state.principal,
                                       via="api", comment=body.comment))


@router.post("/runs/{run_id}/reassign", summary="Give an open request to other people (admin)")
async def reassign(request: Request, svc: Service, run_id: str, body: ReassignIn) -> RequestOut:
    """Only the admin (the token) may: anyone else gets 403 and nothing changes.

    Recorded as a decision of kind ``reassign`` by ``admin``, with a
    notification to the new people; from then on only they may answer. 409
    unless the request is open.
    """
    return RequestOut.of(await svc.reassign(run_id, body.request_id, assignees=body.assignees,
                                            roles=body.roles, by=request.state.principal))


@router.post("/runs/{run_id}/cancel", summary="Cancel a run")
async def cancel(request: Request, svc: Service, run_id: str) -> RunOut:
    """Cancel the run; its checkpoints stay. Its operators and admins only (403)."""
    await require(svc, run_id, request.state.principal, "cancel")
    return RunOut.of(await svc.cancel(run_id, by=actor(request.state.principal), via="api"))


@router.post("/runs/{run_id}/pause", summary="Pause a run")
async def pause(request: Request, svc: Service, run_id: str, body: PauseIn) -> RunOut:
    """Pause the run: not claimed until unpaused; a running one stops after its superstep.

    Recorded as a ``pause`` decision; 422 for a completed, failed or cancelled run.
    """
    await require(svc, run_id, request.state.principal, "pause")
    return RunOut.of(await svc.pause(run_id, body.reason, request.state.principal))


@router.post("/runs/{run_id}/unpause", summary="Unpause a paused run")
async def unpause(request: Request, svc: Service, run_id: str) -> RunOut:
    """Make the paused run claimable again; recorded as an ``unpause`` decision."""
    await require(svc, run_id, request.state.principal, "unpause")
    return RunOut.of(await svc.unpause(run_id, request.state.principal))


@router.post("/runs/{run_id}/fork", summary="Fork a run from a checkpoint")
async def fork(request: Request, svc: Service, run_id: str, body: ForkIn) -> RunOut:
    """Start a new run from the checkpoint (``update`` applied first).

    Needs the UI to have been started with the run's workflow. Its operators
    and admins only (403); recorded as a ``fork`` decision.
    """
    await require(svc, run_id, request.state.principal, "fork")
    return RunOut.of(await svc.fork(run_id, body.checkpoint_id, body.update,
                                    by=actor(request.state.principal), via="api"))
