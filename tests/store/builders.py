"""Hand-built store rows for the conformance suite, with the state they must load back."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from durable_flow.model._records import CheckpointSource, ErrorInfo, RunStatus
from durable_flow.store._protocols import (
    CheckpointMeta,
    CheckpointStore,
    CheckpointWrite,
    Claim,
    Lease,
    LoadedCheckpoint,
    RequestRow,
    RunRecord,
    StepRow,
    TaskWrite,
)

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
_ids = itertools.count(1)


def at(seconds: float) -> datetime:
    """A fixed point in time, ``seconds`` after T0."""
    return T0 + timedelta(seconds=seconds)


def new_id(prefix: str = "ck") -> str:
    """A unique id that sorts after every id made before it (like uuid7)."""
    return f"{prefix}{next(_ids):08d}"


def make_run(run_id: str, *, workflow: str = "wf", status: RunStatus = RunStatus.RUNNING,
             created: datetime = T0, **kw: Any) -> RunRecord:
    kw.setdefault("head_checkpoint_id", None)
    return RunRecord(run_id=run_id, workflow_name=workflow, status=status, created_at=created,
                     updated_at=created, signature="sig-1", **kw)


@dataclass
class Chain:
    """One thread of checkpoints built by hand, remembering what each must load back."""

    run_id: str
    thread: str = ""
    namespace: str = ""
    metas: list[CheckpointMeta] = field(default_factory=list)
    # per checkpoint: its values and log lengths (the logs are cut from _logs on lookup,
    # so a chain of n checkpoints costs O(n), not a copy of every log per checkpoint)
    _expected: dict[str, tuple[dict[str, bytes], dict[str, int]]] = field(default_factory=dict)
    _values: dict[str, bytes] = field(default_factory=dict)
    _versions: dict[str, int] = field(default_factory=dict)
    _logs: dict[str, list[Any]] = field(default_factory=dict)

    def next(self, *, values: dict[str, Any] | None = None,
             appends: dict[str, list[Any]] | None = None, created: datetime | None = None,
             source: CheckpointSource = "loop", status: RunStatus = RunStatus.RUNNING,
             **meta: Any) -> CheckpointWrite:
        """The next checkpoint of the chain: writes ``values``, appends ``appends``."""
        seq = len(self.metas)
        cid = new_id()
        encoded = {ch: orjson.dumps(v) for ch, v in (values or {}).items()}
        self._values.update(encoded)
        self._versions.update(dict.fromkeys(encoded, seq))
        chunks = {}
        for channel, items in (appends or {}).items():
            self._logs.setdefault(channel, []).extend(items)
            chunks[channel] = orjson.dumps(items)
        m = CheckpointMeta(
            id=cid, run_id=self.run_id, thread=self.thread, namespace=self.namespace,
            parent_id=self.metas[-1].id if self.metas else None, seq=seq, superstep=seq,
            created_at=created or at(seq), status=status, source=source,
            value_versions=dict(self._versions),
            log_lengths={ch: len(items) for ch, items in self._logs.items()}, **meta)
        self.metas.append(m)
        self._expected[cid] = (dict(self._values), dict(m.log_lengths))
        return CheckpointWrite(meta=m, values=encoded, appends=chunks)

    @property
    def expected(self) -> _Expected:
        """What each checkpoint must load back, by id: values and logs cut to their lengths."""
        return _Expected(self._expected, self._logs)

    @property
    def head(self) -> CheckpointMeta:
        return self.metas[-1]

    def sub(self, node: str, at_index: int = -1) -> Chain:
        """A sub-thread anchored on one of this chain's checkpoints."""
        anchor = self.metas[at_index].id
        ns = f"{self.namespace}.{node}" if self.namespace else node
        return Chain(self.run_id, thread=f"{anchor}/{node}", namespace=ns)


@dataclass(frozen=True)
class _Expected:
    by_id: dict[str, tuple[dict[str, bytes], dict[str, int]]]
    logs: dict[str, list[Any]]

    def __getitem__(self, checkpoint_id: str) -> tuple[dict[str, bytes], dict[str, list[Any]]]:
        values, lengths = self.by_id[checkpoint_id]
        return dict(values), {ch: self.logs[ch][:n] for ch, n in lengths.items()}


def state_of(loaded: LoadedCheckpoint) -> tuple[dict[str, bytes], dict[str, list[Any]]]:
    """What the engine would rebuild: values as stored, logs cut to their lengths."""
    logs = {}
    for channel, chunks in loaded.logs.items():
        items = [item for chunk in chunks for item in orjson.loads(chunk)]
        logs[channel] = items[: loaded.meta.log_lengths[channel]]
    return dict(loaded.values), logs


async def start_run(store: CheckpointStore, run_id: str, *, owner: str = "owner-1",
                    workflow: str = "wf", created: datetime = T0,
                    first: dict[str, Any] | None = None, ttl: float = 60) -> tuple[Chain, Lease]:
    """Create a run with its input checkpoint and take its lease."""
    chain = Chain(run_id)
    cp = chain.next(values=first or {"topic": "tides"}, source="input", created=created)
    await store.create_run(make_run(run_id, workflow=workflow, created=created,
                                    head_checkpoint_id=cp.meta.id), [cp], None)
    lease = await store.claim(Claim(run_id, owner, ttl))
    return chain, lease


def request(run_id: str, checkpoint_id: str, rid: str, *, created: datetime = T0,
            workflow: str = "wf", node: str = "approve", index: int = 0) -> RequestRow:
    return RequestRow(id=rid, run_id=run_id, workflow_name=workflow, thread="",
                      checkpoint_id=checkpoint_id, node=node, index=index,
                      payload=orjson.dumps({"question": rid}),
                      response_schema=b'{"type":"boolean"}', created_at=created)


def task_write(run_id: str, checkpoint_id: str, node: str, data: bytes = b'{"x":1}'
               ) -> TaskWrite:
    return TaskWrite(run_id=run_id, checkpoint_id=checkpoint_id, node=node, data=data,
                     created_at=at(1))


def step(run_id: str, checkpoint_id: str, node: str, name: str, data: bytes) -> StepRow:
    return StepRow(run_id=run_id, checkpoint_id=checkpoint_id, node=node, name=name,
                   data=data, created_at=at(2))


BOOM = ErrorInfo(type="ValueError", message="boom", node="n", traceback="tb")
