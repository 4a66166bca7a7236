"""The server-rendered pages: the inbox (``/``), runs (``/runs``), a run (``/runs/{run_id}``).

Forms post to the page routes below, which call the same :class:`UiService`
as the JSON API; htmx swaps the returned fragment in place (a plain form
post, without JavaScript, gets a redirect or a whole page instead).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from ..errors import DurableFlowError, InvalidResponseError, NotAuthorizedError
from ..model._access import allows
from ..model._approvals import Principal, permits
from ..model._records import PendingRequest, RunInfo, RunStatus
from ..runtime._inspect import to_pending
from ..runtime._limits import limit_waits
from ..runtime.people._users import Users
from ..store._protocols import RunRecord
from ._api import service
from ._doors import actor, inbox_filter, place, readable, require, sees_all
from ._forms import Form, build_form, read_answer
from ._security import CSRF_FIELD, SESSION_COOKIE, USER_COOKIE, Security
from ._service import UiService
from ._sessions import Sessions
from ._throttle import LoginThrottle
from ._views import (
    DecisionLine,
    decision_line,
    diff_values,
    field_label,
    marked_mermaid,
    namespace_tree,
    next_step,
    subworkflow_at,
    verdict,
)

__all__ = ["COMMENT_FIELD", "CsrfError", "RequestCard", "card_for", "read_comment", "render",
           "router", "run_summary"]

COMMENT_FIELD = "comment"
"""The answer forms' optional comment, recorded with the decision (answer fields are ``answer...``)."""

Service = Annotated[UiService, Depends(service)]
PAGE = 50


async def _csrf_first(request: Request) -> None:
    """Router dependency: a form post without this browser's CSRF token is 403, before all else.

    It runs before :func:`readable`, so a forged post is refused the same way
    whichever run it names, one its sender may see or not (the JSON API's
    writes are checked as early, in the app's guard).
    """
    if request.method == "POST":
        await _checked_form(request)  # the form is read once: the route reads it again from cache


# every form post carries this browser's CSRF token (403 otherwise), and every page naming a
# {run_id} needs "read" on it (404 otherwise): see _doors
router = APIRouter(include_in_schema=False,
                   dependencies=[Depends(_csrf_first), Depends(readable)])


class CsrfError(Exception):
    """A form without this browser's CSRF token (answered 403)."""


@dataclass(slots=True)
class RequestCard:
    """One request as the inbox shows it: the request, its form, or the answer's outcome."""

    request: PendingRequest
    form: Form | None
    answered: RunInfo | None = None
    continues_here: bool = False
    comment: str = ""
    """The comment typed in the form (shown again when the form comes back with problems)."""
    run_status: RunStatus | None = None  # shown in the inbox: a run may go on while it asks
    refused: str | None = None
    """Why this person may not answer it (the card then says so, and shows no form)."""
    answer: Any = None
    """The answer recorded (the outcome says "Approved." or "Rejected." for a yes or a no)."""
    asked_by: str | None = None
    """Who started the run that asks (``started_by``), shown as who asked."""
    others: str | None = None
    """Whose request this is, when the person may see it but not answer it (no form then)."""

    @property
    def dom_id(self) -> str:
        """A stable HTML id (request ids hold characters ids should not)."""
        key = f"{self.request.run_id}\0{self.request.id}".encode()
        return "req-" + hashlib.sha256(key).hexdigest()[:16]

    @property
    def outcome(self) -> str:
        """What the answer was and what happens next: "Approved. The run goes on now."."""
        if self.answered is None:
            return ""
        return (verdict(self.answer) + " " + next_step(
            self.answered.status, self.continues_here, self.request.workflow_name))

    @property
    def fields(self) -> list[tuple[str, Any]]:
        """The request's details as (label, value) rows; a "question" the title shows is left out."""
        payload = self.request.payload
        if not isinstance(payload, Mapping):
            return []
        return [(field_label(k), v) for k, v in payload.items()
                if not (k == "question" and v == self.request.title)]


