"""Human in the loop: requests, answers, the inbox, durable steps, inspection and forks."""

from __future__ import annotations

import collections
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, TypeAdapter, field_validator

from durable_flow import (
    END,
    Blackboard,
    InvalidInputError,
    InvalidResponseError,
    NodeContext,
    RetryPolicy,
    RunNotResumableError,
    RunStatus,
    Runtime,
    StateUpdateError,
    UnknownRequestError,
    Workflow,
    WorkflowBuilder,
    add,
    append,
)


class Decision(BaseModel):
    approved: bool
    note: str = ""


class Doc(Blackboard):
    topic: str = ""
    approved: bool = False
    note: str = ""
    log: Annotated[list[str], append] = []
    count: Annotated[int, add] = 0


def approval_workflow(calls: collections.Counter[str] | None = None) -> Workflow:
    """draft -> approve (asks for a Decision) -> END."""
    calls = calls if calls is not None else collections.Counter()
    b = WorkflowBuilder("approval", state=Doc)

    def draft(state: Doc) -> dict[str, Any]:
        calls["draft"] += 1
        return {"log": ["draft"]}

    async def approve(state: Doc, ctx: NodeContext) -> dict[str, Any]:
        calls["approve"] += 1
        decision = await ctx.request({"question": f"publish {state.topic}?"},
                                     response_type=Decision)
        assert isinstance(decision, Decision)
        return {"approved": decision.approved, "note": decision.note, "log": ["approve"]}

    b.add_node("draft", draft).add_node("approve", approve)
    b.set_entry("draft").add_edge("draft", "approve").add_edge("approve", END)
    return b.build()


async def observe(rt: Runtime, run_id: str) -> tuple[Any, ...]:
    """Everything a caller can see of a run (to show that nothing changed)."""
    return (await rt.history(run_id), await rt.get_state(run_id),
            await rt.list_runs(), await rt.pending_requests())


async def test_request_makes_the_run_wait_with_a_pending_request(rt: Runtime) -> None:
    before = datetime.now(UTC)
    result = await rt.run(approval_workflow(), {"topic": "tides"})
    assert result.status is RunStatus.WAITING
    assert result.state.log == ["draft"]
    [req] = result.pending_requests
    assert req.id == "approve@2#0"
    assert req.run_id == result.run_id and req.node == "approve"
    assert req.payload == {"question": "publish tides?"}
    assert req.response_schema == TypeAdapter(Decision).json_schema()
    assert before <= req.created_at <= datetime.now(UTC)
    snap = await rt.get_state(result.run_id)
    assert snap.status is RunStatus.WAITING and snap.pending_requests == (req,)
    assert snap.next_tasks == ("approve",)
    assert (await rt.list_runs())[0].status is RunStatus.WAITING
    # ids are deterministic: the same request in another run has the same id
    again = await rt.run(approval_workflow(), {"topic": "tides"})
    assert again.pending_requests[0].id == req.id


async def test_resume_with_an_answer_coerces_it_and_completes(
    rt: Runtime, store_factory: Callable[[], Any]
) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = approval_workflow(calls)
    waiting = await rt.run(wf, {"topic": "tides"})
    rid = waiting.pending_requests[0].id
    async with Runtime(store_factory()) as rt2:  # a second runtime (and store object) answers
        done = await rt2.resume(wf, waiting.run_id,
                                responses={rid: {"approved": True, "note": "ship it"}})
    assert done.status is RunStatus.COMPLETED
    assert done.state.approved is True and done.state.note == "ship it"
    assert done.state.log == ["draft", "approve"] and done.pending_requests == ()
    assert calls == {"draft": 1, "approve": 2}
    assert await rt.pending_requests() == []
    assert (await rt.get_state(waiting.run_id)).status is RunStatus.COMPLETED


async def test_answer_may_be_a_model_instance(rt: Runtime) -> None:
    wf = approval_workflow()
    waiting = await rt.run(wf, {})
    done = await rt.resume(wf, waiting.run_id, responses={
        waiting.pending_requests[0].id: Decision(approved=True, note="typed")})
    assert done.state.note == "typed"


