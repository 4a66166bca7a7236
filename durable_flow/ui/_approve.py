"""The page a signed approval link opens: ``/approve/{run_id}/{request_id}?token=...``.

It needs no login: the token (``durable-flow link``, ``Runtime.approval_link``)
names the one request and the principal who answers it, signed with the
app's secret (``DURABLE_FLOW_SECRET``). The answer is recorded ``by`` that
principal ``via="link"``, with the form's optional comment. A link works
once (its request is answered by then); an expired, used, altered or
foreign link gets a clear page, and nothing changes.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response

from ..errors import DurableFlowError, InvalidLinkError, InvalidResponseError, NotAuthorizedError
from ..model._approvals import Principal
from ..model._records import PendingRequest
from ..runtime.people._links import LinkGrant, LinkSigner
from ._api import service
from ._forms import build_form, read_answer
from ._pages import CsrfError, RequestCard, read_comment, render
from ._service import UiService

__all__ = ["router"]

Service = Annotated[UiService, Depends(service)]
router = APIRouter(include_in_schema=False)
_PAGES = {"expired": (410, "This link has expired"), "used": (410, "This link was used"),
          "altered": (400, "This link is not valid"), "foreign": (400, "This link is not valid"),
          "refused": (403, "Not yours to answer")}


@router.get("/approve/{run_id}/{request_id}", response_class=HTMLResponse)
async def approve_page(request: Request, svc: Service, run_id: str, request_id: str,
                       token: str = "") -> Response:
    """The one request the link names, with its answer form."""
    checked = await _checked(request, svc, run_id, request_id, token)
    if isinstance(checked, Response):
        return checked
    pending, grant = checked
    card = RequestCard(pending, build_form(pending.response_schema),
                       asked_by=await _asked_by(svc, run_id))
    return render(request, "approve.html", {"card": card, "grant": grant, "token": token})


@router.post("/approve/{run_id}/{request_id}", response_class=HTMLResponse)
async def approve(request: Request, svc: Service, run_id: str, request_id: str) -> Response:
    """Record the answer by the link's principal, via ``link``."""
    form = await request.form()
    raw = {key: [v for v in form.getlist(key) if isinstance(v, str)] for key in form}
    if not request.app.state.security.csrf_ok(request, (raw.get("csrf_token") or [""])[-1]):
        raise CsrfError
    token = (raw.get("token") or [""])[-1]
    checked = await _checked(request, svc, run_id, request_id, token)
    if isinstance(checked, Response):
        return checked
    pending, grant = checked
    value, errors = read_answer(pending.response_schema, raw)
    comment = read_comment(raw)
    if not errors:
        try:
            info = await svc.runtime.respond(run_id, {request_id: value}, comment=comment,
                                             by=await _principal(svc, grant), via="link")
        except NotAuthorizedError:
            return _problem(request, "refused", "This request is not assigned to "
                                                f"{grant.principal} any more.")
        except InvalidResponseError as exc:
            errors = {"": exc.reason}
        except DurableFlowError as exc:
            errors = {"": str(exc)}
        else:
            here = svc.workflow_for(info) is not None
            done = RequestCard(pending, None, answered=info, continues_here=here, answer=value,
                               asked_by=await _asked_by(svc, run_id))
            return render(request, "approve.html", {"card": done, "grant": grant, "token": ""})
    card = RequestCard(pending, build_form(pending.response_schema, raw, errors),
                       comment=comment or "", asked_by=await _asked_by(svc, run_id))
    return render(request, "approve.html", {"card": card, "grant": grant, "token": token},
                  status=422)


async def _checked(request: Request, svc: UiService, run_id: str, request_id: str,
                   token: str) -> tuple[PendingRequest, LinkGrant] | Response:
    """The open request and the link's grant, or the page that says what is wrong."""
    signer: LinkSigner | None = request.app.state.link_signer
    if signer is None:
        return _problem(request, "altered", "This server makes no approval links "
                                            "(it was started without DURABLE_FLOW_SECRET).")
    try:
        grant = signer.check(token, run_id, request_id)
    except InvalidLinkError as exc:
        return _problem(request, exc.reason, str(exc))
    pending = await svc.open_request(run_id, request_id)
    if pending is None:
        return _problem(request, "used", "This request was answered already (or its run "
                                         "ended): a link works once.")
    return pending, grant


async def _asked_by(svc: UiService, run_id: str) -> str | None:
    """Who started the run (``started_by``): the page says who asked."""
    record = await svc.runtime.store.get_run(run_id)
    return record.started_by if record is not None else None


async def _principal(svc: UiService, grant: LinkGrant) -> Principal:
    """The link's principal, with the roles of the user of that name if there is one."""
    user = await svc.runtime.store.get_user(grant.principal)
    return Principal(grant.principal, user.roles if user is not None else ())


def _problem(request: Request, reason: str, text: str) -> Response:
    status, title = _PAGES.get(reason, (400, "This link is not valid"))
    return render(request, "message.html", {"title": title, "text": text}, status=status)
