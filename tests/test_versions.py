"""Workflow versions: runs finish on their own version, or migrate to a newer one."""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Annotated, Any

import pytest
from waitkit import eventually, serving, store_dump

from durable_flow import (
    END,
    Blackboard,
    Command,
    InvalidInputError,
    RunStatus,
    Runtime,
    Send,
    Worker,
    WorkflowBuilder,
    WorkflowMismatchError,
    WorkflowValidationError,
    append,
)
from durable_flow.model._messages import Message
from durable_flow.model._versions import first_difference
from durable_flow.store._protocols import CheckpointStore


class Doc(Blackboard):
    title: str = ""
    approved: bool = False
    trail: Annotated[list[str], append] = []


class Doc2(Blackboard):
    headline: str = ""
    approved: bool = False
    trail: Annotated[list[str], append] = []


def version_1(calls: collections.Counter[str] | None = None) -> Any:
    """write -> approve (asks) -> END, on ``Doc``."""
    calls = calls if calls is not None else collections.Counter()
    b = WorkflowBuilder("doc", state=Doc, version="1")

    @b.node()
    async def write(state: Doc) -> dict[str, Any]:
        calls["write@v1"] += 1
        return {"trail": ["write@v1"]}

    @b.node()
    async def approve(state: Doc, ctx: Any) -> dict[str, Any]:
        ok = await ctx.request({"title": state.title}, response_type=bool)
        calls["approve@v1"] += 1
        return {"approved": ok, "trail": ["approve@v1"]}

    b.set_entry("write").add_edge("write", "approve").add_edge("approve", END)
    return b.build()


def to_v2(values: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in values.items() if k != "title"}
    return {**out, "headline": values["title"].upper(), "trail": [*values["trail"], "migrated"]}


def version_2(calls: collections.Counter[str] | None = None, *,
              nodes: dict[str, str] | None = None, migrate: bool = True,
              fn: Callable[[dict[str, Any]], Any] = to_v2) -> Any:
    """write -> sign_off (asks; was ``approve``) -> publish -> END, on ``Doc2``."""
    calls = calls if calls is not None else collections.Counter()
    b = WorkflowBuilder("doc", state=Doc2, version="2")

    @b.node()
    async def write(state: Doc2) -> dict[str, Any]:
        calls["write@v2"] += 1
        return {"trail": ["write@v2"]}

    @b.node()
    async def sign_off(state: Doc2, ctx: Any) -> dict[str, Any]:
        ok = await ctx.request({"headline": state.headline}, response_type=bool)
        calls["sign_off@v2"] += 1
        return {"approved": ok, "trail": ["sign_off@v2"]}

    @b.node()
    async def publish(state: Doc2) -> dict[str, Any]:
        calls["publish@v2"] += 1
        return {"trail": [f"published {state.headline}"]}

    b.set_entry("write").add_edge("write", "sign_off").add_edge("sign_off", "publish")
    b.add_edge("publish", END)
    if migrate:
        b.migrate("1", fn, nodes={"approve": "sign_off"} if nodes is None else nodes)
    return b.build()


async def test_a_run_records_its_version_and_another_version_is_refused(rt: Runtime) -> None:
    result = await rt.run(version_1(), {"title": "tides"})
    assert (await rt.get_run(result.run_id)).workflow_version == "1"
    before = await store_dump(rt.store, result.run_id)
    [req] = result.pending_requests
    with pytest.raises(WorkflowMismatchError) as err:
        await rt.resume(version_2(), result.run_id, responses={req.id: True})
    assert (err.value.run_version, err.value.workflow_version) == ("1", "2")
    assert "version '1'" in str(err.value) and "version '2'" in str(err.value)
    assert "migrate=True" in str(err.value)
    assert await store_dump(rt.store, result.run_id) == before


async def test_a_graph_changed_within_one_version_names_the_first_difference(
        rt: Runtime) -> None:
    result = await rt.run(version_1(), {"title": "tides"})
    b = WorkflowBuilder("doc", state=Doc, version="1")
    b.add_node("write", lambda s: {})
    b.add_node("approve", lambda s: {})
    b.add_node("notify", lambda s: {})
    b.set_entry("write").add_edge("write", "approve").add_edge("approve", "notify")
    with pytest.raises(WorkflowMismatchError) as err:
        await rt.resume(b.build(), result.run_id)
    assert err.value.difference == "node 'notify' is only in the workflow given"
    assert "node 'notify' is only in the workflow given" in str(err.value)


