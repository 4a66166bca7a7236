"""What ``ctx.request(..., title=, assignees=, roles=, escalate_to=, policy=)`` records."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from ..errors import DurableFlowError, InvalidInputError, LeaseLostError
from ..model._approvals import Policy, Principal, default_title, split_targets
from ..model._clock import utcnow
from ..model._serde import decode, encode
from ..store._approval_rows import Approval
from ..store._rows import RequestRow

if TYPE_CHECKING:
    from ._context import TaskCalls

__all__ = ["answer_by_policy", "with_approval"]


def with_approval(row: RequestRow, payload: Any, title: str | None, assignees: Sequence[str],
                  roles: Sequence[str], escalate_to: Sequence[str] = ()) -> RequestRow:
    """``row`` with its title, who may answer it and who it escalates to.

    ``InvalidInputError`` for bad names, or ``escalate_to`` without a deadline.
    """
    if title is not None and (not isinstance(title, str) or not title.strip()):
        raise InvalidInputError(f"title= must be non-empty text, not {title!r}")
    checked = Principal("request", tuple(roles))  # the same checks as a principal's roles
    for who in Principal("request", tuple(assignees)).roles:
        Principal(who)
    split_targets(escalate_to)
    if escalate_to and row.expires_at is None:
        raise InvalidInputError("escalate_to= needs a timeout= (the escalation happens at it)")
    window = None if row.expires_at is None else (row.expires_at - row.created_at).total_seconds()
    approval = Approval(title=title.strip() if title else default_title(payload, row.node),
                        assignees=tuple(assignees), roles=checked.roles,
                        escalate_to=tuple(escalate_to), window=window)
    return dataclasses.replace(row, approval=approval.encode())


async def answer_by_policy(calls: TaskCalls, row: RequestRow, policy: Policy,
                           adapter: TypeAdapter[Any]) -> Any:
    """Record ``policy``'s answer to the new request ``row`` (and its decision); return it.

    Written at once under the run's lease, so a crash after it finds the
    request answered and asks nobody.
    """
    from ._context import own

    try:
        value = adapter.validate_python(policy.answer)
        data = encode(adapter.dump_python(value, mode="json"))
    except (ValidationError, TypeError) as exc:
        raise own(InvalidInputError(
            f"policy {policy.name!r} answers {policy.answer!r}, which does not fit the "
            f"request's type: {exc}")) from None
    answered = dataclasses.replace(row, answer=data, answered_at=utcnow())
    rc = calls.io.run
    try:
        stored = await rc.answer_by_policy(answered, policy.principal)
    except LeaseLostError as exc:
        rc.fence.lose(exc)
        raise
    except DurableFlowError as exc:
        raise own(exc) from None
    return adapter.validate_python(decode(stored.answer or data))
