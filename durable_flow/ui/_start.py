"""Starting a run from the web app: a form from a workflow's input schema (``/start``).

For the workflows the app serves (``durable-flow ui MODULE:WORKFLOW``) the
page ``/start`` lists them and ``/start/{workflow}`` shows a form generated
from the workflow's input (:func:`input_schema`: the blackboard fields a
person starting the run gives, not the ones the run fills in itself),
checked on the server like an answer form. Sending it queues the run
(``Runtime.submit``) for the app's own worker, recorded
``started_by`` the person who sent it (``admin`` for the app's
credential), who then is a participant of the run and may read it. The
JSON API has the same: ``POST /api/runs``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import BaseModel, Field

from ..errors import DurableFlowError, InvalidInputError
from ..model._graph import Workflow
from ._api import service
from ._doors import actor
from ._forms import build_form, read_answer
from ._models import RunOut
from ._pages import _checked_form, render
from ._service import UiService

__all__ = ["StartIn", "api_router", "input_schema", "router", "run_outputs"]

Service = Annotated[UiService, Depends(service)]
router = APIRouter(include_in_schema=False)
api_router = APIRouter(prefix="/api", tags=["durable-flow"])


class StartIn(BaseModel):
    """A run to start: a workflow this server serves, and its input."""

    workflow: str = Field(description="the name of a workflow this server serves")
    input: dict[str, Any] = Field(default_factory=dict, description="the run's input fields")


def served(svc: UiService) -> dict[str, Workflow]:
    """The workflows this app serves, by name (the newest version given for each)."""
    return {name: wf for (name, _), wf in svc.workflows.items()}


def input_schema(workflow: Workflow) -> dict[str, Any]:
    """The JSON Schema of a workflow's input: the blackboard fields a person gives.

    A field the run fills in itself is left out: the global ``messages``, a
    field a node declares it writes (``produces=``, an agent's or a
    transform's output, a sub-workflow's ``outputs``) and a field whose
    default is ``None`` (``approved: bool | None = None``: not known until
    the run decides it). A field without a default is always offered (the
    run cannot start without it). The rest keep their defaults, so the
    form shows what a run started without them would hold.
    """
    schema = dict(workflow.state.model_json_schema())
    required = [k for k in schema.get("required", ()) if k != "messages"]
    outputs = run_outputs(workflow)
    schema["properties"] = {k: v for k, v in schema.get("properties", {}).items()
                            if k in required or k not in outputs}
    schema["required"] = required
    schema.setdefault("title", workflow.name)
    return schema


def run_outputs(workflow: Workflow) -> frozenset[str]:
    """The blackboard fields the run fills in itself (see :func:`input_schema`)."""
    written = {name for spec in workflow.nodes.values() for name in spec.produces or ()}
    unset = {name for name, info in workflow.state.model_fields.items()
             if not info.is_required() and info.default_factory is None and info.default is None}
    return frozenset({"messages", *written, *unset})


def _workflow(svc: UiService, name: str) -> Workflow:
    found = served(svc).get(name)
    if found is None:
        raise InvalidInputError(f"this server does not serve a workflow named {name!r}: "
                                "start the UI with its MODULE:WORKFLOW")
    return found


@router.get("/start", response_class=HTMLResponse)
async def start_list(request: Request, svc: Service) -> Response:
    """The workflows a run can be started of here."""
    return render(request, "start.html", {"workflows": sorted(served(svc)), "form": None,
                                          "name": ""})


@router.get("/start/{name}", response_class=HTMLResponse)
async def start_page(request: Request, svc: Service, name: str) -> Response:
    """The form of one workflow's input."""
    wf = _workflow(svc, name)
    return render(request, "start.html", {"workflows": [], "name": wf.name,
                                          "form": build_form(input_schema(wf), label="Details")})


@router.post("/start/{name}", response_class=HTMLResponse)
async def start(request: Request, svc: Service, name: str) -> Response:
    """Queue a run with the form's input; problems come back next to their fields."""
    raw = await _checked_form(request)
    wf = _workflow(svc, name)
    schema = input_schema(wf)
    value, errors = read_answer(schema, raw)
    if not errors:
        try:
            info = await svc.runtime.submit(wf, _fields(value),
                                            by=actor(request.state.principal))
        except DurableFlowError as exc:
            errors = {"": str(exc)}
        else:
            return RedirectResponse(f"/runs/{info.run_id}", status_code=303)
    return render(request, "start.html", {"workflows": [], "name": wf.name,
                                          "form": build_form(schema, raw, errors, label="Details")},
                  status=422)


@api_router.post("/runs", summary="Start a run of a workflow this server serves")
async def start_api(request: Request, svc: Service, body: StartIn) -> RunOut:
    """Queue a run (``started_by`` the caller) for this server's worker; 422 for a bad input."""
    wf = _workflow(svc, body.workflow)
    info = await svc.runtime.submit(wf, body.input, by=actor(request.state.principal))
    return RunOut.of(info)


def _fields(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
