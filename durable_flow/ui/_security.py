"""Who may use the UI, and proof that a form was sent by the UI's own pages.

* Without a token the server listens on loopback only (``check_bind``) and
  answers only requests addressed to a loopback host name, so a web page
  elsewhere cannot reach it through DNS rebinding.
* With a token every request needs it, on any address: ``Authorization:
  Bearer <token>``, or the HttpOnly cookie the login form sets (which holds
  an HMAC of the token, never the token). Anything else is answered 401;
  only the (self-contained) login form is served without it.
* People (``durable-flow users``) log in with their name and password: an
  HttpOnly cookie holds their principal, signed with this server's secret;
  with a JWT verifier (``--jwt-key``) a bearer JWT names one too. They act
  as themselves (``by``); the token (or no token) is the admin.
* Every form that changes something carries ``csrf_token``: an HMAC, under a
  secret of this server, of a random HttpOnly ``SameSite=Strict`` cookie
  (signed double submit). JSON API writes must be ``application/json`` (a
  cross-site form cannot send that without a preflight this server never
  grants) and, when authenticated by the cookie, carry the token in
  ``X-CSRF-Token`` too.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from dataclasses import dataclass, field
from typing import Literal

from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.requests import Request
from starlette.responses import Response

from ..errors import DurableFlowError, NotAuthorizedError
from ..model._approvals import Principal
from ._bearer import JwtVerifier

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
USER_COOKIE = "durable_flow_user"
_USER_SALT = "durable-flow.ui.user-session.v1"
USER_SESSION_SECONDS = 12 * 3600
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
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


@dataclass(frozen=True, slots=True)
class Security:
    """The token (if any) and this server's CSRF secret."""

    token: str | None = None
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    jwt: JwtVerifier | None = None

    def user_session(self, principal: Principal) -> str:
        """The cookie value that logs ``principal`` in (signed, with a time)."""
        return str(URLSafeTimedSerializer(self.secret, salt=_USER_SALT).dumps(
            [principal.id, list(principal.roles)]))

    def identify(self, request: Request) -> tuple[Auth | None, Principal | None]:
        """How the request proved it may be served, and the person it acts as (None: admin)."""
        person = self._user_of(request)
        if person is not None:
            return "user", person
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and self.jwt is not None and given.count(".") == 2 \
                and not self.check_token(given.strip()):
            try:
                return "jwt", self.jwt.principal(given.strip())
            except NotAuthorizedError:
                return None, None
        return self.authenticate(request), None

    def _user_of(self, request: Request) -> Principal | None:
        cookie = request.cookies.get(USER_COOKIE)
        if not cookie:
            return None
        try:
            pid, roles = URLSafeTimedSerializer(self.secret, salt=_USER_SALT).loads(
                cookie, max_age=USER_SESSION_SECONDS)
            return Principal(str(pid), tuple(str(r) for r in roles))
        except (BadSignature, ValueError, TypeError, DurableFlowError):
            return None

    @property
    def session_value(self) -> str:
        """What the login cookie holds: an HMAC of the token, so the cookie is not the token."""
        token = (self.token or "").encode()
        return hmac.new(token, b"durable-flow ui session", hashlib.sha256).hexdigest()

    def host_allowed(self, request: Request) -> bool:
        """Without a token, only requests addressed to a loopback host name are served."""
        return self.token is not None or is_loopback(_host_of(request.headers.get("host", "")))

    def authenticate(self, request: Request) -> Auth | None:
        """How the request proved it may be served, or None."""
        if self.token is None:
            return "open"
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(),
                                                              self.token.encode()):
            return "bearer"
        cookie = request.cookies.get(SESSION_COOKIE, "")
        if cookie and hmac.compare_digest(cookie.encode(), self.session_value.encode()):
            return "cookie"
        return None

    def check_token(self, given: str) -> bool:
        """True when ``given`` is the token (constant time)."""
        return self.token is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def csrf_token(self, request: Request) -> str:
        """The ``csrf_token`` value forms of this page carry."""
        seed = getattr(request.state, "csrf_seed", None) or request.cookies.get(CSRF_COOKIE, "")
        return hmac.new(self.secret, seed.encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, request: Request, submitted: str | None) -> bool:
        """True when ``submitted`` matches this browser's CSRF cookie."""
        seed = request.cookies.get(CSRF_COOKIE, "")
        if not seed or not submitted:
            return False
        expected = hmac.new(self.secret, seed.encode(), hashlib.sha256).hexdigest()
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
