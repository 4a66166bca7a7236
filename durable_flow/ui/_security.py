"""Who may use the UI, and proof that a form was sent by the UI's own pages.

* Without a token (and without a JWT verifier) the server listens on
  loopback only (``check_bind``) and answers only requests addressed to a
  loopback host name, so a web page elsewhere cannot reach it through DNS
  rebinding; everyone is the admin and nobody can log in.
* With a token every request needs a credential, on any address:
  ``Authorization: Bearer <token>``, or the HttpOnly cookie of a login.
  Anything else is answered 401; only the (self-contained) login form is
  served without it.
* A login, with the token or with a person's name and password
  (``durable-flow users``), is a server-side session (``_sessions``): the
  cookie holds a random id whose sha256 is a row in the store, looked up on
  every request, ended by logout and by changes to the user. With a JWT
  verifier (``--jwt-key``) a bearer JWT names a person too; with a JWT
  verifier and no token, a request without a credential is refused (never
  the admin). People act as themselves (``by``); the token (or no token) is
  the admin.
* Every form that changes something carries ``csrf_token``: an HMAC, under a
  secret of this server, of the login session's id (of a random HttpOnly
  ``SameSite=Strict`` cookie before a login), so a token minted by someone
  else, or for another session, does not pass. JSON API writes must be
  ``application/json`` (a cross-site form cannot send that without a
  preflight this server never grants) and, when authenticated by the
  cookie, carry the token in ``X-CSRF-Token`` too.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from dataclasses import dataclass, field
from typing import Literal

from starlette.requests import Request
from starlette.responses import Response

from ..errors import NotAuthorizedError
from ..model._approvals import Principal
from ._bearer import JwtVerifier
from ._sessions import Session, Sessions

__all__ = [
    "CSRF_COOKIE",
    "CSRF_FIELD",
    "SESSION_COOKIE",
    "USER_COOKIE",
    "Auth",
    "Security",
    "check_bind",
    "is_loopback",
]

SESSION_COOKIE = "durable_flow_session"
"""The cookie of a login with the admin token (a session id)."""
USER_COOKIE = "durable_flow_user"
"""The cookie of a person's login (a session id)."""
CSRF_COOKIE = "durable_flow_csrf"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
Auth = Literal["open", "bearer", "cookie", "link", "user", "jwt", "public"]
"""How a request was let in ("public": the app's own static assets, served to anyone)."""

HEADERS = {
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
        "form-action 'self'"),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (``127.0.0.0/8``, ``::1``)."""
    host = host.strip("[]").lower()
    if host in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to listen off loopback without a token (``ValueError`` says why)."""
    if token is None and not is_loopback(host):
        raise ValueError(f"refusing to listen on {host} without --token: anyone who can reach "
                         "it could answer requests and cancel runs; pass --token (or listen on "
                         "127.0.0.1)")
    if token is not None and len(token) < 8:
        raise ValueError("--token must be at least 8 characters long")


def _host_of(header: str) -> str:
    """The host name of a ``Host`` header, without its port (``[::1]:8000`` is ``::1``).

    Anything after an IPv6 literal's ``]`` but a port keeps the whole header,
    so ``[::1].evil.example`` is that name, not the loopback address.
    """
    if header.startswith("["):
        inside, _, rest = header[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else None
        return inside if rest == "" or (port is not None and port.isdigit()) else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


@dataclass(frozen=True, slots=True)
class Security:
    """The token (if any) and this server's CSRF secret."""

    token: str | None = None
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    jwt: JwtVerifier | None = None

    async def identify(self, request: Request, sessions: Sessions
                       ) -> tuple[Auth | None, Principal | None, Session | None]:
        """How the request proved it may be served, who it acts as (None: admin), its login."""
        person = await sessions.find(request.cookies.get(USER_COOKIE, ""), admin=False)
        if person is not None:
            return "user", person.principal, person
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and self.jwt is not None and given.count(".") == 2 \
                and not self.check_token(given.strip()):
            try:
                return "jwt", self.jwt.principal(given.strip()), None
            except NotAuthorizedError:
                return None, None, None
        admin = await sessions.find(request.cookies.get(SESSION_COOKIE, ""), admin=True)
        if admin is not None and self.token is not None:
            return "cookie", None, admin
        return self.authenticate(request), None, None

    def host_allowed(self, request: Request) -> bool:
        """Without a token, only requests addressed to a loopback host name are served."""
        return self.token is not None or is_loopback(_host_of(request.headers.get("host", "")))

    @property
    def open(self) -> bool:
        """Whether anyone is the admin without a credential (no token, no JWT verifier)."""
        return self.token is None and self.jwt is None

    def authenticate(self, request: Request) -> Auth | None:
        """How the request proved it may be served by the token (or the open mode), or None."""
        if self.token is None:
            return "open" if self.jwt is None else None
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(),
                                                              self.token.encode()):
            return "bearer"
        return None

    def check_token(self, given: str) -> bool:
        """True when ``given`` is the token (constant time)."""
        return self.token is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def _csrf_for(self, request: Request, *, rendering: bool) -> str | None:
        """The CSRF token of this request's login session, else of its CSRF cookie."""
        session: Session | None = getattr(request.state, "session", None)
        if session is not None:
            message = b"session\0" + session.id.encode()
        else:
            seed = (getattr(request.state, "csrf_seed", None) if rendering else None) \
                or request.cookies.get(CSRF_COOKIE, "")
            if not seed:
                return None
            message = b"browser\0" + seed.encode()
        return hmac.new(self.secret, message, hashlib.sha256).hexdigest()

    def csrf_token(self, request: Request) -> str:
        """The ``csrf_token`` value forms of this page carry (bound to the login session)."""
        return self._csrf_for(request, rendering=True) or ""

    def csrf_ok(self, request: Request, submitted: str | None) -> bool:
        """True when ``submitted`` is the CSRF token of this request's session (or browser)."""
        expected = self._csrf_for(request, rendering=False)
        if not expected or not submitted:
            return False
        return hmac.compare_digest(expected.encode(), submitted.encode())

    def api_write_ok(self, request: Request, auth: Auth) -> str | None:
        """Why a JSON API write is refused (None when it is allowed)."""
        kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if kind != "application/json":
            return "send the body as application/json"
        if auth in ("cookie", "user") and not self.csrf_ok(request, request.headers.get(CSRF_HEADER)):
            return "a request authenticated by the login cookie needs the X-CSRF-Token header"
        return None

    def ensure_csrf_cookie(self, request: Request) -> str | None:
        """A new CSRF seed for a browser that has none yet (set on the response), else None."""
        if request.cookies.get(CSRF_COOKIE):
            return None
        seed = secrets.token_urlsafe(32)
        request.state.csrf_seed = seed
        return seed

    @staticmethod
    def set_cookie(response: Response, request: Request, name: str, value: str) -> None:
        """An HttpOnly, SameSite=Strict cookie for the whole site (Secure over HTTPS)."""
        response.set_cookie(name, value, httponly=True, samesite="strict", path="/",
                            secure=request.url.scheme == "https")
