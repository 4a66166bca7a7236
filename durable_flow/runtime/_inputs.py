"""Checking what callers pass to ``Runtime``, before anything is read or written."""

from __future__ import annotations

import hashlib
import math
from collections.abc import AsyncIterator, Mapping
from datetime import timedelta
from typing import Any

from ..engine import encode_field, input_values
from ..errors import InvalidInputError
from ..model._blackboard import Blackboard
from ..model._budget import Budget
from ..model._graph import Workflow
from ..model._records import Event, RunResult, RunStatus
from ..model._routing import Routed, route_entry
from ..store._protocols import CheckpointStore

__all__ = [
    "SETTLED", "check_budget_arg", "check_concurrency_key", "check_lease_ttl", "check_mapping",
    "check_prune_args", "check_start_args", "check_store", "check_workflow", "input_digest",
    "last_result", "seconds", "validated_input",
]

def check_store(store: object) -> CheckpointStore:
    """``InvalidInputError`` unless ``store`` is a checkpoint store."""
    if not isinstance(store, CheckpointStore):
        raise InvalidInputError(f"Runtime needs a checkpoint store (MemoryStore, SqliteStore, ...), "
                                f"got {type(store).__name__}")
    return store


def check_lease_ttl(lease_ttl: object) -> float:
    """``lease_ttl=``: a positive, finite number of seconds."""
    if isinstance(lease_ttl, bool) or not isinstance(lease_ttl, int | float) \
            or not math.isfinite(lease_ttl) or lease_ttl <= 0:
        raise InvalidInputError(
            f"lease_ttl must be a positive, finite number of seconds, got {lease_ttl!r}")
    return float(lease_ttl)


def check_workflow(workflow: object) -> None:
    """``InvalidInputError`` unless ``workflow`` is a built ``Workflow``."""
    if not isinstance(workflow, Workflow):
        raise InvalidInputError(
            f"expected a Workflow (from WorkflowBuilder.build()), got {type(workflow).__name__}")


#: the statuses ``Runtime.wait`` returns on
SETTLED = frozenset({RunStatus.WAITING, RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.PAUSED,
                      RunStatus.CANCELLED})


def seconds(name: str, value: float | timedelta | None) -> float | None:
    """A duration argument in seconds; ``InvalidInputError`` unless it is >= 0 and finite."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or value < 0:
        raise InvalidInputError(f"{name} must be a number of seconds >= 0 or a timedelta, "
                                f"got {value!r}")
    return float(value)


def check_start_args(run_id: object, max_supersteps: object) -> None:
    """``InvalidInputError`` for a bad ``run_id`` or ``max_supersteps``."""
    if run_id is not None and (not isinstance(run_id, str) or not run_id.strip()):
        raise InvalidInputError(f"run_id must be a non-empty string, got {run_id!r}")
    if max_supersteps is not None and (isinstance(max_supersteps, bool)
                                       or not isinstance(max_supersteps, int)
                                       or max_supersteps < 1):
        raise InvalidInputError(f"max_supersteps must be a positive int, got {max_supersteps!r}")


def validated_input(workflow: Workflow, input: Mapping[str, Any] | Blackboard | None
                     ) -> tuple[dict[str, Any], Routed]:
    """The typed input values and the entry they route to; ``InvalidInputError`` if bad."""
    try:
        values = input_values(workflow.schema, input if input is not None else {})
    except InvalidInputError:
        raise
    except ValueError as exc:
        raise InvalidInputError(f"input does not fit {workflow.state.__name__}: {exc}") from None
    try:
        entry = route_entry(workflow, workflow.schema.build(values))
    except Exception as exc:
        raise InvalidInputError(
            f"routing the input to the entry failed: {type(exc).__name__}: {exc}") from exc
    return values, entry


def input_digest(values: Mapping[str, Any]) -> str:
    """A digest of a run's input values: equal inputs, equal digests."""
    h = hashlib.sha256()
    for name in sorted(values):
        h.update(name.encode())
        h.update(b"\0")
        h.update(encode_field("<input>", name, values[name]))
        h.update(b"\0")
    return h.hexdigest()


def check_mapping(name: str, value: object) -> None:
    """``InvalidInputError`` unless ``value`` is None or a mapping."""
    if value is not None and not isinstance(value, Mapping):
        raise InvalidInputError(f"{name} must be a mapping, got {type(value).__name__}")


async def last_result(events: AsyncIterator[Event | RunResult]) -> RunResult:
    """Drain an execution's events; return the ``RunResult`` the last one carries."""
    last: Any = None
    async for event in events:
        last = event
    if isinstance(last, Event) and last.result is not None:
        return last.result
    raise RuntimeError("the run ended without a result")  # pragma: no cover



def check_prune_args(run_id: object, keep_last: object, older_than: object) -> None:
    """``InvalidInputError`` for ``prune`` arguments that select nothing sensible."""
    if run_id is not None and not isinstance(run_id, str):
        raise InvalidInputError(f"run_id must be a string, got {run_id!r}")
    if keep_last is not None and (isinstance(keep_last, bool) or not isinstance(keep_last, int)):
        raise InvalidInputError(f"keep_last must be an int, got {keep_last!r}")
    if older_than is not None and not isinstance(older_than, timedelta):
        raise InvalidInputError(f"older_than must be a timedelta, got {older_than!r}")
    if older_than is not None and older_than < timedelta(0):
        raise InvalidInputError(f"older_than must not be negative, got {older_than!r}")
    if keep_last is None and older_than is None:
        raise InvalidInputError("prune needs keep_last, older_than or both")
    if keep_last is not None and keep_last < 1:
        raise InvalidInputError("keep_last must be at least 1")


def check_budget_arg(budget: Any) -> Budget | None:
    """``budget=`` of ``run``/``submit``: a ``Budget`` or None."""
    if budget is not None and not isinstance(budget, Budget):
        raise InvalidInputError(f"budget must be a Budget, got {budget!r:.60}")
    return budget


def check_concurrency_key(key: Any) -> str | None:
    """``concurrency_key=`` of ``submit``: a non-empty string or None."""
    if key is not None and (not isinstance(key, str) or not key):
        raise InvalidInputError(f"concurrency_key must be a non-empty string, got {key!r:.60}")
    return key