def card_for(request: PendingRequest, person: Principal | None, *,
             run: RunRecord | None = None) -> RequestCard:
    """A request's card for ``person``: its form if theirs to answer, else whose it is."""
    status = run.status if run is not None else None
    asked_by = run.started_by if run is not None else None
    if sees_all(person) or permits(person, request.assignees, request.roles):
        return RequestCard(request, build_form(request.response_schema), run_status=status,
                           asked_by=asked_by)
    return RequestCard(request, None, run_status=status, asked_by=asked_by,
                       others="This is for " + _whose(request) + ": you can see it, not answer it.")


def render(request: Request, name: str, context: dict[str, Any], status: int = 200) -> Response:
    """A template with what every page needs (the CSRF token, whether to offer log out)."""
    security: Security = request.app.state.security
    base = {"csrf_field": CSRF_FIELD, "csrf_token": security.csrf_token(request),
            "comment_field": COMMENT_FIELD,
            "logged_in": getattr(request.state, "auth", None) in ("cookie", "user"),
            "has_token": security.token is not None, "has_jwt": security.jwt is not None,
            "has_deadlines": "expires_at" in PendingRequest.__dataclass_fields__}
    response: Response = request.app.state.templates.TemplateResponse(
        request, name, {**base, **context}, status_code=status)
    return response


def read_comment(raw: Mapping[str, list[str]]) -> str | None:
    """The optional comment of an answer form (``comment``); None when left empty."""
    text = (raw.get(COMMENT_FIELD) or [""])[-1].strip()
    return text or None


def _is_htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true"


async def _checked_form(request: Request) -> dict[str, list[str]]:
    """The submitted form as lists of values; 403 unless it carries this browser's CSRF token."""
    form = await request.form()
    raw = {key: [v for v in form.getlist(key) if isinstance(v, str)] for key in form}
    token = (raw.get(CSRF_FIELD) or [""])[-1]
    if not request.app.state.security.csrf_ok(request, token):
        raise CsrfError
    return raw


# -- the inbox ----------------------------------------------------------------------------------


@router.get("/", response_class=HTMLResponse)
async def inbox_page(request: Request, svc: Service, workflow: str = "",
                     after: str = "", tab: str = "") -> Response:
    """Open requests, oldest first, each with its answer form; the "mine" and "all" tabs."""
    person = request.state.principal
    tab = tab if tab in ("mine", "all") else ("all" if person is None else "mine")
    page = await svc.inbox(workflow=workflow or None, after=after or None, limit=PAGE,
                           shown=inbox_filter(svc, person, tab))
    shown = page.requests
    runs = await svc.run_records(r.run_id for r in shown)
    cards = [card_for(r, person, run=runs.get(r.run_id)) for r in shown]
    return render(request, "inbox.html", {"tab": tab, "person": person,
        "cards": cards, "workflow": workflow, "next_after": page.next_after,
        "first_page": not after, "known_workflows": sorted({n for n, _ in svc.workflows})})


@router.post("/respond", response_class=HTMLResponse)
async def respond_page(request: Request, svc: Service) -> Response:
    """Answer one request from its form; the card comes back answered, or with the problems."""
    raw = await _checked_form(request)
    run_id = (raw.get("run_id") or [""])[-1]
    request_id = (raw.get("request_id") or [""])[-1]
    await require(svc, run_id, request.state.principal, "read")  # 404 for a run not theirs
    pending = await svc.open_request(run_id, request_id)
    if pending is None:
        text = ("This request is no longer open: someone answered it already, or its run "
                "ended. Nothing was recorded.")
        if _is_htmx(request):
            return render(request, "_gone.html", {"text": text})
        return render(request, "message.html", {"title": "Already answered", "text": text},
                      status=409)
    record = (await svc.run_records([run_id])).get(run_id)
    asked_by = record.started_by if record is not None else None
    try:
        card = await _answer(svc, pending, raw, request.state.principal)
    except NotAuthorizedError:
        # not theirs: say so where they clicked, and change nothing (the error's words name
        # the act in an engineer's terms: the card's say it plainly)
        card = RequestCard(pending, None, refused=_not_yours(pending), asked_by=asked_by)
        if _is_htmx(request):
            return render(request, "_request.html", {"card": card}, status=403)
        return render(request, "message.html", {"title": "This request is not yours to answer",
                                                "text": card.refused}, status=403)
    card.asked_by = asked_by
    if card.answered is None:
        if _is_htmx(request):
            return render(request, "_request.html", {"card": card}, status=422)
        return render(request, "answer.html", {"card": card}, status=422)
    if _is_htmx(request):
        return render(request, "_request.html", {"card": card})
    return RedirectResponse("/", status_code=303)


