"""Checking answers to pending requests before anything is written."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonschema
import orjson
from pydantic_core import to_jsonable_python

from ._serde import encode
from ._store import CheckpointStore, RunRecord
from .errors import InvalidResponseError, UnknownRequestError

__all__ = ["check_responses"]


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
    for rid, answer in responses.items():
        row = rows.get(rid)
        if row is None:
            raise UnknownRequestError(record.run_id, rid)
        data, plain = _plain(rid, answer)
        if row.answer is not None:
            if orjson.loads(row.answer) == plain:
                repeated.append(rid)
                continue
            raise UnknownRequestError(record.run_id, rid)
        schema = orjson.loads(row.response_schema)
        try:
            jsonschema.validate(to_jsonable_python(answer), schema)
        except jsonschema.ValidationError as exc:
            raise InvalidResponseError(rid, exc.message, schema) from None
        answers[rid] = data
    return answers, repeated


def _plain(rid: str, answer: Any) -> tuple[bytes, Any]:
    try:
        data = encode(answer)
    except TypeError as exc:
        raise InvalidResponseError(rid, f"cannot be stored: {exc}") from None
    return data, orjson.loads(data)
