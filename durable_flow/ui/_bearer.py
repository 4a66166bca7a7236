"""Bearer JWTs for single sign-on (``durable-flow ui --jwt-key`` / ``--jwt-public-key``).

A token's ``sub`` claim is the principal id and its ``roles`` claim (a list
of strings, optional) the roles it holds. ``--jwt-key`` is a shared secret
(HS256/384/512); ``--jwt-public-key`` a PEM public key (RS*, PS*, ES*, EdDSA).
A token must say when it expires (``exp``) and whom it names (a non-empty
``sub``); expiry and not-before (``nbf``) are checked. Anything else is
refused with :class:`NotAuthorizedError` (401).
"""

from __future__ import annotations

from collections.abc import Sequence

import jwt

from ..errors import DurableFlowError, NotAuthorizedError
from ..model._approvals import Principal

__all__ = ["JwtVerifier"]

_HMAC = ("HS256", "HS384", "HS512")
_PUBLIC = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")


class JwtVerifier:
    """Turns a bearer JWT into a :class:`Principal`, or refuses it."""

    def __init__(self, key: str | bytes, *, public: bool, algorithms: Sequence[str] | None = None,
                 audience: str | None = None) -> None:
        self._key = key
        self._algorithms = list(algorithms or (_PUBLIC if public else _HMAC))
        self._audience = audience

    def principal(self, token: str) -> Principal:
        """The principal a token names; ``NotAuthorizedError`` when it is not valid."""
        try:
            claims = jwt.decode(token, self._key, algorithms=self._algorithms, audience=self._audience,
                                options={"require": ["sub", "exp"]})
        except jwt.PyJWTError as exc:
            raise NotAuthorizedError(None, f"sign in with this token ({exc})") from None
        sub = claims["sub"]
        if not isinstance(sub, str) or not sub.strip():
            raise NotAuthorizedError(None, "sign in: the token's sub claim must name someone")
        roles = claims.get("roles", [])
        if not isinstance(roles, list) or not all(isinstance(r, str) and r for r in roles):
            raise NotAuthorizedError(sub, "sign in: the token's roles claim must be a list of "
                                          "role names")
        try:
            return Principal(sub, tuple(roles))
        except DurableFlowError as exc:  # a blank role name, say
            raise NotAuthorizedError(sub, f"sign in: {exc}") from None
