"""The blackboard: a typed, read-only state shared by the nodes of a workflow."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, Self

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from ..errors import StateUpdateError
from ._frozen import Deferred, freeze
from ._messages import Message
from ._reducers import Reducer, append, last_write_wins

__all__ = ["Blackboard", "FieldSpec", "StateSchema", "schema_for"]


class Blackboard(BaseModel):
    """Base class of workflow state. Subclass it and declare fields.

    A field's reducer (``Annotated[int, add]``) says how writes merge; plain
    fields are last-write-wins. Instances are frozen: a node changes the
    blackboard only through the update it returns.
    """

    # the fields the engine left out until read (``StateSchema.build`` of a Deferred)
    __slots__ = ("__df_deferred__",)

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=False)

    messages: Annotated[list[Message], append] = []

    if not TYPE_CHECKING:
        def __getattr__(self, name: str) -> Any:
            deferred = _deferred(self)
            if deferred and name in deferred:
                return _resolve(self, deferred, name)
            return super().__getattr__(name)

    def _settle(self) -> None:
        """Build every field left out until read (before anything reads ``__dict__``)."""
        deferred = _deferred(self)
        while deferred:
            _resolve(self, deferred, next(iter(deferred)))

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        """Pydantic's ``model_dump``, every field built first."""
        self._settle()
        return super().model_dump(**kwargs)

    def model_dump_json(self, **kwargs: Any) -> str:
        """Pydantic's ``model_dump_json``, every field built first."""
        self._settle()
        return super().model_dump_json(**kwargs)

    def __eq__(self, other: object) -> bool:
        self._settle()
        if isinstance(other, Blackboard):
            other._settle()
        return super().__eq__(other)

    __hash__ = BaseModel.__hash__

    def __iter__(self) -> Any:
        self._settle()
        return super().__iter__()

    def __repr_args__(self) -> Any:
        self._settle()
        return super().__repr_args__()

    def __copy__(self) -> Self:
        self._settle()
        return super().__copy__()

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Self:
        self._settle()
        return super().__deepcopy__(memo)

    def __getstate__(self) -> dict[Any, Any]:
        self._settle()
        return super().__getstate__()


_DEFERRED_SLOT = Blackboard.__dict__["__df_deferred__"]


def _deferred(board: Blackboard) -> dict[str, Deferred] | None:
    try:
        return _DEFERRED_SLOT.__get__(board)  # type: ignore[no-any-return]
    except AttributeError:
        return None


def _resolve(board: Blackboard, deferred: dict[str, Deferred], name: str) -> Any:
    value = deferred[name].resolve()
    fields = board.__dict__
    fields[name] = value
    del deferred[name]
    order = type(board).model_fields  # the dict as model_construct would have made it
    object.__setattr__(board, "__dict__", {k: fields[k] for k in order if k in fields}
                       | {k: v for k, v in fields.items() if k not in order})
    return value


class FreeBlackboard(Blackboard):
    """A schema-less blackboard: any key, last-write-wins."""

    model_config = ConfigDict(frozen=True, extra="allow")


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One field of a schema: its reducer and validators."""

    name: str
    reducer: Reducer
    adapter: TypeAdapter[Any]
    item_adapter: TypeAdapter[Any] | None

    @property
    def is_log(self) -> bool:
        """True for ``append`` fields, which are stored as deltas."""
        return self.reducer is append

    @property
    def is_lww(self) -> bool:
        """True for last-write-wins fields."""
        return self.reducer is last_write_wins


_ANY = TypeAdapter(Any)


@dataclass(frozen=True, slots=True)
class StateSchema:
    """The reducer and validation view of a ``Blackboard`` subclass."""

    cls: type[Blackboard]
    fields: dict[str, FieldSpec]
    free_form: bool

    def field(self, node: str, name: str) -> FieldSpec:
        """The spec of ``name``; unknown fields are an error naming the node."""
        spec = self.fields.get(name)
        if spec is not None:
            return spec
        if self.free_form and name.isidentifier() and not name.startswith("_"):
            return FieldSpec(name, last_write_wins, _ANY, None)
        known = ", ".join(sorted(self.fields))
        raise StateUpdateError(node, name, f"no such field on {self.cls.__name__} (fields: {known})")

    def validate_update(self, node: str, name: str, value: Any) -> Any:
        """Validate one written value against the field's type."""
        spec = self.field(node, name)
        try:
            if spec.item_adapter is not None:
                items = value if isinstance(value, list | tuple) else [value]
                return [spec.item_adapter.validate_python(v) for v in items]
            if spec.is_lww or spec.reducer.__module__ == "durable_flow.model._reducers":
                return spec.adapter.validate_python(value)
            return value
        except ValidationError as exc:
            raise StateUpdateError(node, name, _first_error(exc)) from None

    def reduce(self, node: str, name: str, current: Any, update: Any) -> Any:
        """Apply the field's reducer; custom reducers' results are validated."""
        spec = self.field(node, name)
        new = spec.reducer(current, update)
        if spec.is_log or spec.reducer.__module__ == "durable_flow.model._reducers":
            return new
        try:
            return spec.adapter.validate_python(new)
        except ValidationError as exc:
            raise StateUpdateError(node, name, "reducer result: " + _first_error(exc)) from None

    def default_values(self) -> dict[str, Any]:
        """Every declared field at its default."""
        return {name: _default(self.cls, name) for name in self.fields}

    def build(self, values: dict[str, Any]) -> Blackboard:
        """An instance from already validated values (no re-validation, no copy).

        Given frozen values (``freeze``), the instance is deeply read-only:
        its free-form extras are a read-only dict too.
        """
        deferred = {k: v for k, v in values.items() if isinstance(v, Deferred)}
        if deferred:  # left out until read: the engine's lazily built logs
            board = self.cls.model_construct(
                **{k: v for k, v in values.items() if k not in deferred})
            for name in deferred:
                board.__dict__.pop(name, None)
                board.__pydantic_fields_set__.add(name)
            object.__setattr__(board, "__df_deferred__", deferred)
        else:
            board = self.cls.model_construct(**values)
        extra = board.__pydantic_extra__
        if extra:
            object.__setattr__(board, "__pydantic_extra__", freeze(extra))
        return board


def _default(cls: type[Blackboard], name: str) -> Any:
    info = cls.model_fields[name]
    return info.get_default(call_default_factory=True, validated_data={})


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ()))
    return f"{err['msg']}" + (f" at {loc}" if loc else "") + f" (got {err.get('input')!r:.80})"


@cache
def schema_for(cls: type[Blackboard]) -> StateSchema:
    """Build (once per class) the schema view of a Blackboard subclass."""
    if not (isinstance(cls, type) and issubclass(cls, Blackboard)):
        raise TypeError(f"state must be a Blackboard subclass, got {cls!r}")
    fields: dict[str, FieldSpec] = {}
    for name, info in cls.model_fields.items():
        reducer: Reducer = last_write_wins
        for meta in info.metadata:
            if callable(meta) and not isinstance(meta, type):
                reducer = meta
        annotation = info.annotation if info.annotation is not None else Any
        adapter: TypeAdapter[Any] = TypeAdapter(annotation)
        item_adapter = TypeAdapter(_item_type(annotation)) if reducer is append else None
        fields[name] = FieldSpec(name, reducer, adapter, item_adapter)
    free = cls.model_config.get("extra") == "allow"
    return StateSchema(cls=cls, fields=fields, free_form=free)


def _item_type(annotation: Any) -> Any:
    args = getattr(annotation, "__args__", None)
    return args[0] if args else Any
