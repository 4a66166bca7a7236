"""Password hashes for the web app's people (``durable-flow users``): argon2id."""

from __future__ import annotations

from functools import cache

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

__all__ = ["hash_password", "verify_nothing", "verify_password"]

# argon2-cffi's defaults follow RFC 9106's second recommendation (argon2id, 64 MiB)
_HASHER = PasswordHasher()


def hash_password(password: str) -> str:
    """An argon2id hash of ``password``, salted, in PHC string form."""
    return _HASHER.hash(password)


def verify_password(stored: str, password: str) -> bool:
    """Whether ``password`` matches the ``stored`` hash (a malformed hash matches nothing)."""
    try:
        return _HASHER.verify(stored, password)
    except (VerificationError, InvalidHashError):
        return False


def verify_nothing(password: str) -> bool:
    """Spend the time of one verification against a dummy hash; always False.

    For a login with a name that is nobody's: its answer then takes as long
    as a wrong password's, so timing does not tell which names exist.
    """
    verify_password(_dummy_hash(), password)
    return False


@cache
def _dummy_hash() -> str:
    """The hash a name that is nobody's is checked against, made on first use.

    Made lazily: hashing costs a quarter of a second of CPU, which every
    process importing this module (each CLI command) would otherwise pay.
    """
    return _HASHER.hash("durable-flow: no such user")
