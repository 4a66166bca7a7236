"""What the pages and the JSON API both do: one layer over the ``Runtime``.

Every page and every ``/api/`` endpoint goes through :class:`UiService`, so
an answer given in a form and one posted as JSON are checked, recorded and
continued the same way.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from ..errors import InvalidInputError, NotAuthorizedError
from ..model._access import access_of, allows, is_admin
from ..model._approvals import Principal
from ..model._clock import utcnow
from ..model._graph import Workflow
from ..model._records import CheckpointInfo, PendingRequest, RunInfo, RunStatus, Snapshot
from ..runtime._doors import run_access
from ..runtime._inspect import to_pending
from ..runtime._runtime import Runtime
from ..store._protocols import InboxCursor, RunRecord

__all__ = [
    "HistoryPage",
    "InboxPage",
    "RunsPage",
    "UiService",
    "decode_cursor",
    "encode_cursor",
]


Shown = Callable[[list[PendingRequest]], Awaitable[list[PendingRequest]]]
"""Which of a batch of requests a principal may see (applied before paging)."""


@dataclass(frozen=True, slots=True)
class InboxPage:
    """One page of open requests, oldest first; ``next_after`` continues it."""

    requests: list[PendingRequest]
    next_after: str | None


@dataclass(frozen=True, slots=True)
class RunsPage:
    """One page of runs, newest first."""

    runs: list[RunInfo]
    total: int
    offset: int
    limit: int

    @property
    def next_offset(self) -> int | None:
        """The offset of the next page, or None on the last one."""
        end = self.offset + len(self.runs)
        return end if end < self.total else None


@dataclass(frozen=True, slots=True)
class HistoryPage:
    """One page of a namespace's checkpoints, newest first; ``next_before`` continues it."""

    checkpoints: list[CheckpointInfo]
    next_before: str | None


def encode_cursor(request: PendingRequest) -> str:
    """An opaque inbox cursor pointing just after ``request``."""
    key = [request.created_at.isoformat(), request.run_id, request.id]
    return base64.urlsafe_b64encode(orjson.dumps(key)).decode().rstrip("=")