@pytest.mark.parametrize("answer", [{"approved": "perhaps"}, {"note": "no verdict"}, "yes", None])
async def test_invalid_answer_raises_and_changes_nothing(rt: Runtime, answer: Any) -> None:
    wf = approval_workflow()
    waiting = await rt.run(wf, {})
    rid = waiting.pending_requests[0].id
    before = await observe(rt, waiting.run_id)
    with pytest.raises(InvalidResponseError) as info:
        await rt.resume(wf, waiting.run_id, responses={rid: answer})
    assert info.value.request_id == rid
    assert await observe(rt, waiting.run_id) == before
    done = await rt.resume(wf, waiting.run_id, responses={rid: {"approved": False}})
    assert done.status is RunStatus.COMPLETED and done.state.approved is False


async def test_unknown_request_raises_and_changes_nothing(rt: Runtime) -> None:
    wf = approval_workflow()
    waiting = await rt.run(wf, {})
    rid = waiting.pending_requests[0].id
    before = await observe(rt, waiting.run_id)
    with pytest.raises(UnknownRequestError) as info:
        await rt.resume(wf, waiting.run_id,
                        responses={rid: {"approved": True}, "approve@9#9": {"approved": True}})
    assert info.value.request_id == "approve@9#9"
    assert await observe(rt, waiting.run_id) == before
    # a request of another run is unknown here too
    other = await rt.run(wf, {})
    with pytest.raises(UnknownRequestError):
        await rt.resume(wf, other.run_id, responses={f"{waiting.run_id}:{rid}": True})
    assert await rt.history(waiting.run_id) == before[0]


def two_approvers(calls: collections.Counter[str]) -> Workflow:
    """start -> (legal, finance) each asking a bool -> join -> publish."""
    b = WorkflowBuilder("two", state=Doc)

    def asker(name: str) -> Any:
        async def node(state: Doc, ctx: NodeContext) -> dict[str, Any]:
            calls[name] += 1
            ok = await ctx.request({"who": name}, response_type=bool)
            return {"log": [f"{name}:{ok}"], "count": 1}
        return node

    b.add_node("start", lambda s: None)
    b.add_node("legal", asker("legal")).add_node("finance", asker("finance"))
    b.add_node("publish", lambda s: {"log": ["publish"]})
    b.set_entry("start").add_edge("start", "legal").add_edge("start", "finance")
    b.add_fan_in(["legal", "finance"], "publish").add_edge("publish", END)
    return b.build()


async def test_parallel_requests_are_answered_one_at_a_time(
    rt: Runtime, store_factory: Callable[[], Any]
) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = two_approvers(calls)
    waiting = await rt.run(wf, {})
    assert waiting.status is RunStatus.WAITING
    ids = {r.node: r.id for r in waiting.pending_requests}
    assert ids == {"legal": "legal@2#0", "finance": "finance@2#0"}
    head = waiting.checkpoint_id

    half = await rt.resume(wf, waiting.run_id, responses={ids["legal"]: True})
    assert half.status is RunStatus.WAITING
    assert [r.id for r in half.pending_requests] == [ids["finance"]]
    assert half.checkpoint_id == head  # no superstep was merged yet
    assert half.state.log == [] and half.state.count == 0
    assert [r.id for r in await rt.pending_requests()] == [ids["finance"]]
    assert calls == {"legal": 2, "finance": 1}

    # re-sending the identical answer is a no-op; a different one is refused
    same = await rt.resume(wf, waiting.run_id, responses={ids["legal"]: True})
    assert same.status is RunStatus.WAITING and same.checkpoint_id == head
    before = await observe(rt, waiting.run_id)
    with pytest.raises(UnknownRequestError):
        await rt.resume(wf, waiting.run_id, responses={ids["legal"]: False})
    assert await observe(rt, waiting.run_id) == before

    async with Runtime(store_factory()) as rt2:
        done = await rt2.resume(wf, waiting.run_id,
                                responses={ids["legal"]: True, ids["finance"]: False})
    assert done.status is RunStatus.COMPLETED
    assert done.state.log == ["finance:False", "legal:True", "publish"]
    assert done.state.count == 2
    assert calls["legal"] == 2 and calls["finance"] == 2  # legal's write was kept, not rerun
    history = await rt.history(waiting.run_id)
    assert [cp.nodes for cp in reversed(history)] == [(), ("start",), ("finance", "legal"),
                                                      ("publish",)]
    # a client retrying its answer after the run completed: a no-op
    again = await rt.resume(wf, waiting.run_id, responses={ids["legal"]: True})
    assert again.status is RunStatus.COMPLETED and again.state == done.state
    assert [cp.id for cp in await rt.history(waiting.run_id)] == [cp.id for cp in history]
    # a different answer to a finished run is refused
    with pytest.raises(RunNotResumableError):
        await rt.resume(wf, waiting.run_id, responses={ids["legal"]: False})


