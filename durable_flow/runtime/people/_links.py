"""Signed, expiring approval links (``Runtime.approval_link``, ``durable-flow link``).

A link's token binds a run, a request, a principal and an expiry, signed
with the app's secret (``DURABLE_FLOW_SECRET``) by itsdangerous. The URL is
``{base_url}/approve/{run_id}/{request_id}?token=...``; the page checks that
the token is intact, not expired and names that very request. That it works
once is the store's part: its request is answered by then.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import quote, urlencode

from itsdangerous import BadSignature, URLSafeSerializer

from ...errors import InvalidInputError, InvalidLinkError

__all__ = ["SECRET_ENV", "LinkGrant", "LinkSigner", "parse_duration"]

SECRET_ENV = "DURABLE_FLOW_SECRET"  # noqa: S105 (the variable's name, not a secret)
_SALT = "durable-flow.approval-link.v1"


@dataclass(frozen=True, slots=True)
class LinkGrant:
    """What a valid link allows: ``principal`` may answer ``request_id`` of ``run_id``."""

    run_id: str
    request_id: str
    principal: str
    expires_at: float


class LinkSigner:
    """Makes and checks approval link tokens with one secret."""

    def __init__(self, secret: str | bytes) -> None:
        if not secret:
            raise InvalidInputError(f"approval links need a secret (set {SECRET_ENV})")
        self._serializer = URLSafeSerializer(secret, salt=_SALT)

    @classmethod
    def from_env(cls) -> LinkSigner:
        """A signer with ``DURABLE_FLOW_SECRET``; ``InvalidInputError`` when it is unset."""
        return cls(os.environ.get(SECRET_ENV, ""))

    def token(self, run_id: str, request_id: str, principal: str, expires_in: timedelta) -> str:
        """A token for ``principal`` to answer one request, valid for ``expires_in``."""
        if expires_in.total_seconds() <= 0:
            raise InvalidInputError(f"a link must expire in the future, not in {expires_in}")
        expires_at = time.time() + expires_in.total_seconds()
        return str(self._serializer.dumps([run_id, request_id, principal, round(expires_at, 3)]))

    def url(self, base_url: str, run_id: str, request_id: str, principal: str,
            expires_in: timedelta) -> str:
        """The link's full URL under ``base_url``."""
        token = self.token(run_id, request_id, principal, expires_in)
        path = f"/approve/{quote(run_id, safe='')}/{quote(request_id, safe='')}"
        return base_url.rstrip("/") + path + "?" + urlencode({"token": token})

    def check(self, token: str, run_id: str, request_id: str, *, now: float | None = None) -> LinkGrant:
        """The grant of a token opened for ``run_id``/``request_id``.

        Raises :class:`InvalidLinkError` with reason ``"altered"``,
        ``"expired"`` or ``"foreign"``.
        """
        try:
            fields = self._serializer.loads(token)
        except BadSignature:
            raise InvalidLinkError("altered", "this link is not valid: it was changed or "
                                              "cut short, or it was not made here") from None
        grant = _grant(fields)
        if (grant.run_id, grant.request_id) != (run_id, request_id):
            raise InvalidLinkError("foreign", "this link was made for another request")
        if (time.time() if now is None else now) >= grant.expires_at:
            raise InvalidLinkError("expired", "this link has expired; ask for a new one")
        return grant


def _grant(fields: object) -> LinkGrant:
    if (not isinstance(fields, list) or len(fields) != 4
            or not all(isinstance(v, str) for v in fields[:3])
            or not isinstance(fields[3], int | float)):
        raise InvalidLinkError("altered", "this link is not valid")
    return LinkGrant(fields[0], fields[1], fields[2], float(fields[3]))


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> timedelta:
    """``"90s"``, ``"15m"``, ``"12h"``, ``"2d"`` or ``"1w"`` as a timedelta."""
    text = text.strip()
    unit = _UNITS.get(text[-1:].lower())
    number = text[:-1] if unit else text
    try:
        value = float(number)
    except ValueError:
        raise InvalidInputError(f"{text!r} is not a duration (say 90s, 15m, 12h, 2d or 1w)") from None
    if value <= 0:
        raise InvalidInputError(f"a duration must be positive, not {text!r}")
    return timedelta(seconds=value * (unit or 1))
