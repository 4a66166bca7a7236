"""A compiled statement: what a driver runs. Imports nothing beyond the standard library.

:class:`Statement` is what ``_tables.py`` compiles SQLAlchemy Core into and
what the statement cache (``_cache.py``) stores and reads back, so the
transaction functions and the drivers never need SQLAlchemy itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Statement"]


@dataclass(frozen=True, slots=True)
class Statement:
    """A compiled statement: SQL text and the order of its named parameters."""

    sql: str
    names: tuple[str, ...]
    constants: Mapping[str, object]
    columns: tuple[str, ...] = ()

    def bind(self, params: Mapping[str, object]) -> tuple[object, ...]:
        """Positional parameters, in SQL order, from named ones."""
        if self.constants:
            params = {**self.constants, **params}
        return tuple([params[name] for name in self.names])