async def test_one_node_asks_twice_in_sequence(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    b = WorkflowBuilder("twice", state=Doc)

    async def interview(state: Doc, ctx: NodeContext) -> dict[str, Any]:
        calls["interview"] += 1
        name = await ctx.request("name?", response_type=str)
        age = await ctx.request(f"age of {name}?", response_type=int)
        return {"note": f"{name} is {age}"}

    b.add_node("interview", interview).set_entry("interview").add_edge("interview", END)
    wf = b.build()
    first = await rt.run(wf, {})
    [q1] = first.pending_requests
    assert (q1.id, q1.payload, q1.response_schema) == ("interview@1#0", "name?", {"type": "string"})
    second = await rt.resume(wf, first.run_id, responses={q1.id: "Ada"})
    assert second.status is RunStatus.WAITING
    [q2] = second.pending_requests
    assert (q2.id, q2.payload, q2.response_schema) == ("interview@1#1", "age of Ada?",
                                                       {"type": "integer"})
    with pytest.raises(InvalidResponseError):
        await rt.resume(wf, first.run_id, responses={q2.id: "old"})
    done = await rt.resume(wf, first.run_id, responses={q2.id: 36})
    assert done.state.note == "Ada is 36"
    assert calls["interview"] == 3


async def test_pending_requests_is_an_inbox_across_runs_oldest_first(rt: Runtime) -> None:
    approval = approval_workflow()
    calls: collections.Counter[str] = collections.Counter()
    two = two_approvers(calls)
    r1 = await rt.run(approval, {"topic": "one"})
    r2 = await rt.run(two, {})
    r3 = await rt.run(approval, {"topic": "three"})
    inbox = await rt.pending_requests()
    assert [r.run_id for r in inbox] == [r1.run_id, r2.run_id, r2.run_id, r3.run_id]
    assert {r.node for r in inbox[1:3]} == {"legal", "finance"}
    assert inbox[0].node == inbox[3].node == "approve"
    assert [r.created_at for r in inbox] == sorted(r.created_at for r in inbox)
    assert [r.payload for r in await rt.pending_requests(workflow_name="approval")] == [
        {"question": "publish one?"}, {"question": "publish three?"}]
    assert {r.run_id for r in await rt.pending_requests(workflow_name="two")} == {r2.run_id}
    assert await rt.pending_requests(workflow_name="nothing") == []
    await rt.resume(approval, r1.run_id, responses={r1.pending_requests[0].id: {"approved": True}})
    assert [r.run_id for r in await rt.pending_requests(workflow_name="approval")] == [r3.run_id]


async def test_step_runs_once_across_a_request_a_retry_and_a_resume(
    rt: Runtime, store_factory: Callable[[], Any]
) -> None:
    effects: collections.Counter[str] = collections.Counter()
    attempts: list[int] = []

    async def charge(amount: int) -> dict[str, Any]:
        effects["charge"] += 1
        return {"charged": amount, "receipt": f"r-{effects['charge']}"}

    def send_mail(to: str) -> str:
        effects["mail"] += 1
        return f"sent to {to}"

    async def pay(state: Doc, ctx: NodeContext) -> dict[str, Any]:
        attempts.append(1)
        receipt = await ctx.step("charge", charge, 42)
        if len(attempts) == 1:
            raise ConnectionError("flaky after the side effect")
        ok = await ctx.request({"receipt": receipt["receipt"]}, response_type=bool)
        mail = await ctx.step("mail", send_mail, to="ops")
        return {"note": f"{receipt['receipt']} {mail} {ok}"}

    b = WorkflowBuilder("pay", state=Doc)
    b.add_node("pay", pay, retry=RetryPolicy(max_attempts=2, initial_delay=0, jitter=False))
    b.set_entry("pay").add_edge("pay", END)
    wf = b.build()
    waiting = await rt.run(wf, {})
    assert waiting.status is RunStatus.WAITING
    assert waiting.pending_requests[0].payload == {"receipt": "r-1"}
    assert effects == {"charge": 1} and len(attempts) == 2
    async with Runtime(store_factory()) as rt2:
        done = await rt2.resume(wf, waiting.run_id,
                                responses={waiting.pending_requests[0].id: True})
    assert done.status is RunStatus.COMPLETED
    assert done.state.note == "r-1 sent to ops True"
    assert effects == {"charge": 1, "mail": 1} and len(attempts) == 3


class Quote(BaseModel):
    price: int


async def test_step_result_is_validated_into_the_return_annotation(rt: Runtime) -> None:
    made: list[int] = []

    def quote() -> Quote:
        made.append(1)
        return Quote(price=7)

    async def node(state: Doc, ctx: NodeContext) -> dict[str, Any]:
        q = await ctx.step("quote", quote)
        assert isinstance(q, Quote)
        await ctx.request("ok?", response_type=bool)
        return {"count": q.price}

    b = WorkflowBuilder("quote", state=Doc)
    b.add_node("node", node).set_entry("node").add_edge("node", END)
    wf = b.build()
    waiting = await rt.run(wf, {})
    done = await rt.resume(wf, waiting.run_id, responses={waiting.pending_requests[0].id: True})
    assert done.state.count == 7 and made == [1]


async def test_a_repeated_step_name_fails_with_duplicate_step_error(rt: Runtime) -> None:
    async def twice(state: Doc, ctx: NodeContext) -> None:
        await ctx.step("fetch", lambda: 1)
        await ctx.step("fetch", lambda: 2)

    b = WorkflowBuilder("dup", state=Doc)
    b.add_node("twice", twice).set_entry("twice").add_edge("twice", END)
    result = await rt.run(b.build(), {})
    assert result.status is RunStatus.FAILED and result.error is not None
    assert result.error.type == "DuplicateStepError" and result.error.node == "twice"
    assert "'fetch'" in result.error.message


async def test_update_state_writes_through_reducers_and_routes_as_the_node(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = approval_workflow(calls)
    waiting = await rt.run(wf, {"count": 1})
    old_head = waiting.checkpoint_id
    cp_id = await rt.update_state(wf, waiting.run_id,
                                  {"count": 5, "log": ["by hand"], "approved": True, "note": "n"},
                                  as_node="approve")
    snap = await rt.get_state(waiting.run_id)
    assert snap.checkpoint_id == cp_id
    assert snap.values["count"] == 6 and snap.values["log"] == ["draft", "by hand"]
    assert snap.values["approved"] is True
    assert snap.next_tasks == ()  # approve's only edge goes to END
    assert snap.pending_requests == ()
    assert await rt.pending_requests() == []
    [new, *_rest] = await rt.history(waiting.run_id)
    assert new.id == cp_id and new.source == "update" and new.parent_id == old_head
    assert new.nodes == ("approve",)
    assert snap.status is RunStatus.COMPLETED
    assert calls["approve"] == 1


async def test_update_state_as_an_earlier_node_reroutes_and_resume_continues(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = approval_workflow(calls)
    waiting = await rt.run(wf, {"topic": "old"})
    await rt.update_state(wf, waiting.run_id, {"topic": "new"}, as_node="draft")
    snap = await rt.get_state(waiting.run_id)
    assert snap.next_tasks == ("approve",) and snap.values["topic"] == "new"
    resumed = await rt.resume(wf, waiting.run_id)
    assert resumed.status is RunStatus.WAITING
    [req] = resumed.pending_requests
    assert req.payload == {"question": "publish new?"}
    done = await rt.resume(wf, waiting.run_id, responses={req.id: {"approved": True}})
    assert done.status is RunStatus.COMPLETED and done.state.topic == "new"


async def test_update_state_without_as_node_keeps_the_next_tasks(rt: Runtime) -> None:
    wf = approval_workflow()
    waiting = await rt.run(wf, {})
    await rt.update_state(wf, waiting.run_id, {"note": "edited"})
    snap = await rt.get_state(waiting.run_id)
    assert snap.values["note"] == "edited" and snap.next_tasks == ("approve",)


async def test_fork_records_its_origin_and_leaves_the_original_untouched(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = approval_workflow(calls)
    waiting = await rt.run(wf, {"topic": "a"})
    done = await rt.resume(wf, waiting.run_id,
                           responses={waiting.pending_requests[0].id: {"approved": True}})
    before_history = await rt.history(waiting.run_id)
    before_state = await rt.get_state(waiting.run_id)
    after_draft = before_history[1]
    assert after_draft.nodes == ("draft",)
    forked = await rt.fork(wf, waiting.run_id, after_draft.id, update={"topic": "b", "count": 2})
    assert forked.run_id != waiting.run_id and forked.status is RunStatus.WAITING
    assert forked.pending_requests[0].payload == {"question": "publish b?"}
    assert forked.state.count == 2 and forked.state.log == ["draft"]
    info = next(r for r in await rt.list_runs() if r.run_id == forked.run_id)
    assert info.forked_from is not None
    assert (info.forked_from.run_id, info.forked_from.checkpoint_id) == (waiting.run_id,
                                                                         after_draft.id)
    assert (await rt.history(forked.run_id))[0].source == "fork"
    assert await rt.history(waiting.run_id) == before_history
    assert await rt.get_state(waiting.run_id) == before_state
    assert done.state.topic == "a"
    finished = await rt.resume(wf, forked.run_id,
                               responses={forked.pending_requests[0].id: {"approved": False}})
    assert finished.state.topic == "b" and finished.state.approved is False
    assert calls["draft"] == 1


async def test_cancel_a_waiting_run(rt: Runtime) -> None:
    wf = approval_workflow()
    waiting = await rt.run(wf, {})
    info = await rt.cancel(waiting.run_id)
    assert info.status is RunStatus.CANCELLED
    assert (await rt.get_state(waiting.run_id)).status is RunStatus.CANCELLED
    assert await rt.pending_requests() == []
    assert await rt.list_runs(status="cancelled") == [info]
    with pytest.raises(RunNotResumableError):
        await rt.resume(wf, waiting.run_id,
                        responses={waiting.pending_requests[0].id: {"approved": True}})
    with pytest.raises(RunNotResumableError):
        await rt.cancel(waiting.run_id)


async def test_request_events_in_stream_and_stream_resume(rt: Runtime) -> None:
    wf = approval_workflow()
    events = [e async for e in rt.stream(wf, {})]
    kinds = [e.kind for e in events]
    assert kinds[-3:] == ["node_started", "request_issued", "run_waiting"]
    issued = events[-2]
    assert issued.node == "approve" and issued.data["request_id"] == "approve@2#0"
    last = events[-1].result
    assert last is not None and last.status is RunStatus.WAITING
    resumed = [e async for e in rt.stream_resume(
        wf, last.run_id, responses={"approve@2#0": {"approved": True}})]
    kinds = [e.kind for e in resumed]
    assert kinds[0] == "request_answered" and resumed[0].data["request_id"] == "approve@2#0"
    assert kinds[-1] == "run_completed" and "node_completed" in kinds
    final = resumed[-1].result
    assert final is not None and final.status is RunStatus.COMPLETED


class When(Blackboard):
    when: datetime | None = None


async def test_answers_are_checked_like_the_type_parses_them(rt: Runtime) -> None:
    b = WorkflowBuilder("when", state=When)

    async def ask(state: When, ctx: NodeContext) -> dict[str, Any]:
        return {"when": await ctx.request("when?", response_type=datetime)}

    b.add_node("ask", ask).set_entry("ask").add_edge("ask", END)
    wf = b.build()
    waiting = await rt.run(wf, {})
    rid = waiting.pending_requests[0].id
    before = await observe(rt, waiting.run_id)
    with pytest.raises(InvalidResponseError, match="date-time"):
        await rt.resume(wf, waiting.run_id, responses={rid: "yesterday"})
    assert await observe(rt, waiting.run_id) == before
    done = await rt.resume(wf, waiting.run_id, responses={rid: "2024-05-17T10:00:00+00:00"})
    assert done.state.when == datetime(2024, 5, 17, 10, tzinfo=UTC)


@pytest.mark.parametrize(("values", "as_node", "error"), [
    ({"nope": 1}, None, StateUpdateError),
    ({"count": "lots"}, "draft", StateUpdateError),
    ({"note": "x"}, "ghost", InvalidInputError),
])
async def test_bad_update_state_raises_and_changes_nothing(
    rt: Runtime, values: dict[str, Any], as_node: str | None, error: type[Exception]
) -> None:
    wf = approval_workflow()
    waiting = await rt.run(wf, {})
    before = await observe(rt, waiting.run_id)
    with pytest.raises(error):
        await rt.update_state(wf, waiting.run_id, values, as_node=as_node)
    assert await observe(rt, waiting.run_id) == before
    done = await rt.resume(wf, waiting.run_id,
                           responses={waiting.pending_requests[0].id: {"approved": True}})
    assert done.status is RunStatus.COMPLETED


class Score(BaseModel):
    score: int

    @field_validator("score")
    @classmethod
    def not_negative(cls, v: int) -> int:
        if v < 0:
            raise ValueError("score must not be negative")
        return v


async def test_an_answer_the_node_type_rejects_is_asked_again(rt: Runtime) -> None:
    b = WorkflowBuilder("scored", state=Doc)

    @b.node()
    async def rate(state: Doc, ctx: NodeContext) -> dict[str, Any]:
        answer = await ctx.request("score?", response_type=Score)
        return {"note": f"score {answer.score}"}

    b.set_entry("rate")
    wf = b.build()
    waiting = await rt.run(wf, {})
    [req] = waiting.pending_requests
    # fits the JSON Schema (an integer), fails the model's own validator
    events = [e async for e in rt.stream_resume(wf, waiting.run_id, responses={req.id: {"score": -5}})]
    again = events[-1].result
    assert again is not None and again.status is RunStatus.WAITING
    assert [r.id for r in again.pending_requests] == [req.id]
    rejected = [e for e in events if e.kind == "request_issued" and "rejected_answer" in e.data]
    assert rejected and "negative" in rejected[0].data["rejected_answer"]
    assert [r.id for r in await rt.pending_requests()] == [req.id]
    done = await rt.resume(wf, waiting.run_id, responses={req.id: {"score": 3}})
    assert done.status is RunStatus.COMPLETED and done.state.note == "score 3"


async def test_update_state_refuses_to_drop_recorded_work(rt: Runtime) -> None:
    b = WorkflowBuilder("two-askers", state=Doc)

    @b.node()
    async def first(state: Doc, ctx: NodeContext) -> dict[str, Any]:
        return {"approved": await ctx.request("a?", response_type=bool)}

    @b.node()
    async def second(state: Doc, ctx: NodeContext) -> dict[str, Any]:
        return {"note": await ctx.request("b?", response_type=str)}

    b.add_node("start", lambda s: None)
    b.set_entry("start")
    b.add_edge("start", "first")
    b.add_edge("start", "second")
    wf = b.build()
    waiting = await rt.run(wf, {})
    ids = {r.node: r.id for r in waiting.pending_requests}
    # only open requests on the head: an update is fine (they stay open)
    await rt.update_state(wf, waiting.run_id, {"topic": "edited"})
    assert {r.node: r.id for r in await rt.pending_requests()} == ids
    again = await rt.resume(wf, waiting.run_id)
    assert {r.node: r.id for r in again.pending_requests} == ids
    # one answer given, the other still open: the finished sibling would be lost
    partly = await rt.resume(wf, waiting.run_id, responses={ids["first"]: True})
    assert partly.status is RunStatus.WAITING
    before = await rt.history(waiting.run_id)
    with pytest.raises(InvalidInputError, match="finished sibling tasks"):
        await rt.update_state(wf, waiting.run_id, {"topic": "again"})
    assert await rt.history(waiting.run_id) == before


async def test_update_state_on_a_finished_run_is_refused(rt: Runtime) -> None:
    b = WorkflowBuilder("done", state=Doc)
    b.add_node("only", lambda s: {"note": "x"})
    b.set_entry("only")
    wf = b.build()
    done = await rt.run(wf, {})
    with pytest.raises(RunNotResumableError):
        await rt.update_state(wf, done.run_id, {"topic": "late"})
