"""Bearer JWTs for single sign-on (``durable-flow ui --jwt-key`` / ``--jwt-public-key``).

A token's ``sub`` claim is the principal id and its ``roles`` claim (a list
of strings, optional) the roles it holds. ``--jwt-key`` is a shared secret
(HS256/384/512); ``--jwt-public-key`` a PEM public key (RS*, PS*, ES*, EdDSA).
Expiry (``exp``) and not-before (``nbf``) are checked when present.
"""

from __future__ import annotations

from collections.abc import Sequence

import jwt

from ..errors import NotAuthorizedError
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
                                options={"require": ["sub"]})
        except jwt.PyJWTError as exc:
            raise NotAuthorizedError(None, f"sign in with this token ({exc})") from None
        roles = claims.get("roles", [])
        if not isinstance(roles, list) or not all(isinstance(r, str) and r for r in roles):
            raise NotAuthorizedError(str(claims["sub"]), "sign in: the token's roles claim must be "
                                                         "a list of role names")
        return Principal(str(claims["sub"]), tuple(roles))