def test_first_difference_names_nodes_edges_and_the_rest() -> None:
    def graph(**changes: Any) -> dict[str, Any]:
        base: dict[str, Any] = {
            "name": "g", "fields": ["a"], "entry": "x", "exits": [],
            "nodes": {"x": {"kind": "function", "goto": [], "skip_if": None},
                      "y": {"kind": "function", "goto": [], "skip_if": None}},
            "edges": [["x", "y", None]], "switches": [], "fan_ins": []}
        return {**base, **changes}

    old = graph()
    assert first_difference(old, graph()) is None
    assert first_difference(old, graph(nodes={"x": old["nodes"]["x"]})) == \
        "node 'y' is only in the run's graph"
    changed = {**old["nodes"], "y": {"kind": "function", "goto": ["x"], "skip_if": None}}
    assert first_difference(old, graph(nodes=changed)) == "node 'y' changed (goto)"
    assert first_difference(old, graph(edges=[["x", "y", "a > 1"]])) == \
        "edge x -> y is only in the run's graph"
    assert first_difference(old, graph(fields=["a", "b"])) == \
        "state field 'b' is only in the workflow given"
    assert "entry" in (first_difference(old, graph(entry="y")) or "")


async def test_a_worker_holding_two_versions_runs_each_run_on_its_own(
        store_factory: Callable[[], CheckpointStore]) -> None:
    calls: collections.Counter[str] = collections.Counter()
    v1, v2 = version_1(calls), version_2(calls)
    async with Runtime(store_factory()) as rt:
        paused = await rt.run(v1, {"title": "tides"})  # deployed before v2 existed
        [req] = paused.pending_requests
        await rt.respond(paused.run_id, {req.id: True})
        fresh = await rt.submit(v2, {"headline": "moon"})
        async with Worker(store_factory(), [v1, v2], poll_interval=0.05) as worker, serving(worker):
            async def settled() -> bool:
                old, new = await rt.get_run(paused.run_id), await rt.get_run(fresh.run_id)
                return old.status is RunStatus.COMPLETED and new.status is RunStatus.WAITING

            await eventually(settled)
        old = await rt.get_state(paused.run_id)
        assert old.values["trail"] == ["write@v1", "approve@v1"]
        assert (await rt.get_run(paused.run_id)).workflow_version == "1"
        assert (await rt.get_run(fresh.run_id)).workflow_version == "2"
        [asked] = (await rt.get_state(fresh.run_id)).pending_requests
        assert asked.node == "sign_off"
    assert calls == {"write@v1": 1, "approve@v1": 1, "write@v2": 1}


