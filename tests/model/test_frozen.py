"""Read-only values: what mutation raises, and what reading and copying still do."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable
from typing import Any, Generic, NamedTuple, TypeVar

import orjson
import pydantic.dataclasses
import pytest
from pydantic import BaseModel, ConfigDict, RootModel, TypeAdapter, ValidationError

from durable_flow import Message, ToolCall
from durable_flow.model._frozen import FrozenDict, FrozenList, FrozenSet, freeze, freeze_appended
from durable_flow.model._serde import decode, encode


class Inner(BaseModel):
    level: int = 0
    marks: list[int] = []


class Item(BaseModel):
    name: str = ""
    tags: list[str] = []
    inner: Inner = Inner()


class Pinned(BaseModel):
    model_config = ConfigDict(frozen=True)

    label: str = ""
    extra: dict[str, list[int]] = {}


@dataclasses.dataclass
class Point:
    x: int
    path: list[int]


T = TypeVar("T")


class Box(BaseModel, Generic[T]):
    item: T
    more: list[T] = []


class Tree(BaseModel):
    name: str = ""
    children: list[Tree] = []


class Open(BaseModel):
    model_config = ConfigDict(extra="allow")

    known: int = 0


class Numbers(RootModel[list[int]]):
    pass


@pydantic.dataclasses.dataclass
class Checked:
    n: int
    items: list[int]


class Pair(NamedTuple):
    left: int
    right: list[int]


def sample() -> dict[str, Any]:
    return {
        "notes": ["a", "b"],
        "rows": [{"k": 1}, {"k": 2, "more": [1, 2]}],
        "table": {"x": [1], "y": {"z": [2]}},
        "tags": {"t1", "t2"},
        "item": Item(name="i", tags=["p"], inner=Inner(level=1, marks=[3])),
        "pinned": Pinned(label="p", extra={"e": [1]}),
        "point": Point(1, [2, 3]),
        "pair": Pair(1, [2]),
        "tup": (1, [2, {"d": 3}]),
    }


def _mutations(v: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    """Every way of changing a frozen sample in place, by name."""

    def iadd() -> None:
        notes = v["notes"]
        notes += ["x"]

    def ior() -> None:
        table = v["table"]
        table |= {"n": [0]}

    def isub() -> None:
        tags = v["tags"]
        tags -= {"t1"}

    return {
        "list.append": lambda: v["notes"].append("x"),
        "list.extend": lambda: v["notes"].extend(["x"]),
        "list.insert": lambda: v["notes"].insert(0, "x"),
        "list.pop": lambda: v["notes"].pop(),
        "list.remove": lambda: v["notes"].remove("a"),
        "list.clear": lambda: v["notes"].clear(),
        "list.sort": lambda: v["notes"].sort(reverse=True),
        "list.reverse": lambda: v["notes"].reverse(),
        "list.setitem": lambda: v["notes"].__setitem__(0, "x"),
        "list.setslice": lambda: v["notes"].__setitem__(slice(0, 1), ["x"]),
        "list.delitem": lambda: v["notes"].__delitem__(0),
        "list.iadd": iadd,
        "list.imul": lambda: v["notes"].__imul__(2),
        "dict.setitem": lambda: v["table"].__setitem__("n", [0]),
        "dict.delitem": lambda: v["table"].__delitem__("x"),
        "dict.update": lambda: v["table"].update(n=[0]),
        "dict.pop": lambda: v["table"].pop("x"),
        "dict.popitem": lambda: v["table"].popitem(),
        "dict.setdefault": lambda: v["table"].setdefault("n", [0]),
        "dict.clear": lambda: v["table"].clear(),
        "dict.ior": ior,
        "set.add": lambda: v["tags"].add("t3"),
        "set.discard": lambda: v["tags"].discard("t1"),
        "set.remove": lambda: v["tags"].remove("t1"),
        "set.pop": lambda: v["tags"].pop(),
        "set.update": lambda: v["tags"].update({"t3"}),
        "set.clear": lambda: v["tags"].clear(),
        "set.isub": isub,
        "list in dict": lambda: v["table"]["x"].append(9),
        "dict in dict": lambda: v["table"]["y"].__setitem__("w", 1),
        "dict in list": lambda: v["rows"][0].__setitem__("k", 9),
        "list in dict in list": lambda: v["rows"][1]["more"].append(9),
        "model field": lambda: setattr(v["item"], "name", "x"),
        "nested model field": lambda: setattr(v["item"].inner, "level", 9),
        "list in model": lambda: v["item"].tags.append("x"),
        "list in nested model": lambda: v["item"].inner.marks.append(9),
        "dict in frozen model": lambda: v["pinned"].extra.__setitem__("n", [0]),
        "list in frozen model": lambda: v["pinned"].extra["e"].append(9),
        "dataclass field": lambda: setattr(v["point"], "x", 9),
        "dataclass delattr": lambda: delattr(v["point"], "x"),
        "list in dataclass": lambda: v["point"].path.append(9),
        "list in namedtuple": lambda: v["pair"].right.append(9),
        "dict in tuple": lambda: v["tup"][1][1].__setitem__("d", 9),
    }


MUTATIONS = sorted(_mutations(sample()))


@pytest.mark.parametrize("name", MUTATIONS)
def test_every_in_place_change_raises_and_changes_nothing(name: str) -> None:
    frozen = freeze(sample())
    with pytest.raises((TypeError, ValidationError)) as info:
        _mutations(frozen)[name]()
    assert "read-only" in str(info.value) or "frozen" in str(info.value)
    assert frozen == sample()


def test_freezing_leaves_the_original_value_mutable_and_separate() -> None:
    original = sample()
    frozen = freeze(original)
    original["notes"].append("c")
    original["item"].tags.append("q")
    original["item"].name = "changed"
    assert frozen["notes"] == ["a", "b"]
    assert frozen["item"].tags == ["p"] and frozen["item"].name == "i"


def test_frozen_containers_are_still_lists_dicts_and_sets() -> None:
    v = freeze(sample())
    assert isinstance(v, dict) and isinstance(v["notes"], list) and isinstance(v["tags"], set)
    assert isinstance(v["item"], Item) and isinstance(v["item"].inner, Inner)
    assert isinstance(v["point"], Point) and isinstance(v["pair"], Pair)
    assert type(v["pinned"]) is Pinned  # a frozen class keeps its own type


def test_reading_works_as_on_plain_values() -> None:
    v = freeze(sample())
    notes, table = v["notes"], v["table"]
    assert notes == ["a", "b"] and ["a", "b"] == notes  # noqa: SIM300 - both operand orders
    assert notes[0] == "a" and notes[-1] == "b" and notes[:1] == ["a"]
    assert len(notes) == 2 and "a" in notes and list(notes) == ["a", "b"]
    assert [n.upper() for n in notes] == ["A", "B"] and sorted(notes, reverse=True) == ["b", "a"]
    assert notes.index("b") == 1 and notes.count("a") == 1
    assert table == {"x": [1], "y": {"z": [2]}} and table["y"]["z"] == [2]
    assert table.get("missing") is None and "x" in table and sorted(table) == ["x", "y"]
    assert dict(table.items()) == table and next(iter(table.values())) == [1]
    assert v["tags"] == {"t1", "t2"} and "t1" in v["tags"] and v["tags"] | {"t3"} == {"t1", "t2", "t3"}
    assert v["item"] == Item(name="i", tags=["p"], inner=Inner(level=1, marks=[3]))
    assert Item(name="i", tags=["p"], inner=Inner(level=1, marks=[3])) == v["item"]
    assert v["item"] != Item(name="other")
    assert v["point"] == Point(1, [2, 3]) and Point(1, [2, 3]) == v["point"]
    assert v["pair"] == (1, [2]) and v["tup"] == (1, [2, {"d": 3}])
    assert repr(notes) == "['a', 'b']" and repr(v["item"]).startswith("Item(")


def test_building_new_values_gives_plain_mutable_ones() -> None:
    v = freeze(sample())
    notes, table, tags = v["notes"], v["table"], v["tags"]
    for fresh in (notes + ["c"], ["z", *notes],  # noqa: RUF005 - the + operator itself list(notes), notes.copy(), notes[:], notes * 2,
                  copy.copy(notes)):
        assert type(fresh) is list
        fresh.append("ok")
    for mapping in (dict(table), {**table, "n": [0]}, table | {"n": [0]}, table.copy(),
                    copy.copy(table)):
        assert type(mapping) is dict
        mapping["m"] = [1]
    for group in (set(tags), tags | {"t3"}, tags - {"t1"}, tags.copy()):
        assert type(group) is set
        group.add("ok")
    assert notes == ["a", "b"] and "m" not in table and tags == {"t1", "t2"}


def test_deepcopy_and_model_copy_give_mutable_copies() -> None:
    v = freeze(sample())
    thawed = copy.deepcopy(v)
    thawed["rows"][0]["k"] = 9
    thawed["table"]["y"]["z"].append(9)
    thawed["tags"].add("t3")
    thawed["item"].name = "x"
    thawed["item"].inner.marks.append(9)
    thawed["point"].x = 9
    thawed["pinned"].extra["e"].append(9)
    assert type(thawed["item"]) is Item and type(thawed["point"]) is Point
    assert v == sample()
    deep = v["item"].model_copy(deep=True)
    deep.tags.append("q")
    deep.inner.level = 5
    shallow = v["item"].model_copy(update={"name": "renamed"})
    shallow.name = "again"  # a copy is an instance of the user's class again
    assert type(shallow) is Item and v["item"].name == "i"
    assert dataclasses.replace(v["point"], x=5) == Point(5, [2, 3])


def test_json_and_orjson_encode_frozen_values() -> None:
    v = freeze({"notes": ["a"], "table": {"x": [1, {"y": None}]}})
    assert json.loads(json.dumps(v)) == v
    assert orjson.loads(orjson.dumps(v)) == v
    plain = {k: val for k, val in sample().items() if k != "pair"}  # no NamedTuple in serde
    assert decode(encode(freeze(plain))) == decode(encode(plain))


def test_pydantic_validates_frozen_values_back_into_field_types() -> None:
    v = freeze(sample())
    rows = TypeAdapter(list[dict[str, Any]]).validate_python(v["rows"] + [{"k": 3}])
    assert rows == [{"k": 1}, {"k": 2, "more": [1, 2]}, {"k": 3}]
    assert TypeAdapter(Item).validate_python(v["item"]) == v["item"]
    assert TypeAdapter(Point).validate_python(v["point"]) == v["point"]
    assert TypeAdapter(set[str]).validate_python(v["tags"]) == {"t1", "t2"}
    assert v["item"].model_dump() == sample()["item"].model_dump()


def test_freezing_a_frozen_value_returns_it_without_a_walk() -> None:
    v = freeze(sample())
    for key in ("notes", "rows", "table", "tags"):
        assert freeze(v[key]) is v[key]
    assert freeze(v["pinned"]) is v["pinned"]
    assert freeze("text") == "text" and freeze(None) is None


def test_freeze_appended_freezes_only_the_new_items() -> None:
    current = freeze([{"a": 1}])
    grown = freeze_appended(current, [{"b": [2]}])
    assert grown == [{"a": 1}, {"b": [2]}] and type(grown) is FrozenList
    assert grown[0] is current[0] and type(grown[1]["b"]) is FrozenList
    assert current == [{"a": 1}]


def test_constructors_freeze_what_they_are_given() -> None:
    items = FrozenList([{"a": [1]}])
    items.__init__([])  # type: ignore[misc]  # a second __init__ must not refill it
    assert items == [{"a": [1]}]
    mapping = FrozenDict({"a": {"b": [1]}}, c=[2])
    group = FrozenSet([(1, 2)])
    assert type(items[0]) is FrozenDict and type(items[0]["a"]) is FrozenList
    assert type(mapping["a"]["b"]) is FrozenList and mapping["c"] == [2]
    assert group == {(1, 2)} and FrozenDict.fromkeys("ab", 0) == {"a": 0, "b": 0}


def test_messages_are_read_only_all_the_way_down() -> None:
    msg = Message.assistant("hi", tool_calls=[ToolCall(id="1", name="f", arguments={"q": [1]})],
                            metadata={"usage": {"tokens": 3}})
    for change in (lambda: msg.metadata.__setitem__("k", 1),
                   lambda: msg.metadata["usage"].update(tokens=4),
                   lambda: msg.tool_calls.append(ToolCall(id="2", name="g")),
                   lambda: msg.tool_calls[0].arguments["q"].append(2),
                   lambda: Message.user("x").metadata.update(k=1)):
        with pytest.raises(TypeError):
            change()
    assert freeze(msg) is msg  # validated messages are already frozen: shared, not copied
    assert msg.metadata == {"usage": {"tokens": 3}}
    assert msg.model_dump(exclude_defaults=True)["metadata"] == {"usage": {"tokens": 3}}
    assert encode(Message.user("x")) == b'{"role":"user","content":"x"}'
    copied = msg.model_copy(update={"metadata": {"k": [1]}})
    assert type(freeze(copied).metadata["k"]) is FrozenList


def test_unknown_objects_and_scalars_pass_through() -> None:
    marker = object()
    assert freeze(marker) is marker
    assert freeze(bytearray(b"ab")) == b"ab"
    assert freeze(frozenset({1})) == frozenset({1})


KINDS: dict[str, tuple[Any, Callable[[Any], Any]]] = {
    "generic model": (Box[list[int]](item=[1], more=[[2]]), lambda v: v.item.append(3)),
    "recursive model": (Tree(children=[Tree(name="leaf")]), lambda v: setattr(v.children[0], "name", "x")),
    "model extras": (Open(known=1, loose=[1]), lambda v: v.loose.append(2)),
    "model extras dict": (Open(known=1, loose=[1]), lambda v: v.model_extra.__setitem__("k", 1)),
    "root model": (Numbers([1, 2]), lambda v: v.root.append(3)),
    "pydantic dataclass": (Checked(1, [2]), lambda v: setattr(v, "n", 5)),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_model_kinds_freeze_and_still_compare_equal(kind: str) -> None:
    value, change = KINDS[kind]
    frozen = freeze(value)
    assert frozen == value and value == frozen and isinstance(frozen, type(value))
    with pytest.raises((TypeError, ValidationError)):
        change(frozen)
    assert frozen == value
    thawed = copy.deepcopy(frozen)
    assert type(thawed) is type(value)
    change(thawed)  # the copy is the user's class again, and mutable
    assert thawed != value


def test_a_validated_message_is_shared_as_it_is_and_a_copied_one_is_frozen() -> None:
    from durable_flow.model._frozen import FrozenDict, freeze

    msg = Message(role="user", content="hi", metadata={"tags": ["a"]})
    assert freeze(msg) is msg  # validation froze it: a long history is not walked again
    copied = msg.model_copy(update={"metadata": {"tags": ["b"]}})  # skips the validators
    frozen = freeze(copied)
    assert frozen is not copied and type(frozen.metadata) is FrozenDict
    with pytest.raises(TypeError):
        frozen.metadata["tags"].append("c")
    assert frozen == copied
