"""The whole inbox as people see it: ``PendingRequest`` straight from the result tuples.

``Runtime.pending_requests`` lists every open request (the CLI's ``requests``,
tens of thousands of rows). Going through ``RequestRow`` built two objects
a row and decoded each request's approval and response schema again; here
one statement selects only the columns a ``PendingRequest`` shows
(``Queries.req_views``) and each row becomes one ``PendingRequest``: the
response schemas and approvals an inbox holds are few and immutable once
decoded, so each distinct one is decoded once and shared (a payload is
decoded for each row: it is the caller's to change).

A row that is not as written returns None: the caller then reads the rows
the usual way, which names the damaged one.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import orjson

from ...model._approvals import default_title
from ...model._clock import utcnow
from ...model._records import PendingRequest
from ...model._serde import decode
from .._approval_rows import Approval, approval_from
from . import _codec as t
from ._ops import Fetch, Row, Tx

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._tables import Queries

__all__ = ["pending_views_tx", "views_from_tuples"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# PendingRequest is a frozen dataclass with slots: each row's is made empty and its
# slots filled through their descriptors, as its generated __init__ fills them through
# object.__setattr__, without binding a dozen keyword arguments per row (half the cost)
_FIELDS = tuple(f.name for f in dataclasses.fields(PendingRequest))
assert _FIELDS == ("id", "run_id", "node", "payload", "response_schema", "created_at",
                   "workflow_name", "expires_at", "title", "assignees", "roles", "escalated")
_SETTERS = tuple(getattr(PendingRequest, name).__set__ for name in _FIELDS)
_TAG = b'"__df__":'  # a payload holding a tagged value is decoded by model._serde.decode


def pending_views_tx(q: Queries, workflow_name: str | None) -> Tx[list[PendingRequest] | None]:
    """Every open request a person may answer now, oldest first; None: a damaged row."""
    stmt = q.req_views[workflow_name is not None]
    now = t.to_us(utcnow())
    rows: list[Row] = yield Fetch(stmt, stmt.bind({"workflow_name": workflow_name, "now": now}))
    return views_from_tuples(stmt.columns, rows, now)


def views_from_tuples(columns: Sequence[str], rows: Sequence[Row],
                      now: int) -> list[PendingRequest] | None:
    """One ``PendingRequest`` a row of ``req_views``; None when a row is not as written.

    ``now`` (microseconds since the epoch): a row past its deadline is kept
    only while its escalation is still to be recorded (``answerable_now``).
    """
    at = {name: i for i, name in enumerate(columns)}
    rid, run, wf, node, payload, schema, created, due, appr = (at[n] for n in (
        "request_id", "run_id", "workflow_name", "node", "payload", "response_schema",
        "created_at", "expires_at", "approval"))
    schemas: dict[bytes, dict[str, Any]] = {}
    approvals: dict[bytes | None, Approval] = {}
    out: list[PendingRequest] = []
    append, loads, delta, new = out.append, orjson.loads, timedelta, object.__new__
    s_id, s_run, s_node, s_payload, s_schema, s_created, s_wf, s_due, s_title, s_who, s_roles, \
        s_escalated = _SETTERS
    try:
        for r in rows:
            data, shape, stored = r[payload], r[schema], r[appr]
            if type(data) is not bytes or type(shape) is not bytes:
                return None  # a driver's memoryview or SQLite text: the usual way
            value = decode(data) if _TAG in data else loads(data)
            if (response := schemas.get(shape)) is None:
                response = schemas[shape] = loads(shape)
                if not isinstance(response, dict):
                    return None
            if (approval := approvals.get(stored)) is None:
                approval = approvals[stored] = approval_from(
                    stored if stored is None or type(stored) is bytes else bytes(stored))
            expires = r[due]
            if expires is not None and expires <= now and not approval.escalates:
                continue  # the statement matched its bytes; only an escalation yet to come stays
            view = new(PendingRequest)
            s_id(view, r[rid])
            s_run(view, r[run])
            s_node(view, r[node])
            s_payload(view, value)
            s_schema(view, response)
            s_created(view, _EPOCH + delta(microseconds=r[created]))
            s_wf(view, r[wf])
            s_due(view, None if expires is None else _EPOCH + delta(microseconds=expires))
            s_title(view, approval.title or default_title(value, r[node]))
            s_who(view, approval.assignees)
            s_roles(view, approval.roles)
            s_escalated(view, approval.escalated)
            append(view)
    except (ValueError, TypeError, OverflowError, AttributeError):
        return None
    return out