def decode_cursor(text: str) -> InboxCursor:
    """The store cursor an inbox link carries; ``InvalidInputError`` if it is not one."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        created, run_id, request_id = orjson.loads(raw)
        at = datetime.fromisoformat(created)
    except (ValueError, TypeError, binascii.Error, orjson.JSONDecodeError):
        raise InvalidInputError(f"not an inbox cursor: {text!r}") from None
    if not isinstance(run_id, str) or not isinstance(request_id, str) or at.tzinfo is None:
        raise InvalidInputError(f"not an inbox cursor: {text!r}")
    return at, run_id, request_id


class UiService:
    """The inbox and run inspector over one ``Runtime`` (and the workflows it was given)."""

    def __init__(self, runtime: Runtime, workflows: Sequence[Workflow] = ()) -> None:
        self.runtime = runtime
        self.workflows = {(wf.name, wf.version): wf for wf in workflows}
        self._forks: set[asyncio.Task[Any]] = set()

    # the inbox ---------------------------------------------------------------------
    async def inbox(self, *, workflow: str | None = None, after: str | None = None,
                    limit: int = 50, shown: Shown | None = None) -> InboxPage:
        """One page of open requests across runs and nesting levels, oldest first.

        ``shown`` keeps the requests a principal may see (see ``_doors.inbox_filter``)
        and is applied before paging: the store's inbox index is read from the
        cursor in batches until the page is full, so a person's requests
        behind many others' are on their first page. Without it, reads
        ``limit + 1`` rows, so the first page of a large inbox costs the same
        as of a small one.
        """
        _check_limit(limit)
        cursor = decode_cursor(after) if after else None
        batch = limit + 1 if shown is None else max(limit + 1, 200)
        schemas: dict[bytes, Any] = {}
        found: list[PendingRequest] = []
        while True:
            rows = await self.runtime.store.pending_requests(
                workflow_name=workflow or None, limit=batch, after=cursor)
            read = [to_pending(r, schemas) for r in rows]
            found += read if shown is None else await shown(read)
            if len(rows) < batch or len(found) > limit:
                break
            cursor = decode_cursor(encode_cursor(read[-1]))
        page = found[:limit]
        more = len(found) > limit and page
        return InboxPage(page, encode_cursor(page[-1]) if more else None)

    async def run_statuses(self, run_ids: Iterable[str]) -> dict[str, RunStatus]:
        """The status of each of these runs (one read per distinct run; unknown ones left out).

        The inbox shows it beside each request: with ``waits="branch"`` a
        request can be open while its run is still ``running`` other branches.
        """
        return {run_id: r.status for run_id, r in (await self.run_records(run_ids)).items()}

    async def run_records(self, run_ids: Iterable[str]) -> dict[str, RunRecord]:
        """The stored row of each of these runs (one read per distinct run; unknown ones left out).

        The inbox shows its status and who started it (``started_by``: who asked).
        """
        records: dict[str, RunRecord] = {}
        for run_id in dict.fromkeys(run_ids):
            record = await self.runtime.store.get_run(run_id)
            if record is not None:
                records[run_id] = record
        return records

    async def open_request(self, run_id: str, request_id: str) -> PendingRequest | None:
        """The request if it is still open, else None."""
        for row in await self.runtime.store.get_requests(run_id, open_only=True):
            if row.id == request_id:
                return to_pending(row)
        return None

    async def respond(self, run_id: str, responses: Mapping[str, Any], *,
                      by: Principal | None = None, via: str = "ui",
                      comment: str | None = None) -> RunInfo:
        """Record answers (checked against each request's schema); a worker continues the run.

        ``by`` answers (None: the admin); ``NotAuthorizedError`` for a request not theirs.
        """
        return await self.runtime.respond(run_id, responses, by=by, via=via, comment=comment)

    async def reassign(self, run_id: str, request_id: str, *, assignees: Sequence[str],
                       roles: Sequence[str], by: Principal | None,
                       via: str = "api") -> PendingRequest:
        """The admin (``by`` None) gives an open request to other people; anyone else is refused.

        Recorded as a ``reassign`` decision by ``admin`` with a notification
        (``Runtime.reassign``); ``NotAuthorizedError`` for a person, and nothing changes.
        """
        if by is not None and not is_admin(by):
            raise NotAuthorizedError(by.id, "reassign requests (admins only)", run_id=run_id,
                                     request_id=request_id or None)
        return await self.runtime.reassign(run_id, request_id, assignees=assignees, roles=roles,
                                           by="admin" if by is None else by.id, via=via)

    # runs --------------------------------------------------------------------------
    async def runs(self, *, status: RunStatus | str | None = None, workflow: str | None = None,
                   offset: int = 0, limit: int = 50, who: Principal | None = None,
                   label: str | None = None) -> RunsPage:
        """Runs, newest first, filtered, one page of them.

        ``who`` (None: the admin) sees only the runs the rule lets them read,
        filtered before paging (``model/_access.py``). ``label``: ``key=value``
        (several separated by commas), each must match.
        """
        _check_limit(limit)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidInputError(f"offset must be an int >= 0, got {offset!r}")
        found = await self.runtime.list_runs(status=status or None, workflow_name=workflow or None,
                                             labels=label_filter(label))
        if who is not None and not is_admin(who):
            found = [info for info in found if await self._readable(info.run_id, who)]
        return RunsPage(found[offset:offset + limit], len(found), offset, limit)

    async def _readable(self, run_id: str, who: Principal) -> bool:
        record = await self.runtime.store.get_run(run_id)
        return record is not None and allows(
            access_of(who, await run_access(self.runtime.store, record)), "read")

    async def run(self, run_id: str) -> RunInfo:
        """One run; ``RunNotFoundError`` if unknown."""
        return await self.runtime.get_run(run_id)

    async def history(self, run_id: str, *, namespace: str = "", limit: int = 50,
                      before: str | None = None) -> HistoryPage:
        """One page of a namespace's checkpoints, newest first."""
        _check_limit(limit)
        found = await self.runtime.history(run_id, namespace=namespace, limit=limit + 1,
                                           before=before or None)
        page = found[:limit]
        return HistoryPage(page, page[-1].id if len(found) > limit else None)

    async def snapshot(self, run_id: str, checkpoint_id: str | None = None,
                       namespace: str = "") -> Snapshot:
        """The state at a checkpoint (default: the newest of ``namespace``)."""
        return await self.runtime.get_state(run_id, checkpoint_id or None, namespace=namespace)

    async def namespaces(self, run_id: str) -> dict[str, RunStatus]:
        """Every sub-workflow namespace of a run, with the status of its newest checkpoint."""
        await self.run(run_id)
        return {meta.namespace: meta.status
                for meta in await self.runtime.store.namespace_heads(run_id)}

    def workflow_for(self, info: RunInfo) -> Workflow | None:
        """The workflow object of a run, if this server was given it."""
        return self.workflows.get((info.workflow_name, info.workflow_version))

    # changing runs ------------------------------------------------------------------------
    async def cancel(self, run_id: str, *, by: str = "admin", via: str = "ui") -> RunInfo:
        """Cancel a run (needs no workflow code), recorded as a decision ``by``."""
        return await self.runtime.cancel(run_id, by=by, via=via)

    async def pause(self, run_id: str, reason: str | None, by: Any) -> RunInfo:
        """Pause a run (a ``pause`` decision by ``by``; the admin when None)."""
        return await self.runtime.pause(run_id, reason=reason or None, by=by or "admin")

    async def unpause(self, run_id: str, by: Any) -> RunInfo:
        """Unpause a paused run (an ``unpause`` decision by ``by``; the admin when None)."""
        return await self.runtime.unpause(run_id, by=by or "admin")

    async def fork(self, run_id: str, checkpoint_id: str,
                   update: Mapping[str, Any] | None = None, *, by: str = "admin",
                   via: str = "ui") -> RunInfo:
        """Start a new run from a checkpoint; returns the new run once it exists.

        The fork executes in this process (it needs the workflow's code); a
        fork that runs on for longer than a moment keeps running after this
        returns.
        """
        source = await self.run(run_id)
        workflow = self.workflow_for(source)
        if workflow is None:
            raise InvalidInputError(
                f"forking run {run_id} needs workflow {source.workflow_name!r} version "
                f"{source.workflow_version!r}: start the UI with its MODULE:WORKFLOW")
        started = utcnow()
        task = asyncio.create_task(self.runtime.fork(workflow, run_id, checkpoint_id,
                                                     update=update, by=by, via=via))
        self._forks.add(task)
        task.add_done_callback(self._forks.discard)
        done, _ = await asyncio.wait({task}, timeout=1.0)
        if done:
            return await self.run(task.result().run_id)
        return await self._find_fork(source, checkpoint_id, started, task)

    async def _find_fork(self, source: RunInfo, checkpoint_id: str, started: datetime,
                         task: asyncio.Task[Any]) -> RunInfo:
        """The run a fork still executing created (it is written before it runs)."""
        while True:
            for info in await self.runtime.list_runs(workflow_name=source.workflow_name):
                ref = info.forked_from
                if ref is not None and ref.run_id == source.run_id \
                        and ref.checkpoint_id == checkpoint_id and info.created_at >= started:
                    return info
            if task.done():
                return await self.run(task.result().run_id)
            await asyncio.sleep(0.05)

    async def close(self) -> None:
        """Stop forks still executing (their runs stay resumable)."""
        for task in list(self._forks):
            task.cancel()
        for task in list(self._forks):
            with contextlib.suppress(BaseException):
                await task


def _check_limit(limit: object) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 500:
        raise InvalidInputError(f"limit must be an int from 1 to 500, got {limit!r}")



def label_filter(text: str | None) -> dict[str, str] | None:
    """``key=value[,key=value...]`` as labels to filter on; None for none."""
    if not text or not text.strip():
        return None
    out: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep or not key:
            raise InvalidInputError(f"a label filter is key=value, got {part.strip()!r}")
        out[key.strip()] = value.strip()
    return out
