"""The statements of the checkpoint store, compiled once per dialect.

The tables (``_schema.py``, SQLModel) mirror the rows of
:mod:`durable_flow.store._protocols`; the row codecs live in ``_codec.py`` and
are re-exported here for the transaction functions. The statements over the
tables (:class:`Queries`) are SQLAlchemy Core, compiled once per dialect into
SQL text with positional bound parameters, so values never reach SQL text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    Delete,
    Insert,
    Integer,
    LargeBinary,
    Select,
    String,
    Table,
    Update,
    bindparam,
    case,
    delete,
    func,
    insert,
    literal_column,
    select,
    text,
    tuple_,
    type_coerce,
    union_all,
    update,
)
from sqlalchemy import (
    cast as sql_cast,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ClauseElement, ColumnElement

from ...model._records import RunStatus
from ._codec import (
    checkpoint_from_row,
    checkpoint_params,
    decode_versions,
    error_json,
    from_us,
    request_from_row,
    request_params,
    requests_from_tuples,
    run_from_row,
    run_params,
    status_digest,
    task_write_from_row,
    to_us,
)
from ._schema import METADATA, RESUMED
from ._statement import Statement

__all__ = [
    "CHANNEL_VALUES",
    "CHECKPOINTS",
    "LOG_CHUNKS",
    "METADATA",
    "REQUESTS",
    "RUNS",
    "STEPS",
    "TASK_WRITES",
    "Queries",
    "SqlDialect",
    "Statement",
    "checkpoint_from_row",
    "checkpoint_params",
    "compile_statement",
    "decode_versions",
    "error_json",
    "from_us",
    "key_free",
    "queries_for",
    "request_from_row",
    "request_params",
    "requests_from_tuples",
    "run_from_row",
    "run_params",
    "schema_ddl",
    "status_digest",
    "task_write_from_row",
    "to_us",
]

RUNS: Table = METADATA.tables["runs"]
CHECKPOINTS: Table = METADATA.tables["checkpoints"]
CHANNEL_VALUES: Table = METADATA.tables["channel_values"]
LOG_CHUNKS: Table = METADATA.tables["log_chunks"]
TASK_WRITES: Table = METADATA.tables["task_writes"]
STEPS: Table = METADATA.tables["steps"]
REQUESTS: Table = METADATA.tables["requests"]

# -- statements -------------------------------------------------------------------


def key_free(runs: Table) -> ColumnElement[bool]:
    """A run has no concurrency key, or fewer than its ``max_per_key`` runs of it are running.

    The claim queries' filter, so that runs a full key holds back never fill a
    claim's ``LIMIT`` (other keys go on); the claim checks each run again under
    the key's lock (``Queries.key_running``, ``key_ahead``, ``key_lock``).
    """
    other = runs.alias("same_key")
    running = (select(func.count()).select_from(other).where(
        other.c.concurrency_key == runs.c.concurrency_key,
        other.c.status == RunStatus.RUNNING.value).scalar_subquery())
    return runs.c.concurrency_key.is_(None) | runs.c.max_per_key.is_(None) | (
        running < runs.c.max_per_key)


def compile_statement(stmt: ClauseElement, dialect: Dialect) -> Statement:
    """Compile Core once: literals SQLAlchemy turned into binds become constants."""
    compiled = cast(SQLCompiler, stmt.compile(dialect=dialect))
    names = tuple(compiled.positiontup or ())
    constants = {name: bp.value for name, bp in compiled.binds.items()
                 if name in names and not bp.required}
    columns = tuple(str(c.key) for c in stmt.selected_columns) if isinstance(stmt, Select) else ()
    return Statement(compiled.string, names, constants, columns)


@dataclass(frozen=True, slots=True)
class SqlDialect:
    """What differs between SQL backends at the statement level.

    ``returning``: every INSERT, UPDATE and DELETE ends in ``RETURNING 1``,
    one row per row it changed, for a driver whose batch call reports no row
    count (asyncpg's ``executemany``): it counts the rows instead.
    """

    dialect: Dialect
    insert: Callable[[Table], sqlite.Insert | postgresql.Insert]
    returning: bool = False


def _where(table: Table, *names: str) -> list[ColumnElement[bool]]:
    return [table.c[name] == bindparam(name) for name in names]


def _binds(table: Table) -> dict[str, Any]:
    return {c.name: bindparam(c.name) for c in table.c}


def _variants(
    base: Select[Any], filters: Sequence[ColumnElement[bool]]
) -> dict[tuple[bool, ...], Select[Any]]:
    """One query per combination of optional filters, so each can use its index."""
    out: dict[tuple[bool, ...], Select[Any]] = {}
    for mask in range(2 ** len(filters)):
        key = tuple(bool(mask >> i & 1) for i in range(len(filters)))
        out[key] = base.where(*[f for f, on in zip(filters, key, strict=True) if on])
    return out


class Queries:
    """Every statement of the store, compiled for one dialect."""

    def __init__(self, d: SqlDialect) -> None:
        self.dialect = d

        def c(stmt: ClauseElement) -> Statement:
            if d.returning and isinstance(stmt, Insert | Update | Delete):
                stmt = stmt.returning(literal_column("1"))
            return compile_statement(stmt, d.dialect)

        self._runs(d, c)
        self._checkpoints(c)
        self._channels(c)
        self._tasks(d, c)
        self._requests(d, c)
        # the DDL of every table and index, as the migrations leave them: what
        # MemoryStore runs on its new in-memory database (read back from the cache)
        self.schema = schema_ddl(d.dialect)

    def _runs(self, d: SqlDialect, c: Callable[[ClauseElement], Statement]) -> None:
        runs = RUNS
        lease = [*_where(runs, "run_id"), runs.c.lease_epoch == bindparam("epoch"),
                 runs.c.lease_owner == bindparam("owner")]
        self.run_insert = c(d.insert(runs).values(_binds(runs)))
        self.run_get = c(select(runs).where(*_where(runs, "run_id")))
        listing = select(runs).order_by(runs.c.created_at.desc(), runs.c.run_id.desc())
        self.run_list = {k: c(s) for k, s in _variants(listing, [
            runs.c.status == bindparam("status"),
            runs.c.workflow_name == bindparam("workflow_name")]).items()}
        # Only write transactions read the lease, to decide on a write: on
        # PostgreSQL the row stays locked until then (see lease_check).
        self.run_lease = c(select(runs.c.lease_owner, runs.c.lease_epoch,
                                  runs.c.lease_expires_at).where(*_where(runs, "run_id"))
                           .with_for_update())
        self.lease_renew = c(update(runs).where(*lease).values(
            lease_expires_at=bindparam("expires")))
        # the same renewal returning the run's status, so that a holder learns in the same
        # round trip that its run was paused (no row: the lease is lost)
        renew = compile_statement(update(runs).where(*lease).values(
            lease_expires_at=bindparam("expires")).returning(runs.c.status), d.dialect)
        self.lease_renew_status = Statement(renew.sql, renew.names, renew.constants, ("status",))
        # the holder frees its lease; the status is the state machine's (store/_machine.py)
        self.lease_release = c(update(runs).where(*lease).values(
            lease_owner=None, lease_expires_at=None, claim_token=None,
            status=bindparam("new_status"), updated_at=bindparam("now")))
        # a claimed run that could not be started: back to the queue after a backoff, or failed
        self.run_start_failed = c(update(runs).where(*lease).values(
            lease_owner=None, lease_expires_at=None, claim_token=None,
            status=bindparam("new_status"), error=bindparam("new_error"),
            start_attempts=bindparam("attempts"), start_after=bindparam("start_after"),
            updated_at=bindparam("now"), wake_at=None))
        # FOR UPDATE locks the row on PostgreSQL until the write commits; SQLite
        # already holds the database write lock (BEGIN IMMEDIATE) and ignores it.
        self.lease_check = c(select(runs.c.run_id).where(*lease).with_for_update())
        self.run_cancel = c(update(runs).where(*_where(runs, "run_id")).values(
            status=RunStatus.CANCELLED.value, lease_owner=None, lease_expires_at=None,
            lease_epoch=runs.c.lease_epoch + 1, updated_at=bindparam("now"), wake_at=None))
        self.run_touch = c(update(runs).where(*lease).values(updated_at=bindparam("now")))
        # a commit means the run started: its count of failed starts begins again
        plain: dict[str, Any] = {
            "updated_at": bindparam("now"), "status": bindparam("new_status"),
            "error": bindparam("new_error"), "start_attempts": 0, "start_after": None,
            "head_checkpoint_id": func.coalesce(bindparam("new_head"),
                                                runs.c.head_checkpoint_id)}
        # a paused run's holder commits its superstep: the run stays paused when the
        # commit leaves it running or waiting (keep_paused, _machine.keeps_paused),
        # and that status becomes its way back (paused_from)
        held_paused = (runs.c.status == RunStatus.PAUSED.value) & (
            bindparam("keep_paused", type_=Integer) == 1)
        changes: dict[str, Any] = {
            **plain,
            "status": case((held_paused, RunStatus.PAUSED.value),
                           else_=bindparam("new_status", type_=String)),
            "paused_from": case((held_paused, bindparam("from_status", type_=String)),
                                else_=runs.c.paused_from)}
        self.run_update = c(update(runs).where(*lease).values(changes))
        self.run_update_release = c(update(runs).where(*lease).values(
            {**changes, "lease_owner": None, "lease_expires_at": None}))
        # the same three, refused when the run's head is not the one the commit extends
        head = runs.c.head_checkpoint_id == bindparam("expect_head")
        self.run_touch_cas = c(update(runs).where(*lease, head).values(
            updated_at=bindparam("now")))
        self.run_update_cas = c(update(runs).where(*lease, head).values(changes))
        self.run_update_release_cas = c(update(runs).where(*lease, head).values(
            {**changes, "lease_owner": None, "lease_expires_at": None}))
        # the common superstep commit of a running run: only the head moves, so no
        # index over status, wake time or error is rewritten (on SQLite an indexed
        # column set to its own value still rewrites its index entries)
        advance = (update(runs).where(
            *lease, head, runs.c.status == RunStatus.RUNNING.value, runs.c.error.is_(None))
            .values(updated_at=bindparam("now"), head_checkpoint_id=bindparam("new_head"),
                    start_attempts=0, start_after=None))
        self.run_advance_cas = c(advance)
        # on PostgreSQL, the same commit in one statement (store/postgres/_advance.py)
        pg = d.dialect.name == "postgresql"
        self.commit_advance: Statement | None = c(_advance(advance)) if pg else None
        self.commit_advance_merge: Statement | None = (
            c(_advance(advance, merging=True)) if pg else None)
        # and the commit that completes a run with its last checkpoint (run_update_release_cas)
        finish = update(runs).where(*lease, head).values(
            {**plain, "lease_owner": None, "lease_expires_at": None})
        self.commit_finish: Statement | None = c(_advance(finish)) if pg else None
        self.commit_finish_merge: Statement | None = (
            c(_advance(finish, merging=True)) if pg else None)
        # and the start of a run: its row (unless the run exists) with its first checkpoint
        # (store/postgres/_start.py; the run's columns bound as run_<column>)
        start = d.insert(runs).values({col.name: bindparam(f"run_{col.name}") for col in runs.c})
        self.commit_start: Statement | None = c(_advance(
            start.on_conflict_do_nothing(index_elements=[runs.c.run_id]))) if pg else None
        # a worker's claim: the oldest runs of one workflow version a worker may take,
        # highest priority first; rows another transaction locked are skipped
        expired = runs.c.lease_expires_at.is_(None) | (runs.c.lease_expires_at < bindparam("now"))
        # the SQL of store/_machine.py's claimable_now (waiting runs: _wait_queries.run_due)
        startable = runs.c.start_after.is_(None) | (runs.c.start_after <= bindparam("now"))
        claimable = ((runs.c.status == RunStatus.QUEUED.value) & startable & key_free(runs)) | (
            (runs.c.status == RunStatus.RUNNING.value) & expired)
        self.run_claimable = c(select(runs).where(
            *_where(runs, "workflow_name", "workflow_version"), claimable)
            .order_by(runs.c.priority.desc(), runs.c.created_at, runs.c.run_id)
            .limit(bindparam("n")).with_for_update(skip_locked=True))
        self._keys(d, c, startable)
        self.run_set_status = c(update(runs).where(*_where(runs, "run_id")).values(
            status=bindparam("new_status"), updated_at=bindparam("now"), wake_at=None))
        # pausing (store/_machine.py): the lease stays with its holder, which finishes
        # its superstep; unpausing sets the status the machine decided
        self.run_pause = c(update(runs).where(*_where(runs, "run_id")).values(
            status=RunStatus.PAUSED.value, paused_from=bindparam("from_status"),
            pause_reason=bindparam("reason"), error=bindparam("new_error"),
            updated_at=bindparam("now")))
        self.run_unpause = c(update(runs).where(*_where(runs, "run_id")).values(
            status=bindparam("new_status"), paused_from=None, pause_reason=None,
            updated_at=bindparam("now")))
        self.run_set_paused_from = c(update(runs).where(*_where(runs, "run_id")).values(
            paused_from=bindparam("from_status")))
        self.label_insert = c(insert(METADATA.tables["run_labels"]).values(
            run_id=bindparam("run_id"), key=bindparam("key"), value=bindparam("value")))
        # the runs a worker's claim took (by its token): a retried claim finds them
        self.run_claimed_by = c(select(runs).where(
            runs.c.claim_token == bindparam("token"), runs.c.lease_owner == bindparam("owner")))
        # a claim: the row is locked (FOR UPDATE on PostgreSQL; SQLite holds the
        # database write lock) and updated only if its epoch is still the one read
        self.run_get_locked = c(select(runs).where(*_where(runs, "run_id")).with_for_update())
        self.run_claim = c(update(runs).where(
            *_where(runs, "run_id"), runs.c.lease_epoch == bindparam("old_epoch")).values(
            lease_owner=bindparam("owner"), lease_epoch=bindparam("epoch"),
            lease_expires_at=bindparam("expires"), status=bindparam("new_status"),
            error=bindparam("new_error"), updated_at=bindparam("now"),
            wake_at=bindparam("new_wake"), claim_token=bindparam("token"),
            start_attempts=bindparam("attempts"), start_after=None))

    def _keys(self, d: SqlDialect, c: Callable[[ClauseElement], Statement],
              startable: ColumnElement[bool]) -> None:
        """Per-key run concurrency: what a claim checks before it starts a run with a key."""
        runs = RUNS
        of_key = runs.c.concurrency_key == bindparam("key")
        # the runs of a key executing now (ix_runs_concurrency_key)
        self.key_running = c(select(func.count().label("n")).where(
            of_key, runs.c.status == RunStatus.RUNNING.value))
        # a queued run of the key a claim would take before this one (priority, then
        # submission): the key's runs start in that order
        ahead = (runs.c.priority > bindparam("priority")) | (
            (runs.c.priority == bindparam("priority")) & (
                (runs.c.created_at < bindparam("created")) | (
                    (runs.c.created_at == bindparam("created"))
                    & (runs.c.run_id < bindparam("run_id")))))
        self.key_ahead = c(select(runs.c.run_id).where(
            of_key, runs.c.status == RunStatus.QUEUED.value, startable, ahead).limit(1))
        # PostgreSQL: the claims of a key take turns (a transaction-level advisory lock per
        # key, taken in one statement in the order of their hashes, so two claims never
        # wait for each other's keys in opposite orders); SQLite holds the write lock
        hashes = select(func.hashtext(func.unnest(bindparam("keys", type_=ARRAY(String))))
                        .label("h")).distinct().subquery("hashes")
        ordered = select(hashes.c.h).order_by(hashes.c.h).subquery("ordered")
        locks = select(func.pg_advisory_xact_lock(ordered.c.h).label("locked"))
        self.key_lock: Statement | None = (
            c(locks) if d.dialect.name == "postgresql" else None)

    def _checkpoints(self, c: Callable[[ClauseElement], Statement]) -> None:
        cps = CHECKPOINTS
        self.cp_insert = c(cps.insert().values(_binds(cps)))
        self.cp_get = c(select(cps).where(*_where(cps, "run_id", "checkpoint_id")))
        self.cp_head = c(select(cps).where(*_where(cps, "run_id", "thread"))
                         .order_by(cps.c.seq.desc()).limit(1))
        # a thread's oldest checkpoint: one row of ux_checkpoints_thread_seq
        self.cp_first = c(select(cps).where(*_where(cps, "run_id", "thread"))
                          .order_by(cps.c.seq).limit(1))
        # a checkpoint's children: the next of its thread (one row of
        # ux_checkpoints_thread_seq) and the copies a run went on from (a range of the
        # partial ix_checkpoints_resumed: its predicate written out, so the planner uses it)
        self.cp_at_seq = c(select(cps).where(*_where(cps, "run_id", "thread", "seq")))
        # (unordered: ordered by id, the primary key would be walked instead)
        self.cp_resumed = c(select(cps).where(*_where(cps, "run_id", "parent_id"),
                                              text(RESUMED)))
        # ids matching a pattern (an id's end or start): at most ``limit`` of the run's ids
        self.cp_ids_like = c(
            select(cps.c.checkpoint_id).where(
                *_where(cps, "run_id"),
                cps.c.checkpoint_id.like(bindparam("pattern", type_=String), escape="\\"))
            .order_by(cps.c.checkpoint_id).limit(bindparam("limit", type_=Integer)))
        # history pages: a range of ix_checkpoints_namespace (or the primary key), newest first
        listing = select(cps).where(*_where(cps, "run_id")).order_by(cps.c.checkpoint_id.desc())
        self.cp_list = {(*k, paged): c(s.limit(bindparam("limit", type_=Integer)) if paged else s)
                        for k, s in _variants(listing, [
                            *_where(cps, "namespace"), *_where(cps, "thread"),
                            cps.c.checkpoint_id < bindparam("before", type_=String)]).items()
                        for paged in (False, True)}
        # each sub-workflow namespace's newest checkpoint: a range of ix_checkpoints_namespace
        # past the top level's rows (namespace "")
        newest = (select(cps.c.run_id, cps.c.namespace,
                         func.max(cps.c.checkpoint_id).label("newest"))
                  .where(*_where(cps, "run_id"), cps.c.namespace > "")
                  .group_by(cps.c.run_id, cps.c.namespace).subquery())
        self.cp_namespace_heads = c(select(cps).join(newest, (cps.c.run_id == newest.c.run_id)
                                                     & (cps.c.checkpoint_id == newest.c.newest))
                                    .order_by(cps.c.namespace))
        self.cp_mark = c(update(cps).where(*_where(cps, "run_id", "checkpoint_id")).values(
            status=bindparam("new_status"), error=bindparam("new_error"),
            status_digest=bindparam("new_status_digest")))
        self.cp_delete = c(delete(cps).where(*_where(cps, "run_id", "checkpoint_id")))
        # Prune works one run at a time: it locks the run's row first (run_lease), so
        # no commit of that run lands between this scan and its deletes; the scan
        # itself locks nothing, and a run with nothing to remove is never locked.
        self.cp_scan = c(select(cps.c.run_id, cps.c.thread, cps.c.checkpoint_id,
                                cps.c.created_at, cps.c.status, cps.c.parked)
                         .where(*_where(cps, "run_id")).order_by(cps.c.thread, cps.c.seq))
        self.run_ids_after = c(select(RUNS.c.run_id).where(RUNS.c.run_id > bindparam("after"))
                               .order_by(RUNS.c.run_id).limit(bindparam("n")))
        self.cp_versions = c(select(cps.c.value_versions).where(*_where(cps, "run_id", "thread")))

    def _channels(self, c: Callable[[ClauseElement], Statement]) -> None:
        vals, logs = CHANNEL_VALUES, LOG_CHUNKS
        self.value_insert = c(vals.insert().values(_binds(vals)))
        self.value_get = c(select(vals.c.data).where(
            *_where(vals, "run_id", "thread", "channel", "seq")))
        self.value_keys = c(select(vals.c.channel, vals.c.seq).where(
            *_where(vals, "run_id", "thread")))
        self.value_delete = c(delete(vals).where(
            *_where(vals, "run_id", "thread", "channel", "seq")))
        self.chunk_insert = c(logs.insert().values(_binds(logs)))
        self.chunk_delete_thread = c(delete(logs).where(*_where(logs, "run_id", "thread")))
        # a segment merge (``_segments``): the rows of the block being merged, then gone
        self.chunk_from = c(select(logs.c.channel, logs.c.seq, logs.c.data).where(
            *_where(logs, "run_id", "thread"), logs.c.seq >= bindparam("first")))
        self.chunk_delete_from = c(delete(logs).where(
            *_where(logs, "run_id", "thread"), logs.c.seq >= bindparam("first")))
        self.chunk_upto = c(select(logs.c.channel, logs.c.data).where(
            *_where(logs, "run_id", "thread"), logs.c.seq <= bindparam("upto"))
            .order_by(logs.c.seq, logs.c.channel))

    def _tasks(self, d: SqlDialect, c: Callable[[ClauseElement], Statement]) -> None:
        tws, steps = TASK_WRITES, STEPS
        ins = d.insert(tws)
        self.tw_upsert = c(ins.values(_binds(tws)).on_conflict_do_update(
            index_elements=list(tws.primary_key),
            set_={"data": ins.excluded.data, "created_at": ins.excluded.created_at}))
        self.tw_get = c(select(tws).where(*_where(tws, "run_id", "checkpoint_id"))
                        .order_by(tws.c.node))
        self.tw_delete = c(delete(tws).where(*_where(tws, "run_id", "checkpoint_id")))
        ins = d.insert(steps)
        self.step_upsert = c(ins.values(_binds(steps)).on_conflict_do_update(
            index_elements=list(steps.primary_key),
            set_={"data": ins.excluded.data, "created_at": ins.excluded.created_at}))
        self.step_get = c(select(steps.c.name, steps.c.data).where(
            *_where(steps, "run_id", "checkpoint_id", "node")))
        self.step_delete = c(delete(steps).where(*_where(steps, "run_id", "checkpoint_id")))

    def _requests(self, d: SqlDialect, c: Callable[[ClauseElement], Statement]) -> None:
        reqs = REQUESTS
        is_open = reqs.c.answer.is_(None)
        self.req_insert = c(d.insert(reqs).values(_binds(reqs)).on_conflict_do_nothing(
            index_elements=list(reqs.primary_key)))
        self.req_answer = c(update(reqs).where(*_where(reqs, "run_id", "request_id")).values(
            answer=bindparam("new_answer"), answered_at=bindparam("now")))
        self.req_get = c(select(reqs).where(*_where(reqs, "run_id", "request_id")))
        self.req_reopen = c(update(reqs).where(*_where(reqs, "run_id", "request_id")).values(
            answer=None, answered_at=None))
        self.req_drop_open = c(delete(reqs).where(*_where(reqs, "run_id"), is_open))
        listing = select(reqs).where(*_where(reqs, "run_id")).order_by(
            reqs.c.created_at, reqs.c.request_id)
        self.req_list = {k: c(s) for k, s in _variants(
            listing, [is_open, *_where(reqs, "checkpoint_id")]).items()}
        # the inbox: open requests to people whose deadline (if any) is ahead, and
        # those past it that escalate and were not escalated yet
        inbox = select(reqs).where(is_open, reqs.c.kind == "request", reqs.c.expires_at.is_(None)
                                   | (reqs.c.expires_at > bindparam("now"))
                                   | _escalation_due(d, reqs.c.approval)).order_by(
            reqs.c.created_at, reqs.c.run_id, reqs.c.request_id)
        after = tuple_(reqs.c.created_at, reqs.c.run_id, reqs.c.request_id) > tuple_(
            bindparam("after_created", type_=BigInteger), bindparam("after_run", type_=String),
            bindparam("after_id", type_=String))
        self.req_inbox = {(*k, paged): c(s.limit(bindparam("limit", type_=Integer)) if paged else s)
                          for k, s in _variants(inbox, [*_where(reqs, "workflow_name"), after]).items()
                          for paged in (False, True)}
        # the whole inbox as people see it: only the columns a PendingRequest shows (_inbox.py)
        shown = [reqs.c[n] for n in ("request_id", "run_id", "workflow_name", "node", "payload",
                                     "response_schema", "created_at", "expires_at", "approval")]
        self.req_views = {k[0]: c(s.with_only_columns(*shown)) for k, s in _variants(
            inbox, _where(reqs, "workflow_name")).items()}
        self.req_delete = c(delete(reqs).where(*_where(reqs, "run_id", "checkpoint_id")))
        anchors = select(reqs.c.run_id, reqs.c.checkpoint_id).where(is_open).distinct()
        self.req_anchors = {k: c(s) for k, s in _variants(anchors, _where(reqs, "run_id")).items()}


# a merged segment: the block's JSON arrays joined without decoding (as _segments.join_arrays)
_JOINED = ("'\\x5b'::bytea || coalesce(string_agg(substring(every.data from 2 for "
           "length(every.data) - 2), '\\x2c'::bytea ORDER BY every.seq) FILTER (WHERE "
           "length(every.data) > 2), ''::bytea) || '\\x5d'::bytea")


def _escalation_due(d: SqlDialect, approval: ColumnElement[Any]) -> ColumnElement[bool]:
    """An approval (``Approval.encode``'s compact JSON) with ``escalate_to`` not yet escalated.

    Matched in its bytes (PostgreSQL's LIKE takes bytea; SQLite's matches a
    blob only once it is cast to text): a quote inside a JSON string is
    escaped, so these keys with their values appear only as the approval's
    own fields. ``pending_requests_tx`` checks each row again with
    :func:`~durable_flow.store._rows.escalation_due`.
    """
    if d.dialect.name == "sqlite":
        text: ColumnElement[Any] = sql_cast(approval, String)
    else:
        text = type_coerce(approval, String)  # no cast is written: LIKE on bytea
    return text.like(literal_column("""'%"escalated":false%'""")) & text.not_like(
        literal_column("""'%"escalate_to":[]%'"""))


def _byte(hex_digits: str) -> ColumnElement[Any]:
    """One constant byte in the SQL text (the statement cache keeps no bytes parameters)."""
    return literal_column(f"'\\x{hex_digits}'::bytea", LargeBinary)


def _advance(moving: Update | Insert, *, merging: bool = False) -> Select[Any]:
    """The common superstep commit in one statement (PostgreSQL, see ``store/postgres/_advance.py``).

    Data-modifying CTEs: the run's head moves (``run_advance_cas``: lease and
    head checked) and, only when that UPDATE matched, the checkpoint, its new
    values and its log chunks (``unnest`` of parallel arrays) are inserted.
    ``merging``: the checkpoint completes a block from ``first`` on, merged
    as ``insert_checkpoint`` does (one segment a channel, at the channel's
    first seq; a block holding a row that is not a JSON array stays as it is).
    The statement returns how many runs moved (0: nothing was written).
    """
    cps, vals, logs = CHECKPOINTS, CHANNEL_VALUES, LOG_CHUNKS
    moved = moving.returning(RUNS.c.run_id).cte("moved")
    went = select(moved.c.run_id).exists()
    row = [sql_cast(bindparam(col.name), col.type) for col in cps.c]
    cp = insert(cps).from_select([col.name for col in cps.c], select(*row).where(went))
    run_id, thread, seq = (sql_cast(bindparam(n), vals.c[n].type) for n in ("run_id", "thread", "seq"))
    cols = ["run_id", "thread", "seq", "channel", "data"]

    def unnested(prefix: str) -> Select[Any]:
        return select(run_id, thread, seq,
                      func.unnest(bindparam(f"{prefix}_channels", type_=ARRAY(String))).label("channel"),
                      func.unnest(bindparam(f"{prefix}_data", type_=ARRAY(LargeBinary))).label("data"))

    out = select(func.count()).select_from(moved).add_cte(
        cp.cte("cp"), insert(vals).from_select(cols, unnested("value").where(went)).cte("vals"))
    if not merging:
        return out.add_cte(insert(logs).from_select(cols, unnested("log").where(went)).cte("logs"))
    new = unnested("log").cte("new")
    mine = [logs.c.run_id == run_id, logs.c.thread == thread]
    block = select(logs.c.channel, logs.c.seq, logs.c.data).where(
        *mine, logs.c.seq >= bindparam("first", type_=Integer))
    every = union_all(block, select(new.c.channel, new.c.seq, new.c.data)).cte("every")
    size = func.length(every.c.data)
    bad = select(every.c.seq).where(
        (size < 2) | (func.substring(every.c.data, 1, 1) != _byte("5b"))
        | (func.substring(every.c.data, size, 1) != _byte("5d"))).exists()
    agg = select(every.c.channel, func.min(every.c.seq).label("first"),
                 literal_column(_JOINED, LargeBinary).label("data")).group_by(every.c.channel).cte("agg")
    sound = [went, ~bad]
    merged = update(logs).where(*mine, logs.c.channel == agg.c.channel, logs.c.seq == agg.c.first,
                                *sound).values(data=agg.c.data)
    gone = delete(logs).where(*mine, logs.c.seq >= bindparam("first", type_=Integer),
                              tuple_(logs.c.channel, logs.c.seq).not_in(
                                  select(agg.c.channel, agg.c.first)), *sound)
    fresh = insert(logs).from_select(cols, select(run_id, thread, seq, agg.c.channel, agg.c.data)
                                     .where(agg.c.first == seq, *sound))
    kept = insert(logs).from_select(cols, select(new).where(went, bad))
    return out.add_cte(merged.cte("merged"), gone.cte("gone"), fresh.cte("fresh"), kept.cte("kept"))


def schema_ddl(dialect: Dialect) -> tuple[str, ...]:
    """``CREATE TABLE`` and ``CREATE INDEX`` of every store table, in dependency order."""
    from sqlalchemy.schema import CreateIndex, CreateTable

    ddl: list[str] = []
    for table in METADATA.sorted_tables:
        ddl.append(str(CreateTable(table).compile(dialect=dialect)).strip())
        ddl += [str(CreateIndex(index).compile(dialect=dialect)).strip()
                for index in sorted(table.indexes, key=lambda i: str(i.name))]
    return tuple(ddl)


@cache
def queries_for(dialect: SqlDialect) -> Queries:
    """The compiled statements of a dialect (compiled on first use, then shared)."""
    return Queries(dialect)