async def test_a_v1_run_migrated_to_v2_completes_on_v2(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    paused = await rt.run(version_1(calls), {"title": "tides"})
    [req] = paused.pending_requests
    done = await rt.resume(version_2(calls), paused.run_id, migrate=True,
                           responses={req.id: True})
    assert done.status is RunStatus.COMPLETED, done.error
    assert done.state.headline == "TIDES" and done.state.approved
    assert done.state.trail == ["write@v1", "migrated", "sign_off@v2", "published TIDES"]
    info = await rt.get_run(paused.run_id)
    assert info.workflow_version == "2"
    sources = [cp.source for cp in reversed(await rt.history(paused.run_id))]
    assert sources == ["input", "loop", "migrate", "loop", "loop"]
    assert calls == {"write@v1": 1, "sign_off@v2": 1, "publish@v2": 1}
    with pytest.raises(WorkflowMismatchError):
        await rt.resume(version_1(), paused.run_id)


async def test_a_migrated_run_keeps_its_pending_request_and_a_v2_worker_finishes_it(
        store_factory: Callable[[], CheckpointStore]) -> None:
    v2 = version_2()
    async with Runtime(store_factory()) as rt:
        paused = await rt.run(version_1(), {"title": "tides"})
        [req] = paused.pending_requests
        moved = await rt.resume(v2, paused.run_id, migrate=True)
        assert moved.status is RunStatus.WAITING
        [pending] = moved.pending_requests
        assert (pending.id, pending.node) == (req.id, "sign_off")  # the id users know stays
        await rt.respond(paused.run_id, {req.id: True})
        async with Worker(store_factory(), [v2], poll_interval=0.05) as worker, serving(worker):
            async def completed() -> bool:
                return (await rt.get_run(paused.run_id)).status is RunStatus.COMPLETED

            await eventually(completed)
        assert (await rt.get_state(paused.run_id)).values["trail"][-1] == "published TIDES"


async def test_a_migration_keeps_what_the_paused_superstep_finished(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()

    def fan(version: str) -> Any:
        b = WorkflowBuilder("fan", state=Doc, version=version)

        @b.node()
        async def fetch(state: Doc) -> dict[str, Any]:
            calls[f"fetch@v{version}"] += 1
            return {"trail": ["fetched"]}

        @b.node()
        async def ask(state: Doc, ctx: Any) -> dict[str, Any]:
            return {"approved": await ctx.request("ok?", response_type=bool)}

        b.add_node("start", lambda s: {})
        b.set_entry("start").add_edge("start", "fetch").add_edge("start", "ask")
        if version == "2":
            b.migrate("1", dict)
        return b.build()

    paused = await rt.run(fan("1"))
    [req] = paused.pending_requests
    done = await rt.resume(fan("2"), paused.run_id, migrate=True, responses={req.id: True})
    assert done.status is RunStatus.COMPLETED and done.state.approved
    assert calls == {"fetch@v1": 1}  # its saved write moved with the run: not run again


async def test_a_migration_that_cannot_place_the_run_writes_nothing(rt: Runtime) -> None:
    paused = await rt.run(version_1(), {"title": "tides"})
    before = await store_dump(rt.store, paused.run_id)
    with pytest.raises(WorkflowMismatchError) as err:  # no migration from version 1
        await rt.resume(version_2(migrate=False), paused.run_id, migrate=True)
    assert "no migration from version '1'" in str(err.value)
    with pytest.raises(WorkflowMismatchError) as err:  # approve was renamed, but not mapped
        await rt.resume(version_2(nodes={}), paused.run_id, migrate=True)
    assert "'approve'" in str(err.value) and err.value.run_version == "1"
    with pytest.raises(InvalidInputError, match="do not fit"):
        await rt.resume(version_2(fn=lambda values: {"headline": ["not", "text"]}),
                        paused.run_id, migrate=True)
    with pytest.raises(InvalidInputError, match="KeyError"):
        await rt.resume(version_2(fn=lambda values: {"headline": values["nope"]}),
                        paused.run_id, migrate=True)
    assert await store_dump(rt.store, paused.run_id) == before


def test_builder_checks_its_migrations() -> None:
    b = WorkflowBuilder("doc", state=Doc, version="2")
    b.add_node("write", lambda s: {})
    b.set_entry("write")
    b.migrate("2", dict)
    b.migrate("1", "not callable", nodes={"approve": "sign_off"})  # type: ignore[arg-type]
    with pytest.raises(WorkflowValidationError) as err:
        b.build()
    problems = "\n".join(err.value.problems)
    assert "cannot migrate from itself" in problems
    assert "is not callable" in problems
    assert "'sign_off', which is not a node of this version" in problems


async def test_a_fork_keeps_the_version_of_its_source(rt: Runtime) -> None:
    v2 = version_2()
    result = await rt.run(v2, {"headline": "moon"})
    forked = await rt.fork(v2, result.run_id, result.checkpoint_id)
    assert (await rt.get_run(forked.run_id)).workflow_version == "2"


def instances(version: str, *, node: str = "work", arg_type: Any = str,
              asked: list[tuple[str, Any]] | None = None) -> Any:
    """split sends two instances of ``node``, each asking about its arg."""
    asked = asked if asked is not None else []
    b = WorkflowBuilder("map", state=Doc, version=version)
    b.add_node("split", lambda s: Command(goto=[Send(node, f"doc{i}") for i in range(2)]),
               goto=[node])

    async def work(state: Doc, ctx: Any) -> dict[str, Any]:
        ok = await ctx.request({"approve": ctx.arg}, response_type=bool)
        asked.append((ctx.node, ctx.arg))
        return {"trail": [f"{ctx.node}:{ctx.arg}:{ok}"]}

    b.add_node(node, work, arg_type=arg_type)
    b.set_entry("split")
    if version == "2":
        b.migrate("1", dict, nodes={"work": node} if node != "work" else None)
    return b.build()


@pytest.mark.parametrize("node", ["work", "job"])
async def test_a_run_paused_on_instances_migrates_with_their_args(rt: Runtime, node: str) -> None:
    asked: list[tuple[str, Any]] = []
    paused = await rt.run(instances("1"))
    first, second = (r.id for r in paused.pending_requests)
    done = await rt.resume(instances("2", node=node, asked=asked), paused.run_id,
                           migrate=True, responses={first: True})
    assert done.status is RunStatus.WAITING
    [migrated] = [c for c in await rt.history(paused.run_id) if c.source == "migrate"]
    meta = await rt.store.get_checkpoint(paused.run_id, migrated.id)
    assert meta is not None and meta.next_tasks == (f"{node}[0]", f"{node}[1]")
    assert dict(meta.task_args) == {f"{node}[0]": b'"doc0"', f"{node}[1]": b'"doc1"'}
    assert asked == [(f"{node}[0]", "doc0")]  # the other instance still waits for its answer
    done = await rt.resume(instances("2", node=node, asked=asked), paused.run_id,
                           responses={second: False})
    assert done.status is RunStatus.COMPLETED, done.error
    assert list(done.state.trail) == [f"{node}[0]:doc0:True", f"{node}[1]:doc1:False"]


async def test_an_instance_arg_the_new_version_rejects_refuses_the_migration(rt: Runtime) -> None:
    paused = await rt.run(instances("1"))
    before = await store_dump(rt.store, paused.run_id)
    with pytest.raises(WorkflowMismatchError, match=r"the arg of 'work\[0\]'"):
        await rt.resume(instances("2", arg_type=int), paused.run_id, migrate=True)
    assert await store_dump(rt.store, paused.run_id) == before


def with_messages(version: str, fn: Callable[[dict[str, Any]], Any] = dict,
                  source: str = "1") -> Any:
    """note (appends to trail, says something) -> approve (asks) -> note again -> END."""

    class Talk(Doc):
        messages: Annotated[list[Message], append] = []

    b = WorkflowBuilder("talk", state=Talk, version=version)

    @b.node()
    async def note(state: Talk) -> dict[str, Any]:
        said = Message(role="assistant", content=f"note {len(state.trail)}")
        return {"trail": [f"note@v{version}"], "messages": [said]}

    @b.node(goto=["note", END])
    async def approve(state: Talk, ctx: Any) -> Command:
        ok = await ctx.request("ok?", response_type=bool)
        return Command(update={"approved": ok}, goto=[END] if ok else ["note"])

    b.set_entry("note").add_edge("note", "approve")
    if version != source:
        b.migrate(source, fn)
    return b.build()


def rewrite(values: dict[str, Any]) -> dict[str, Any]:
    messages = [Message(role="system", content="summary")]
    return {**values, "trail": [t.upper() for t in values["trail"]], "messages": messages}


async def test_a_migration_that_rewrites_append_fields_replaces_their_items(rt: Runtime) -> None:
    paused = await rt.run(with_messages("1"), {"title": "tides"})
    before = await rt.get_state(paused.run_id)
    assert list(before.values["trail"]) == ["note@v1"]
    [req] = paused.pending_requests
    moved = await rt.resume(with_messages("2", rewrite), paused.run_id, migrate=True,
                            responses={req.id: False})
    assert moved.status is RunStatus.WAITING
    assert list(moved.state.trail) == ["NOTE@V1", "note@v2"]
    assert [m.content for m in moved.state.messages] == ["summary", "note 1"]
    [migrated] = [c for c in await rt.history(paused.run_id) if c.source == "migrate"]
    at = await rt.get_state(paused.run_id, migrated.id)
    assert at.values["trail"] == ["NOTE@V1"]
    assert [m["content"] for m in at.values["messages"]] == ["summary"]
    assert [m.content for m in at.node_histories["note"]] == ["note 0"]
    old = await rt.get_state(paused.run_id, before.checkpoint_id)
    assert old.values["trail"] == ["note@v1"]  # older checkpoints read what they always did
    later = await rt.get_state(paused.run_id)
    assert later.values["trail"] == ["NOTE@V1", "note@v2"]
    assert [m.content for m in later.node_histories["note"]] == ["note 0", "note 1"]
    for source in (migrated.id, later.checkpoint_id):
        forked = await rt.fork(with_messages("2", rewrite), paused.run_id, source)
        snap = await rt.get_state(forked.run_id)
        assert snap.values["trail"][0] == "NOTE@V1", source
    [req] = moved.pending_requests
    done = await rt.resume(with_messages("2", rewrite), paused.run_id, responses={req.id: True})
    assert done.status is RunStatus.COMPLETED, done.error
    assert list(done.state.trail) == ["NOTE@V1", "note@v2"]


async def test_an_append_field_can_be_rewritten_twice_and_emptied(rt: Runtime) -> None:
    paused = await rt.run(with_messages("1"), {"title": "tides"})
    moved = await rt.resume(with_messages("2", rewrite), paused.run_id, migrate=True)
    assert list(moved.state.trail) == ["NOTE@V1"]

    def empty(values: dict[str, Any]) -> dict[str, Any]:
        return {**values, "trail": []}

    emptied = await rt.resume(with_messages("3", empty, source="2"), paused.run_id,
                              migrate=True)
    assert list(emptied.state.trail) == []
    assert (await rt.get_state(paused.run_id)).values["trail"] == []