def _whose(pending: PendingRequest) -> str:
    """Who a request is for, in words: "mia, role manager"."""
    return ", ".join([*pending.assignees, *(f"role {r}" for r in pending.roles)]) or "anyone"


def _not_yours(pending: PendingRequest) -> str:
    """The words a person reads when they try to answer a request that is not theirs."""
    if pending.assignees or pending.roles:
        return f"You may not answer this request: it is for {_whose(pending)}. Nothing was recorded."
    return "You may not answer this request. Nothing was recorded."


async def _answer(svc: UiService, pending: PendingRequest, raw: dict[str, list[str]],
                  person: Principal | None) -> RequestCard:
    """Read and record the answer; on any problem the card shows the form with it.

    A request that is not ``person``'s raises ``NotAuthorizedError`` (a 403 page).
    """
    value, errors = read_answer(pending.response_schema, raw)
    comment = read_comment(raw)
    if not errors:
        try:
            info = await svc.respond(pending.run_id, {pending.id: value}, by=person, via="ui",
                                     comment=comment)
        except NotAuthorizedError:
            raise
        except InvalidResponseError as exc:
            errors = {"": exc.reason}
        except DurableFlowError as exc:
            errors = {"": str(exc)}
        else:
            here = svc.workflow_for(info) is not None
            return RequestCard(pending, None, answered=info, continues_here=here, answer=value)
    return RequestCard(pending, build_form(pending.response_schema, raw, errors),
                       comment=comment or "")


# -- runs -----------------------------------------------------------------------------------------


@router.get("/runs", response_class=HTMLResponse)
async def runs_page(request: Request, svc: Service, status: str = "", workflow: str = "",
                    offset: int = 0, label: str = "") -> Response:
    """Runs, newest first, filtered by status, workflow and labels, a page at a time."""
    page = await svc.runs(status=status or None, workflow=workflow or None, offset=max(offset, 0),
                          limit=PAGE, who=request.state.principal, label=label or None)
    return render(request, "runs.html", {
        "page": page, "status": status, "workflow": workflow, "label": label,
        "statuses": [s.value for s in RunStatus]})


@router.get("/runs/{run_id}", response_class=HTMLResponse)
async def run_page(request: Request, svc: Service, run_id: str, cp: str = "", vs: str = "",
                   ns: str = "") -> Response:
    """A run: timeline, blackboard (and a diff), histories, sub-workflows, graph, actions."""
    info = await svc.run(run_id)
    person = request.state.principal
    record = await svc.runtime.store.get_run(run_id)
    may_change = record is not None and allows(
        await place(svc, record, request.state.principal), "cancel")  # cancel and fork
    snap = await svc.snapshot(run_id, cp or None, ns)
    head = snap if not cp and not ns else await svc.snapshot(run_id)
    compare = await svc.snapshot(run_id, vs) if vs else None
    history = await svc.history(run_id, namespace=snap.namespace, limit=PAGE)
    workflow = svc.workflow_for(info)
    shown = subworkflow_at(workflow, snap.namespace) if workflow is not None else None
    current = snap.next_tasks if not cp else ()
    cards = [card_for(r, person, run=record) for r in head.pending_requests]
    return render(request, "run.html", {
        "info": info, "snap": snap, "head": head, "history": history, "ns": ns,
        "cp": cp or snap.checkpoint_id,  # the selected checkpoint: the head by default
        "compare": compare,
        "changes": diff_values(compare.values, snap.values) if compare else None,
        "ns_tree": namespace_tree(await svc.namespaces(run_id)),
        "mermaid": marked_mermaid(shown, current, [p.node for p in snap.parked])
        if shown is not None else None,
        "current": current, "can_fork": workflow is not None,
        # the page follows every run that may still move: a waiting one moves on an answer
        "live": info.status not in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED),
        # every open request of a run they may read; a form on those they may answer
        "cards": cards, "started_by": record.started_by if record is not None else None,
        "summary": run_summary(info, cards, served=workflow is not None, steps=head.next_tasks),
        "decisions": await _decision_lines(svc, run_id),
        # a task waiting for a grant of a limit: "waiting for api: 2 of 2 in use"
        "limit_waits": await limit_waits(svc.runtime.store, run_id)
        if info.status is RunStatus.RUNNING else [],
        "is_admin": sees_all(request.state.principal), "may_change": may_change})


