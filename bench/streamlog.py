"""The cost of the durable stream log: one agent run streaming 10,000 chunks, log on vs off.

Usage::

    python bench/streamlog.py [--chunks N] [--repeat N] [--paces S,S,...] [--write]

Both runs are the same workflow on a fresh SQLite file (synchronous=full, the
default): one agent node whose model produces ``--chunks`` text chunks. With
the log *on* the model streams (each chunk is published as a ``model_delta``
and appended to the run's stream log in batches off the superstep commit);
with it *off* the model is not streamed (``streaming = False``: the agent
calls ``complete``, which produces the same chunks and joins them), so the
only difference is publishing and storing the chunks. Each case runs
``--repeat`` times, alternating; the medians are compared. Each of ``--paces``
makes the model wait that long after every chunk: 0 is as fast as the machine
goes (the worst case for the log: what it costs per chunk), 0.001 is a model
streaming 1,000 chunks a second (faster than hosted models stream tokens),
the case the 10% target is for. ``--write`` replaces the ``streamlog``
section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from machine import cpu_and_memory
from sections import markers, replace_section

from durable_flow import (
    END,
    Blackboard,
    ChatChunk,
    ChatResponse,
    Message,
    Runtime,
    SqliteStore,
    WorkflowBuilder,
)

HERE = Path(__file__).resolve().parent
START, END_MARK = markers("streamlog")
TARGET = 0.10


class Chunks:
    """A model whose reply is ``n`` chunks; streamed or not."""

    name = "bench"

    def __init__(self, n: int, pace: float, streaming: bool) -> None:
        self.n, self.pace, self.streaming = n, pace, streaming

    async def _pieces(self) -> AsyncIterator[str]:
        for i in range(self.n):
            if self.pace:
                await asyncio.sleep(self.pace)
            yield f"t{i} "

    async def complete(self, messages: Sequence[Message], **_: Any) -> ChatResponse:
        text = "".join([p async for p in self._pieces()])
        return ChatResponse(Message.assistant(text))

    async def stream(self, messages: Sequence[Message], **_: Any) -> AsyncIterator[ChatChunk]:
        texts = []
        async for piece in self._pieces():
            texts.append(piece)
            yield ChatChunk(text=piece)
        yield ChatChunk(response=ChatResponse(Message.assistant("".join(texts))))


class Note(Blackboard):
    question: str = ""
    answer: str = ""


def workflow(model: Chunks) -> Any:
    b = WorkflowBuilder("bench", Note)
    b.add_agent("writer", model, instructions="Write.")
    b.set_entry("writer").add_edge("writer", END)
    return b.build()


async def one(chunks: int, pace: float, streaming: bool) -> tuple[float, int]:
    """Wall time of one run on a fresh file, and how many entries its log holds."""
    with tempfile.TemporaryDirectory() as tmp:
        async with Runtime(SqliteStore(Path(tmp) / "runs.db")) as rt:
            flow = workflow(Chunks(chunks, pace, streaming))
            start = time.perf_counter()
            result = await rt.run(flow, {"question": "go"})
            took = time.perf_counter() - start
            assert result.status.value == "completed", result.error
            return took, len(await rt.read_stream(result.run_id))


async def measure(chunks: int, repeat: int, pace: float) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"on": [], "off": []}
    await one(100, 0.0, True)  # warm up: imports, statement cache
    for _ in range(repeat):
        for case in ("on", "off"):
            took, entries = await one(chunks, pace, case == "on")
            assert entries == (chunks if case == "on" else 0), entries
            times[case].append(took)
    return times


def render(results: dict[float, dict[str, list[float]]], chunks: int, repeat: int,
           paces: list[float]) -> str:
    cpu, mem = cpu_and_memory()
    lines = [
        START,
        "## The stream log's overhead",
        "",
        f"`python bench/streamlog.py --chunks {chunks} --repeat {repeat} "
        f"--paces {','.join(f'{p:g}' for p in paces)} --write` (`make bench-stream`) on "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M}Z, {cpu}, {mem}. One agent run whose model "
        f"replies in {chunks:,} chunks, on a fresh SQLite file (synchronous=full): streamed "
        "(every chunk published and appended to the stream log in batches off the superstep "
        "commit) against the same run with streaming off (the model makes the same chunks "
        f"and joins them). Medians of {repeat} alternating runs each. The pace is how long "
        "the model waits after each chunk: 0 measures what the log costs per chunk; 1 ms is "
        "a model streaming 1,000 chunks a second, faster than hosted models stream tokens.",
        "",
        "| model pace | streaming off | streaming on (stream log) | overhead | per chunk |",
        "| --- | --- | --- | --- | --- |",
    ]
    verdicts = []
    for pace in paces:
        times = results[pace]
        on, off = statistics.median(times["on"]), statistics.median(times["off"])
        overhead = on / off - 1
        lines.append(f"| {pace * 1000:g} ms | {off * 1000:,.0f} ms | {on * 1000:,.0f} ms | "
                     f"{overhead:+.1%} | {(on - off) / chunks * 1e6:.1f} µs |")
        if pace > 0:
            verdicts.append(f"at {pace * 1000:g} ms a chunk the log adds {overhead:+.1%} "
                            f"({'within' if overhead <= TARGET else 'over'} the "
                            f"{TARGET:.0%} target)")
    lines += ["", ("Target: " + "; ".join(verdicts) + ".") if verdicts else "", END_MARK]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--paces", default="0,0.001")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    paces = [float(p) for p in args.paces.split(",")]
    results = {pace: asyncio.run(measure(args.chunks, args.repeat, pace)) for pace in paces}
    text = render(results, args.chunks, args.repeat, paces)
    print(text)
    if args.write:
        replace_section(HERE / "RESULTS.md", "streamlog", text)


if __name__ == "__main__":
    main()
