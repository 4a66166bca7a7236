"""State transforms: each transform, composition, guards, and transform nodes in a run."""

from __future__ import annotations

from typing import Annotated, Any

import pytest

from durable_flow import (
    END,
    Blackboard,
    GuardError,
    MemoryStore,
    RunStatus,
    Runtime,
    StateUpdateError,
    WorkflowBuilder,
    WorkflowValidationError,
    append,
)
from durable_flow.model._blackboard import FreeBlackboard
from durable_flow.transforms import (
    Transform,
    default,
    drop,
    guard,
    merge_into,
    pick,
    rename,
    transform,
)


class Doc(Blackboard):
    title: str = "untitled"
    draft: str = ""
    text: str = ""
    tone: str = ""
    author: str | None = None
    meta: dict[str, Any] = {}
    notes: Annotated[list[str], append] = []


def test_pick_keeps_only_the_given_keys() -> None:
    assert pick("a", "b").apply({"a": 1, "b": 2, "c": 3}) == {"a": 1, "b": 2}


def test_drop_removes_keys() -> None:
    assert drop("c", "missing").apply({"a": 1, "c": 3}) == {"a": 1}


def test_rename_moves_values() -> None:
    assert rename(a="x").apply({"a": 1, "b": 2}) == {"x": 1, "b": 2}
    assert rename({"a": "b", "b": "a"}).apply({"a": 1, "b": 2}) == {"a": 2, "b": 1}


def test_default_fills_missing_none_and_empty_values_only() -> None:
    t = default(a=1, b=2, c=3, d=4, e=5)
    assert t.apply({"b": None, "c": "", "d": 0, "e": "kept"}) == {
        "a": 1, "b": 2, "c": 3, "d": 0, "e": "kept"}


def test_merge_into_builds_a_dict_or_joins_text() -> None:
    values = {"a": "x", "b": "", "c": "z"}
    assert merge_into("m", "a", "c", "missing").apply(values)["m"] == {"a": "x", "c": "z"}
    assert merge_into("m", "a", "b", "c", sep=" / ").apply(values)["m"] == "x / z"
    assert merge_into("m", "a", "c", drop=True).apply(values) == {
        "b": "", "m": {"a": "x", "c": "z"}}


def test_transform_applies_a_function_of_one_key() -> None:
    assert transform("a", str.upper).apply({"a": "hi"}) == {"a": "HI"}
    assert transform("a", len, to="n").apply({"a": "hi"}) == {"a": "hi", "n": 2}


def test_guard_passes_or_fails_with_a_clear_error() -> None:
    assert guard("n > 1").apply({"n": 2}) == {"n": 2}
    with pytest.raises(GuardError, match="guard failed in node 'check': n must be big"):
        guard(lambda v: v["n"] > 1, "n must be big").apply({"n": 0}, "check")
    with pytest.raises(GuardError, match="n > 1 is false"):
        guard("n > 1").apply({"n": 0})


def test_transforms_compose_left_to_right_with_rshift() -> None:
    t = rename(draft="text") >> default(tone="neutral") >> transform("text", str.strip)
    assert isinstance(t, Transform) and len(t.steps) == 3
    assert t.apply({"draft": "  hi  "}) == {"text": "hi", "tone": "neutral"}
    assert str(t) == "rename(draft->text) >> default(tone) >> transform(text, strip)"


def test_reads_and_writes_are_declared_for_the_data_flow_check() -> None:
    t = rename(draft="text") >> transform("text", str.strip) >> merge_into("meta", "title", "tone")
    assert t.reads == ("draft", "title", "tone")  # text was written by an earlier step
    assert t.writes == ("draft", "text", "meta")
    assert (pick("a") >> default(b=1)).writes is None  # pick may reset any field
    assert guard("author != None and meta.x").reads == ("author", "meta")


def test_update_resets_removed_fields_and_leaves_reducer_fields_alone() -> None:
    doc = Doc(title="T", draft="d", tone="warm", notes=["n"])
    assert (pick("draft") >> rename(draft="text")).update(doc) == {
        "title": "untitled", "tone": "", "draft": "", "text": "d"}


def test_a_transform_cannot_write_a_reducer_field() -> None:
    with pytest.raises(StateUpdateError, match="reducer field"):
        transform("notes", lambda v: [*v, "x"]).update(Doc(), "t")


async def test_a_transform_node_in_a_run() -> None:
    b = WorkflowBuilder("docs", state=Doc)
    b.add_node("write", lambda s: {"draft": "  Hello  ", "notes": ["wrote"]},
               produces=["draft", "notes"])
    b.add_transform("tidy", rename(draft="text") >> transform("text", str.strip)
                    >> default(tone="neutral", author="anon")
                    >> guard("text != ''", "nothing to publish"))
    b.set_entry("write")
    b.add_edge("write", "tidy")
    b.add_edge("tidy", END)
    wf = b.build()
    assert wf.nodes["tidy"].kind == "transform"
    async with Runtime(MemoryStore()) as rt:
        r = await rt.run(wf, {"title": "T"})
    assert r.status is RunStatus.COMPLETED, r.error
    s = r.state
    assert (s.text, s.draft, s.tone, s.author, s.notes) == ("Hello", "", "neutral", "anon",
                                                            ["wrote"])
    assert "steps: rename(draft->text) >> transform(text, strip)" in wf.explain()


async def test_a_failing_guard_fails_the_run_naming_the_node(rt: Runtime) -> None:
    b = WorkflowBuilder("guarded", state=Doc)
    b.add_transform("check", guard("text != ''", "nothing to publish"))
    b.set_entry("check")
    r = await rt.run(b.build(), {})
    assert r.status is RunStatus.FAILED and r.error is not None
    assert (r.error.type, r.error.node) == ("GuardError", "check")
    assert "nothing to publish" in r.error.message


async def test_transforms_on_a_free_form_blackboard(rt: Runtime) -> None:
    b = WorkflowBuilder("free", state=FreeBlackboard)
    b.add_transform("shape", merge_into("full", "first", "last", sep=" ", drop=True))
    b.set_entry("shape")
    r = await rt.run(b.build(), {"first": "Ada", "last": "Lovelace"})
    assert r.status is RunStatus.COMPLETED, r.error
    assert r.state.model_extra == {"first": None, "last": None, "full": "Ada Lovelace"}


def test_add_transform_reports_a_bad_skip_if_at_build() -> None:
    b = WorkflowBuilder("bad", state=Doc)
    b.add_transform("t", default(tone="x"), skip_if="tone ==")
    b.set_entry("t")
    with pytest.raises(WorkflowValidationError, match="transform 't' skip_if"):
        b.build()