def run_summary(info: RunInfo, cards: list[RequestCard], *, served: bool,
                steps: Sequence[str] = ()) -> str:
    """Where the run stands, in a finance approver's words: the run page's first line.

    ``cards`` are its open requests as the viewer sees them (a form on the ones
    theirs to answer); ``served`` says whether this app's own worker runs it;
    ``steps`` are the steps at work (of a running run).
    """
    status = info.status
    asked = "; ".join(f"\u201c{c.request.title or c.request.node}\u201d"
                      + (" (yours to answer, below)" if c.form is not None
                         else f" (for {_whose(c.request)})") for c in cards)
    many = f"{len(cards)} answers: " if len(cards) > 1 else "an answer to "
    if status is RunStatus.WAITING:
        if cards:
            return f"Waiting for {many}{asked}."
        return ("Waiting: it goes on by itself when the time it waits for comes or the event "
                "it waits for arrives.")
    if status is RunStatus.RUNNING:
        going = ("Running: its steps are at work." if not steps else
                 f"Running: step {steps[0]} is at work." if len(steps) == 1 else
                 f"Running: steps {', '.join(steps)} are at work.")
        return going + (f" It also waits for {many}{asked}." if cards else "")
    if status is RunStatus.QUEUED:
        return "Queued: " + ("it starts in a moment." if served else
                             f"it starts as soon as the service that runs {info.workflow_name} "
                             "picks it up.")
    if status is RunStatus.PAUSED:
        why = f" ({info.pause_reason})" if info.pause_reason else ""
        return f"Paused{why}: nothing moves until someone who runs it lets it go on."
    if status is RunStatus.FAILED:
        step = f" (step {info.error.node})" if info.error is not None and info.error.node else ""
        return (f"Stopped: a step failed{step}. Whoever looks after the {info.workflow_name} "
                "workflow sees why below.")
    if status is RunStatus.CANCELLED:
        return "Cancelled: it does not go on."
    return "Finished."


async def _decision_lines(svc: UiService, run_id: str) -> list[DecisionLine]:
    """The run's decisions in words, each naming its request by title."""
    decisions = await svc.runtime.decisions(run_id)
    titles: dict[str, str] = {}
    if any(d.request_id for d in decisions):  # only then are the requests read
        schemas: dict[bytes, dict[str, Any]] = {}
        titles = {row.id: to_pending(row, schemas).title
                  for row in await svc.runtime.store.get_requests(run_id)
                  if row.kind == "request"}
    return [decision_line(d, titles) for d in decisions]


@router.get("/runs/{run_id}/timeline", response_class=HTMLResponse)
async def timeline_page(request: Request, svc: Service, run_id: str, ns: str = "",
                        before: str = "", cp: str = "") -> Response:
    """Older entries of the superstep timeline (the "older" button loads them in place)."""
    info = await svc.run(run_id)
    history = await svc.history(run_id, namespace=ns, before=before or None, limit=PAGE)
    return render(request, "_timeline.html", {"info": info, "history": history, "ns": ns,
                                              "cp": cp})


@router.post("/runs/{run_id}/cancel")
async def cancel_page(request: Request, svc: Service, run_id: str) -> Response:
    """Cancel the run, then show it."""
    await _checked_form(request)
    await require(svc, run_id, request.state.principal, "cancel")
    await svc.cancel(run_id, by=actor(request.state.principal), via="ui")
    return RedirectResponse(f"/runs/{run_id}", status_code=303)


@router.post("/runs/{run_id}/pause")
async def pause_page(request: Request, svc: Service, run_id: str) -> Response:
    """Pause the run (with the reason typed), then show it."""
    raw = await _checked_form(request)
    await require(svc, run_id, request.state.principal, "pause")
    await svc.pause(run_id, (raw.get("reason") or [""])[-1].strip(), request.state.principal)
    return RedirectResponse(f"/runs/{run_id}", status_code=303)


