"""Reading a run's checkpoints on every store without reading all of them.

``list_checkpoints(before=, limit=)`` reads one page; ``namespace_heads``
lists the sub-workflows past the top level's rows.
"""

from __future__ import annotations

from durable_flow.model._records import RunStatus
from durable_flow.store._protocols import CheckpointStore, Commit

from .builders import start_run


async def test_pages_walk_a_namespace_newest_first_without_gaps(store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    for i in range(1, 30):
        await store.commit(Commit(lease, checkpoint=chain.next(appends={"log": [i]})))
    sub = chain.sub("inner", at_index=4)
    for _ in range(5):
        await store.commit(Commit(lease, checkpoint=sub.next()))
    everything = await store.list_checkpoints("r1", namespace="")
    assert [m.id for m in everything] == [m.id for m in reversed(chain.metas)]
    pages: list[list[str]] = []
    before: str | None = None
    while True:
        page = await store.list_checkpoints("r1", namespace="", before=before, limit=7)
        if not page:
            break
        pages.append([m.id for m in page])
        before = page[-1].id
    assert [len(p) for p in pages] == [7, 7, 7, 7, 2]
    assert [cid for p in pages for cid in p] == [m.id for m in everything]
    # a page of one thread, and of the sub-workflow's namespace
    assert [m.id for m in await store.list_checkpoints(
        "r1", thread=sub.thread, limit=2)] == [sub.metas[-1].id, sub.metas[-2].id]
    inner = await store.list_checkpoints("r1", namespace="inner", before=sub.metas[3].id)
    assert [m.id for m in inner] == [m.id for m in reversed(sub.metas[:3])]
    assert await store.list_checkpoints("r1", namespace="", before=chain.metas[0].id) == []
    assert await store.list_checkpoints("nobody", limit=3) == []


async def test_namespace_heads_are_the_newest_checkpoint_of_each_sub_workflow(
        store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    assert await store.namespace_heads("r1") == []  # the top level is not a namespace
    for _ in range(8):
        await store.commit(Commit(lease, checkpoint=chain.next()))
    first = chain.sub("inner", at_index=2)  # the sub-workflow ran twice: two threads
    for _ in range(3):
        await store.commit(Commit(lease, checkpoint=first.next()))
    second = chain.sub("inner", at_index=6)
    await store.commit(Commit(lease, checkpoint=second.next()))
    deep = second.sub("deep")
    await store.commit(Commit(lease, checkpoint=deep.next(status=RunStatus.WAITING)))
    alpha = chain.sub("alpha", at_index=1)
    for _ in range(2):
        await store.commit(Commit(lease, checkpoint=alpha.next()))
    other, other_lease = await start_run(store, "r2")
    await store.commit(Commit(other_lease, checkpoint=other.sub("inner", at_index=0).next()))

    heads = await store.namespace_heads("r1")
    assert [(m.namespace, m.id) for m in heads] == [
        ("alpha", alpha.head.id), ("inner", second.head.id), ("inner.deep", deep.head.id)]
    assert heads[2] == await store.get_checkpoint("r1", deep.head.id)
    assert heads[2].status is RunStatus.WAITING
    assert [m.namespace for m in await store.namespace_heads("r2")] == ["inner"]
    assert await store.namespace_heads("nobody") == []


async def test_a_threads_first_checkpoint_and_ids_by_their_end(store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    for i in range(1, 20):
        await store.commit(Commit(lease, checkpoint=chain.next(appends={"log": [i]})))
    sub = chain.sub("inner", at_index=4)
    for _ in range(3):
        await store.commit(Commit(lease, checkpoint=sub.next()))
    first = await store.first_checkpoint("r1", "")
    assert first is not None and first.id == chain.metas[0].id
    inner = await store.first_checkpoint("r1", sub.thread)
    assert inner is not None and inner.id == sub.metas[0].id
    assert await store.first_checkpoint("r1", "no/such") is None
    wanted = chain.metas[7].id
    every = sorted(m.id for m in await store.list_checkpoints("r1"))
    assert await store.checkpoint_ids("r1", wanted[-10:], limit=2) == [wanted]
    starts = [i for i in every if i.startswith(wanted[:-1])]  # no id ends so: its start
    assert not any(i.endswith(wanted[:-1]) for i in every) and len(starts) > 1
    assert await store.checkpoint_ids("r1", wanted[:-1], limit=20) == starts
    assert await store.checkpoint_ids("r1", wanted[:2], limit=3) == every[:3]
    # LIKE's wildcards are only themselves
    assert await store.checkpoint_ids("r1", "%", limit=2) == []
    assert await store.checkpoint_ids("r1", "_" * len(wanted), limit=2) == []
    assert await store.checkpoint_ids("nobody", wanted, limit=2) == []
