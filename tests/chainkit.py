"""The one-chain check of a run's histories, shared by the lineage and model tests.

Every checkpoint of a thread has as parent the one before it in that thread;
a thread's first checkpoint either starts its namespace's history (no parent)
or continues it (its parent is the checkpoint of that namespace it copies);
no checkpoint has two children in its namespace.
"""

from __future__ import annotations

import collections
import itertools

from durable_flow.store._protocols import CheckpointMeta, CheckpointStore


async def histories(store: CheckpointStore, run_id: str) -> dict[str, list[CheckpointMeta]]:
    """Each namespace's checkpoints, oldest first along their chain."""
    by_ns: dict[str, list[CheckpointMeta]] = collections.defaultdict(list)
    for m in await store.list_checkpoints(run_id):
        by_ns[m.namespace].append(m)
    return dict(by_ns)


def chain_problems(metas: list[CheckpointMeta]) -> list[str]:
    """What breaks one namespace's single chain (empty: it is one chain)."""
    problems: list[str] = []
    ids = {m.id: m for m in metas}
    threads: dict[str, list[CheckpointMeta]] = collections.defaultdict(list)
    for m in metas:
        threads[m.thread].append(m)
    for thread, ms in threads.items():
        ms.sort(key=lambda m: m.seq)
        if [m.seq for m in ms] != list(range(len(ms))):
            problems.append(f"thread {thread!r} has seqs {[m.seq for m in ms]}")
        for before, m in itertools.pairwise(ms):
            if m.parent_id != before.id:
                problems.append(f"{m.id} (seq {m.seq}) has parent {m.parent_id}, "
                                f"not {before.id}")
        first = ms[0]
        if first.parent_id is not None and first.parent_id not in ids:
            problems.append(f"{first.id} continues {first.parent_id}, not of its namespace")
    roots = [m.id for m in metas if m.parent_id is None]
    if len(roots) != 1:
        problems.append(f"{len(roots)} roots: {roots}")
    children = collections.Counter(m.parent_id for m in metas if m.parent_id is not None)
    problems += [f"{p} has {n} children" for p, n in children.items() if n > 1]
    return problems


async def assert_one_chain(store: CheckpointStore, run_id: str) -> dict[str, int]:
    """Fail unless every namespace's history of the run is one chain; its lengths by namespace."""
    found = await histories(store, run_id)
    assert "" in found, f"run {run_id} has no top-level checkpoint"
    bad = {ns: p for ns, ms in found.items() if (p := chain_problems(ms))}
    assert not bad, f"run {run_id}: histories that are not one chain: {bad}"
    return {ns: len(ms) for ns, ms in found.items()}
