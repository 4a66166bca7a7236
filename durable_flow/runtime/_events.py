"""Events for runs (``Runtime.send_event``) and the rule that a run asleep is left alone.

When the run already waits for the event, the payload is checked against
the waiting node's type first (``InvalidResponseError``, nothing stored).
An event is kept in the run's mailbox by the store, which delivers it to
exactly one wait, in the order sent (see ``Mailbox``); a waiting run it was
delivered to becomes ``queued``, and the workers of this process are woken
at once.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidInputError
from ..model._clock import utcnow
from ..model._records import RunStatus
from ..model._serde import encode
from ..store._protocols import CheckpointStore, RunRecord
from ._responses import check_event
from ._signals import signals_for

__all__ = ["asleep", "send_event"]


async def send_event(store: CheckpointStore, run_id: str, name: str, payload: Any) -> RunRecord:
    """Check and encode an event, keep it for the run, wake the workers if it queued the run."""
    if not isinstance(run_id, str) or not run_id:
        raise InvalidInputError(f"run_id must be a non-empty string, got {run_id!r}")
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"an event name is a non-empty string, got {name!r}")
    try:
        data = encode(payload)
    except TypeError as exc:
        raise InvalidInputError(f"the payload of event {name!r} cannot be stored: {exc}") from None
    await check_event(store, run_id, name, payload)
    record = await store.send_event(run_id, name, data)
    if record.status is RunStatus.QUEUED:
        signals_for(store).wake()
    return record


def asleep(record: RunRecord) -> bool:
    """True while a waiting run's earliest timer or deadline is still ahead.

    Nothing it waits for can have come then (answers and events queue the
    run), so continuing it would only wait again: ``resume`` writes nothing.
    """
    return record.status is RunStatus.WAITING and record.wake_at is not None \
        and record.wake_at > utcnow()
