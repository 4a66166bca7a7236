"""Checking answers to pending requests before anything is written."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import date, datetime, time, timedelta
from functools import cache
from typing import Any
from uuid import UUID

import orjson
from pydantic import TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python

from ..engine import DAMAGE, corrupted
from ..errors import DurableFlowError, InvalidResponseError, UnknownRequestError
from ..model._clock import utcnow
from ..model._records import RunStatus
from ..model._serde import as_bytes, encode
from ..store._protocols import CheckpointStore, RequestRow, RunRecord
from ..store._rows import escalation_due
from ._inspect import response_schema

__all__ = ["check_event", "check_responses", "format_checker", "only_repeats", "parked_repeats"]


async def only_repeats(store: CheckpointStore, record: RunRecord,
                       responses: Mapping[str, Any] | None) -> bool:
    """True when every response repeats an answer that was already recorded."""
    if not responses:
        return False
    try:
        answers, _ = await check_responses(store, record, responses)
    except DurableFlowError:
        return False
    return not answers


async def parked_repeats(store: CheckpointStore, record: RunRecord,
                         repeated: list[str]) -> bool:
    """Whether ``repeated`` (answers recorded before) are all for parked tasks' requests.

    Re-sending them while the run executes other branches is a no-op, as
    the first answer was recorded without taking the run.
    """
    if not repeated or record.status is not RunStatus.RUNNING:
        return False
    rows = {r.id: r for r in await store.get_requests(record.run_id)}
    return all(rid in rows and rows[rid].parked for rid in repeated)


async def check_responses(
    store: CheckpointStore, record: RunRecord, responses: Mapping[str, Any]
) -> tuple[dict[str, bytes], list[str]]:
    """Validate answers; return (new answers as bytes, ids that were already answered).

    Raises ``UnknownRequestError`` for an id that is not pending (unless the
    identical answer was recorded before) and ``InvalidResponseError`` for an
    answer that does not fit the request's schema. Nothing is written.
    """
    if not responses:
        return {}, []
    rows = {r.id: r for r in await store.get_requests(record.run_id)}
    answers: dict[str, bytes] = {}
    repeated: list[str] = []
    now = utcnow()
    for rid, answer in responses.items():
        row = rows.get(rid)
        if row is None or row.kind != "request" or row.timed_out or (
                row.answer is None and row.expires_at is not None and row.expires_at <= now
                and not escalation_due(row)):
            # not a question to a person, or its deadline passed (and it does not
            # escalate, which its first people may answer until it did): no answer is taken
            raise UnknownRequestError(record.run_id, rid)
        answer, recorded = _completed(row, answer)
        data, plain = _plain(rid, recorded)
        if row.answer is not None:
            if _stored(row, lambda r: orjson.loads(as_bytes(r.answer)), "answer") == plain:
                repeated.append(rid)
                continue
            raise UnknownRequestError(record.run_id, rid)
        schema = _stored(row, lambda r: response_schema(r.response_schema), "response schema")
        _validate(rid, row, to_jsonable_python(answer), schema)
        answers[rid] = data
    return answers, repeated


async def check_event(store: CheckpointStore, run_id: str, name: str, payload: Any) -> None:
    """``InvalidResponseError`` when a wait for event ``name`` is open and ``payload`` fails it.

    The event would go to the run's oldest open wait for ``name`` (unless
    events of that name are already kept ahead of it): its recorded type
    (the JSON Schema of the node's ``response_type``) checks the payload
    before anything is stored, as an answer is checked. Nothing is written.
    """
    waits = [r for r in await store.get_requests(run_id, open_only=True)
             if r.kind == "event" and not r.timed_out and _event_name(r) == name]
    if not waits:
        return  # kept for a wait to come; checked when it is delivered
    if any(m.name == name and m.request_id is None for m in await store.get_mail(run_id)):
        return  # earlier events of this name go first
    wait = waits[0]
    schema = _stored(wait, lambda r: response_schema(r.response_schema), "event type")
    try:
        _validate(wait.id, wait, to_jsonable_python(payload), schema)
    except InvalidResponseError as exc:
        raise InvalidResponseError(
            wait.id, f"event {name!r} does not fit the type node {wait.node!r} waits for: "
                     f"{exc.reason}", schema) from None


def _event_name(row: RequestRow) -> Any:
    try:
        return orjson.loads(as_bytes(row.payload))
    except orjson.JSONDecodeError:
        return None  # a damaged wait; delivering to it fails its run, as before


def _completed(row: RequestRow, answer: Any) -> tuple[Any, Any]:
    """The answer to check, and the one to record (a tool approval's with what runs)."""
    if b"tool_approval" not in as_bytes(row.payload):
        return answer, answer
    from ..model._effects import complete_decision

    payload = _stored(row, lambda r: orjson.loads(as_bytes(r.payload)), "payload")
    if not isinstance(payload, dict) or payload.get("kind") != "tool_approval":
        return answer, answer
    given = to_jsonable_python(answer)
    if isinstance(given, dict):
        given.pop("arguments_digest", None)  # the runtime's to fill in, never the answerer's
    return given, complete_decision(payload, given)


def _stored(row: RequestRow, read: Callable[[RequestRow], Any], what: str) -> Any:
    """A stored part of a request; damaged data raises ``CheckpointCorruptedError``."""
    try:
        return read(row)
    except DAMAGE as exc:
        raise corrupted(row.run_id, row.checkpoint_id, exc, f"the {what} of {row.id!r}") from None


def _format_check(adapter: TypeAdapter[Any]) -> Callable[[object], bool]:
    def check(value: object) -> bool:
        if isinstance(value, str):
            adapter.validate_python(value)
        return True

    return check


def _validate(rid: str, row: RequestRow, answer: Any, schema: dict[str, Any]) -> None:
    """``InvalidResponseError`` unless ``answer`` fits the request's JSON Schema.

    A damaged stored schema is reported as ``CheckpointCorruptedError``.
    """
    import jsonschema  # on first answer only: it costs more to import than the rest here

    try:
        jsonschema.validate(answer, schema, format_checker=format_checker())
    except jsonschema.ValidationError as exc:
        raise InvalidResponseError(rid, exc.message, schema) from None
    except (jsonschema.SchemaError, re.error) as exc:
        raise corrupted(row.run_id, row.checkpoint_id, exc,
                        f"the response schema of {row.id!r}") from None


@cache
def format_checker() -> Any:
    """String formats checked the way the node's pydantic type will parse them.

    So an answer that passes here does not fail later inside ``ctx.request``.
    """
    import jsonschema

    checker = jsonschema.FormatChecker()
    for name, kind in (("date-time", datetime), ("date", date), ("time", time),
                       ("duration", timedelta), ("uuid", UUID)):
        checker.checks(name, raises=ValidationError)(_format_check(TypeAdapter(kind)))
    return checker


def _plain(rid: str, answer: Any) -> tuple[bytes, Any]:
    try:
        data = encode(answer)
    except TypeError as exc:
        raise InvalidResponseError(rid, f"cannot be stored: {exc}") from None
    return data, orjson.loads(data)
