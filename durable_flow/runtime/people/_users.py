"""The web app's people in the store (``durable-flow users``): ``Users``.

Passwords are kept only as argon2id hashes (:mod:`._passwords`); a person
may have an email address, which the ``SmtpNotifier`` writes to for the
requests of the roles they hold.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import InvalidInputError
from ...model._approvals import Principal
from ...store._outbox_rows import UserRow
from ...store._protocols import CheckpointStore
from ._passwords import hash_password, verify_nothing, verify_password

__all__ = ["Users"]


class Users:
    """Adds, lists, removes and checks the people of a store."""

    def __init__(self, store: CheckpointStore) -> None:
        self.store = store

    async def add(self, name: str, password: str, *, roles: Sequence[str] = (),
                  email: str | None = None) -> UserRow:
        """Add a person (``InvalidInputError`` for a taken name, an empty password, bad roles)."""
        who = Principal(name, tuple(roles))  # the checks of a principal's id and roles
        if not isinstance(password, str) or not password:
            raise InvalidInputError("a user needs a non-empty password")
        if email is not None and "@" not in email:
            raise InvalidInputError(f"{email!r} is not an email address")
        user = UserRow(who.id, hash_password(password), who.roles, email)
        await self.store.add_user(user)
        return await self._require(who.id)

    async def list(self) -> list[UserRow]:
        """Every person, by name."""
        return await self.store.list_users()

    async def remove(self, name: str) -> None:
        """Remove a person and end their sessions (``InvalidInputError`` when there is none)."""
        if not await self.store.remove_user(name):
            raise InvalidInputError(f"no user named {name!r}")

    async def set_roles(self, name: str, roles: Sequence[str]) -> UserRow:
        """Replace a person's roles and end their sessions (``InvalidInputError`` when none)."""
        checked = Principal(name, tuple(roles)).roles
        if not await self.store.set_user_roles(name, checked):
            raise InvalidInputError(f"no user named {name!r}")
        return await self._require(name)

    async def set_password(self, name: str, password: str) -> None:
        """Give a person a new password and end their sessions (``InvalidInputError``)."""
        if not isinstance(password, str) or not password:
            raise InvalidInputError("a user needs a non-empty password")
        if not await self.store.set_user_password(name, hash_password(password)):
            raise InvalidInputError(f"no user named {name!r}")

    async def login(self, name: str, password: str) -> Principal | None:
        """The principal a name and password log in as, or None.

        An unknown name is checked against a dummy hash, so it takes as long
        as a wrong password.
        """
        user = await self.store.get_user(name)
        if user is None:
            verify_nothing(password)
            return None
        if not verify_password(user.password_hash, password):
            return None
        return Principal(user.name, user.roles)

    async def _require(self, name: str) -> UserRow:
        user = await self.store.get_user(name)
        if user is None:
            raise InvalidInputError(f"no user named {name!r}")
        return user
