"""The application factory: the store's runtime, an optional worker, pages, API, guard."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import http
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import jinja2
import structlog
from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.exceptions import HTTPException

from .._version import __version__
from ..errors import (
    CheckpointNotFoundError,
    DurableFlowError,
    InvalidInputError,
    InvalidLinkError,
    InvalidResponseError,
    NotAuthorizedError,
    RunLockedError,
    RunNotFoundError,
    RunNotResumableError,
    UnknownRequestError,
)
from ..model._graph import Workflow
from ..runtime._runtime import Runtime
from ..runtime._worker import Worker
from ..runtime.notifications._notifiers import Notifier
from ..runtime.notifications._outbox import outbox_for, stop_outbox
from ..runtime.people._links import SECRET_ENV, LinkSigner
from ..store._protocols import CheckpointStore
from . import _api, _approve, _pages, _start, _views
from ._bearer import JwtVerifier
from ._models import ProblemOut
from ._security import CSRF_COOKIE, HEADERS, Security
from ._service import UiService
from ._sessions import Sessions
from ._throttle import LoginThrottle

__all__ = ["create_app"]

_HERE = Path(__file__).parent
_log = structlog.get_logger("durable_flow")
_STATUS: tuple[tuple[type[DurableFlowError], int], ...] = (
    (RunNotFoundError, 404), (CheckpointNotFoundError, 404), (RunLockedError, 409),
    (RunNotResumableError, 409), (UnknownRequestError, 409), (InvalidResponseError, 422),
    (InvalidInputError, 422), (NotAuthorizedError, 403), (InvalidLinkError, 400))


def create_app(store: CheckpointStore, *, workflows: Sequence[Workflow] = (),
               token: str | None = None, worker_name: str | None = None,
               notifiers: Sequence[Notifier] = (), base_url: str | None = None,
               link_secret: str | None = None, jwt: JwtVerifier | None = None) -> FastAPI:
    """The web inbox and run inspector over ``store``.

    ``workflows`` are executed by an in-process :class:`Worker` while the app
    runs (answered runs of them continue here, and runs can be forked);
    without them a separate worker continues answered runs. With ``token``
    every request must present it (see ``_security``), but for the pages of
    signed approval links (``link_secret``, default ``DURABLE_FLOW_SECRET``).
    ``jwt`` accepts bearer JWTs naming a principal. ``notifiers`` deliver the
    store's notification outbox while the app runs (links under
    ``base_url``). Serve the app with uvicorn (``durable-flow ui`` does).
    """
    app = FastAPI(title="durable-flow", version=__version__, openapi_url="/api/openapi.json",
                  docs_url=None, redoc_url=None,
                  lifespan=_lifespan(store, list(workflows), worker_name, list(notifiers),
                                     base_url))
    secret = link_secret if link_secret is not None else os.environ.get(SECRET_ENV)
    app.state.link_signer = LinkSigner(secret) if secret else None
    app.state.security = Security(token, jwt=jwt)
    app.state.sessions = Sessions(store)
    app.state.throttle = LoginThrottle()
    app.state.templates = _templates()
    app.mount("/static", StaticFiles(directory=_HERE / "static"), name="static")
    app.include_router(_api.router)
    app.include_router(_pages.router)
    app.include_router(_approve.router)
    app.include_router(_start.router)
    app.include_router(_start.api_router)
    app.middleware("http")(_guard)
    app.add_exception_handler(DurableFlowError, _on_error)  # type: ignore[arg-type]
    app.add_exception_handler(_pages.CsrfError, _on_csrf)
    app.add_exception_handler(RequestValidationError, _on_invalid)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, _on_http)  # type: ignore[arg-type]
    return app


def _lifespan(store: CheckpointStore, workflows: list[Workflow], worker_name: str | None,
              notifiers: list[Notifier], base_url: str | None
              ) -> Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with Runtime(store) as runtime:
            app.state.service = UiService(runtime, workflows)
            worker = Worker(store, workflows, name=worker_name) if workflows else None
            serving = asyncio.create_task(worker.serve()) if worker else None
            outbox = outbox_for(store, notifiers, base_url, 1.0)
            delivering = asyncio.create_task(outbox.serve()) if outbox else None
            try:
                yield
            finally:
                await stop_outbox(outbox, delivering)
                await app.state.service.close()
                if worker is not None and serving is not None:
                    await worker.stop()
                    serving.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await serving

    return lifespan


@functools.cache
def _templates() -> Jinja2Templates:
    """The page templates, compiled once per process.

    Every app shares them: they are files of the package and their globals are
    pure functions.
    """
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(_HERE / "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    env.globals.update(pretty=_views.pretty, short_time=_views.short_time)
    return Jinja2Templates(env=env)


Next = Callable[[Request], Awaitable[Response]]


async def _guard(request: Request, call_next: Next) -> Response:
    """Host check, authentication, API write rules, the CSRF cookie, security headers."""
    security: Security = request.app.state.security
    path = request.url.path
    if not security.host_allowed(request):
        return Response("This server answers only on localhost.", status_code=400,
                        media_type="text/plain")
    auth, person, session = await security.identify(request, request.app.state.sessions)
    request.state.principal = person  # None: the admin (the token, or no token)
    request.state.session = session  # the login the request came with (binds the CSRF token)
    if auth is None and path.startswith("/approve/"):
        auth = "link"  # the signed link is the credential (checked by the page)
    if auth is None and path.startswith("/static/"):
        # the app's own style sheet and scripts hold nothing private: the login
        # page and a signed link's page are styled before anyone is known
        auth = "public"
    if auth is None and path != "/login":
        return _unauthorized(request)
    request.state.auth = auth
    if auth is not None and path.startswith("/api/") and request.method not in ("GET", "HEAD"):
        why = security.api_write_ok(request, auth)
        if why is not None:
            body = ProblemOut(error="RequestRefused", message=why).model_dump()
            return JSONResponse(body, status_code=415 if "json" in why else 403)
    seed = None if path.startswith(("/static/", "/api/")) else security.ensure_csrf_cookie(request)
    response = await call_next(request)
    if seed is not None:
        security.set_cookie(response, request, CSRF_COOKIE, seed)
    for key, value in HEADERS.items():
        response.headers.setdefault(key, value)
    if path.startswith("/static/"):
        response.headers["cache-control"] = "max-age=3600"
    return response


def _unauthorized(request: Request) -> Response:
    if request.url.path.startswith("/api/"):
        body = ProblemOut(error="Unauthorized",
                          message="send Authorization: Bearer <token>").model_dump()
        return JSONResponse(body, status_code=401, headers={"www-authenticate": "Bearer"})
    security: Security = request.app.state.security
    seed = security.ensure_csrf_cookie(request)
    response = _pages.render(request, "login.html", {"next": request.url.path, "failed": False},
                             status=401)
    if seed is not None:
        security.set_cookie(response, request, CSRF_COOKIE, seed)
    for key, value in HEADERS.items():
        response.headers.setdefault(key, value)
    return response


def _status_of(exc: DurableFlowError) -> int:
    return next((code for kind, code in _STATUS if isinstance(exc, kind)), 400)


async def _on_error(request: Request, exc: DurableFlowError) -> Response:
    status = _status_of(exc)
    if request.url.path.startswith("/api/"):
        body = ProblemOut(error=type(exc).__name__, message=str(exc),
                          request_id=getattr(exc, "request_id", None)).model_dump()
        return JSONResponse(body, status_code=status)
    title, text = _in_words(exc)
    return _pages.render(request, "message.html", {"title": title, "text": text}, status=status)


_TITLES: tuple[tuple[type[DurableFlowError], str], ...] = (
    (RunNotFoundError, "Not found"), (CheckpointNotFoundError, "Not found"),
    (RunLockedError, "Busy"), (RunNotResumableError, "Not possible now"),
    (UnknownRequestError, "No such request"), (InvalidResponseError, "Not a valid answer"),
    (InvalidInputError, "Not valid"), (NotAuthorizedError, "Not allowed"),
    (InvalidLinkError, "This link is not valid"))


def _in_words(exc: DurableFlowError) -> tuple[str, str]:
    """A page's title and sentence for an error: plain words, no class names (the API keeps those)."""
    title = next((t for kind, t in _TITLES if isinstance(exc, kind)), "Something went wrong")
    if isinstance(exc, RunNotFoundError):
        return title, f"There is no run {exc.run_id}, or it is not one you may see."
    if isinstance(exc, RunLockedError):
        return title, "Someone or something is working on this run right now: try again soon."
    text = str(exc).strip()
    return title, (text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")) if text \
        else "That did not work."


async def _on_invalid(request: Request, exc: RequestValidationError) -> Response:
    """Malformed JSON or a body of the wrong shape: the API's error envelope."""
    problems = "; ".join(
        ".".join(str(p) for p in e.get("loc", ()) if p != "body") + f": {e.get('msg', '')}"
        for e in exc.errors())
    body = ProblemOut(error="InvalidInputError", message=problems or "the request is not valid",
                      request_id=None).model_dump()
    return JSONResponse(body, status_code=422)


async def _on_http(request: Request, exc: HTTPException) -> Response:
    """An unknown route or method under ``/api/``: the API's error envelope, headers kept."""
    if not request.url.path.startswith("/api/"):
        return await http_exception_handler(request, exc)
    try:
        name = http.HTTPStatus(exc.status_code).phrase.title().replace(" ", "").replace("-", "")
    except ValueError:
        name = "HTTPError"
    message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    if exc.status_code == 404 and message == "Not Found":
        message = f"no API route {request.method} {request.url.path}"
    body = ProblemOut(error=name, message=message, request_id=None).model_dump()
    return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)


async def _on_csrf(request: Request, exc: Exception) -> Response:
    del exc
    return _pages.render(request, "message.html", {
        "title": "Form expired",
        "text": "This form is missing its CSRF token or the token is stale: reload the page "
                "and send it again."}, status=403)
