"""What ``ctx.request(..., title=, assignees=, roles=)`` records: the request's approval."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ..errors import InvalidInputError
from ..model._approvals import Principal, default_title
from ..store._approval_rows import Approval
from ..store._rows import RequestRow

__all__ = ["with_approval"]


def with_approval(row: RequestRow, payload: Any, title: str | None, assignees: Sequence[str],
                  roles: Sequence[str]) -> RequestRow:
    """``row`` with its title and who may answer it (``InvalidInputError`` for bad names)."""
    if title is not None and (not isinstance(title, str) or not title.strip()):
        raise InvalidInputError(f"title= must be non-empty text, not {title!r}")
    checked = Principal("request", tuple(roles))  # the same checks as a principal's roles
    for who in Principal("request", tuple(assignees)).roles:
        Principal(who)
    approval = Approval(title=title.strip() if title else default_title(payload, row.node),
                        assignees=tuple(assignees), roles=checked.roles)
    return dataclasses.replace(row, approval=approval.encode())
