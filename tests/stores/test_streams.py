"""The stream log on every store: appends numbered per run, reads after an offset, in pages."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from durable_flow.model._serde import encode

from .builders import start_run

WHEN = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def entry(text: str, epoch: int = 1) -> dict[str, Any]:
    return {"epoch": epoch, "namespace": "", "node": "agent", "superstep": 1,
            "kind": "model_delta", "data": encode({"text": text}), "ts": WHEN}


async def test_appends_are_numbered_per_run_and_read_after_an_offset(store: Any) -> None:
    a, b = "run-a", "run-b"
    await start_run(store, a)
    await start_run(store, b)
    assert await store.append_stream(a, [entry("x"), entry("y")]) == 2
    assert await store.append_stream(b, [entry("other")]) == 1
    assert await store.append_stream(a, [entry("z", epoch=2)]) == 3
    rows = await store.read_stream(a, 0)
    assert [(r["seq"], r["epoch"], r["data"]) for r in rows] == [
        (1, 1, encode({"text": "x"})), (2, 1, encode({"text": "y"})), (3, 2, encode({"text": "z"}))]
    assert rows[0]["ts"] == WHEN and rows[0]["node"] == "agent" and rows[0]["run_id"] == a
    assert [r["seq"] for r in await store.read_stream(a, 1)] == [2, 3]
    assert [r["seq"] for r in await store.read_stream(a, 1, 1)] == [2]
    assert await store.read_stream(a, 3) == []
    assert await store.read_stream("nobody", 0) == []