@router.post("/runs/{run_id}/unpause")
async def unpause_page(request: Request, svc: Service, run_id: str) -> Response:
    """Unpause the run, then show it."""
    await _checked_form(request)
    await require(svc, run_id, request.state.principal, "unpause")
    await svc.unpause(run_id, request.state.principal)
    return RedirectResponse(f"/runs/{run_id}", status_code=303)


@router.post("/runs/{run_id}/reassign")
async def reassign_page(request: Request, svc: Service, run_id: str) -> Response:
    """The admin gives an open request to other people (a ``reassign`` decision)."""
    raw = await _checked_form(request)

    def names(key: str) -> list[str]:
        return [n.strip() for n in (raw.get(key) or [""])[-1].split(",") if n.strip()]
    await svc.reassign(run_id, (raw.get("request_id") or [""])[-1], assignees=names("assignees"),
                       roles=names("roles"), by=request.state.principal, via="ui")
    return RedirectResponse(f"/runs/{run_id}", status_code=303)


@router.post("/runs/{run_id}/fork")
async def fork_page(request: Request, svc: Service, run_id: str) -> Response:
    """Fork the run from the chosen checkpoint, then show the new run."""
    raw = await _checked_form(request)
    await require(svc, run_id, request.state.principal, "fork")
    forked = await svc.fork(run_id, (raw.get("checkpoint_id") or [""])[-1],
                            by=actor(request.state.principal), via="ui")
    return RedirectResponse(f"/runs/{forked.run_id}", status_code=303)


# -- login ----------------------------------------------------------------------------------------


def _local(target: str) -> str:
    """Only a path on this site is a place to go after login (no open redirect)."""
    return target if target.startswith("/") and not target.startswith(("//", "/\\")) else "/"


@router.get("/login", response_class=HTMLResponse)
async def login_page(request: Request, next: str = "/") -> Response:
    """The login form (not in the open mode, where everyone is the admin)."""
    if request.app.state.security.open:
        return RedirectResponse("/", status_code=303)
    return render(request, "login.html", {"next": _local(next), "failed": False})


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request, svc: Service) -> Response:
    """Check a person's name and password, or the token; start a session and go on.

    A session the browser came with ends here (a planted one is not kept).
    Failed logins are counted per name and per client (``_throttle``): after
    too many, the answer is 429 with ``Retry-After``, whatever was sent.
    """
    raw = await _checked_form(request)
    security: Security = request.app.state.security
    sessions: Sessions = request.app.state.sessions
    throttle: LoginThrottle = request.app.state.throttle
    target = _local((raw.get("next") or ["/"])[-1])
    name = (raw.get("name") or [""])[-1].strip()
    keys = throttle.keys(name, request.client.host if request.client else None)
    wait = throttle.retry_after(keys)
    if wait is not None:
        response = render(request, "login.html", {"next": target, "failed": "throttled",
                                                  "retry_after": wait}, status=429)
        response.headers["retry-after"] = str(wait)
        return response
    if name:
        person = await Users(svc.runtime.store).login(name, (raw.get("password") or [""])[-1])
        if person is None:
            await throttle.failed(keys)
            return render(request, "login.html", {"next": target, "failed": "user"}, status=401)
        throttle.succeeded(name)
        cookie, user = USER_COOKIE, person.id
    elif security.token is not None and security.check_token((raw.get("token") or [""])[-1]):
        cookie, user = SESSION_COOKIE, None
    else:
        await throttle.failed(keys)
        return render(request, "login.html", {"next": target, "failed": True}, status=401)
    await _end_sessions(request, sessions)
    response = RedirectResponse(target, status_code=303)
    response.delete_cookie(SESSION_COOKIE if user is not None else USER_COOKIE, path="/")
    security.set_cookie(response, request, cookie, await sessions.start(user))
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    """End the session (its row is deleted: the cookie is worthless after this)."""
    await _checked_form(request)
    await _end_sessions(request, request.app.state.sessions)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    response.delete_cookie(USER_COOKIE, path="/")
    return response


async def _end_sessions(request: Request, sessions: Sessions) -> None:
    for name in (USER_COOKIE, SESSION_COOKIE):
        await sessions.end(request.cookies.get(name, ""))
