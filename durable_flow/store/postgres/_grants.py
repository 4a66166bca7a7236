"""PostgreSQL's limit grants in one round trip: a grant, its renewal and its release.

The usual grant is a transaction of five statements (the limit's row
locked, the request read, inserted or renewed, the grants held and waited
for counted, the grant taken; one more per rate window), seven round trips
or more with BEGIN and COMMIT. Here it is one: ``SELECT ... FROM
durable_flow_request_grant(...)``, the plpgsql function of migration 0021,
which runs those statements on the server in the same order under the same
lock. Each of them sees what
committed before it started, as in the transaction, so a request that
waited for the lock counts the grant its predecessor took, and the limit
holds across every worker. The function decides at the caller's clock
(plus its wait for the lock), as the transaction does.

A release is one statement too: the data-modifying CTE :data:`RELEASE`
marks the grant released and, on the share of releases that prune
(``PRUNE_CHANCE``), deletes the limit's rows released or expired long ago
in the same statement. A renewal is its UPDATE alone.

Each is sent on its own (no BEGIN, no COMMIT: the statement is its own
transaction; ``run(..., alone=True)`` of the driver). All three are
idempotent: asking again for a grant held returns it held, renewing or
releasing twice leaves what doing it once does; so a statement whose
connection was lost in flight runs again, like any transaction that did
not commit. SQLite (and the memory store) keep ``SqlFlow``'s transactions:
there a transaction costs no round trip.
"""

from __future__ import annotations

import random
from datetime import timedelta
from functools import partial
from typing import Any

from ...model._clock import utcnow
from .._flow_protocols import GrantDecision, LimitUse
from ..sql import _codec as t
from ..sql import _flow
from ..sql._flow import keep_released, wait_reason
from ..sql._ops import Op, Tx, execute, fetch
from ..sql._statement import Statement

__all__ = ["RELEASE", "REQUEST", "OneStatementGrants", "write_alone"]

_MICROSECOND = timedelta(microseconds=1)

#: A grant decided by migration 0021's function (its columns: ``GrantDecision``'s parts).
REQUEST = Statement(
    "SELECT granted, in_use, waiting, retry_at, why, seen, window_s "
    "FROM durable_flow_request_grant($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    ("id", "name", "run_id", "task", "owner", "now", "ttl", "concurrency", "per_second",
     "per_minute"), {},
    ("granted", "in_use", "waiting", "retry_at", "why", "seen", "window_s"))

#: A release, and when ``prune`` the limit's rows released or expired before ``before``.
#: The grant released is not among them (one statement changes a row once).
RELEASE = Statement(
    "WITH released AS (UPDATE limit_grants SET released_at = $1 "
    "WHERE id = $2 AND released_at IS NULL RETURNING 1), "
    "pruned AS (DELETE FROM limit_grants WHERE $3::boolean AND name = $4 AND id <> $2 "
    "AND (released_at < $5 OR expires_at < $5) RETURNING 1) "
    "SELECT count(*) AS released FROM released",
    ("now", "id", "prune", "name", "before"), {}, ("released",))


def _request_tx(grant_id: str, name: str, run_id: str, task: str, owner: str, ttl: float,
                concurrency: int | None, per_second: float | None,
                per_minute: float | None) -> Tx[GrantDecision]:
    rows = yield from fetch(
        REQUEST, id=grant_id, name=name, run_id=run_id, task=task, owner=owner,
        now=t.to_us(utcnow()), ttl=timedelta(seconds=ttl) // _MICROSECOND,
        concurrency=concurrency,
        per_second=None if per_second is None else float(per_second),
        per_minute=None if per_minute is None else float(per_minute))
    row = rows[0]
    use = LimitUse(name, int(row["in_use"]), int(row["waiting"]))
    if row["granted"]:
        return GrantDecision(True, use)
    retry_at = None if row["retry_at"] is None else t.from_us(row["retry_at"])
    return GrantDecision(False, use, retry_at, wait_reason(
        row["why"], use, concurrency, row["seen"], row["window_s"]))


def _release_tx(grant_id: str, name: str) -> Tx[None]:
    now = utcnow()
    yield from fetch(RELEASE, now=t.to_us(now), id=grant_id, name=name,
                     prune=random.random() < _flow.PRUNE_CHANCE,  # now and then, as SqlFlow's
                     before=t.to_us(keep_released(now)))


def _renew_tx(stmt: Statement, grant_id: str, ttl: float) -> Tx[int]:
    return (yield from execute(stmt, id=grant_id,
                               expires=t.to_us(utcnow() + timedelta(seconds=ttl))))


class OneStatementGrants:
    """``PostgresStore``'s grant, renewal and release of a limit: one statement each."""

    driver: Any
    _f: Any

    async def request_grant(self, grant_id: str, name: str, *, run_id: str, task: str,
                            owner: str, ttl: float, concurrency: int | None,
                            per_second: float | None, per_minute: float | None) -> GrantDecision:
        """Grant a use of limit ``name`` now if it allows one, else record the wait.

        As ``SqlFlow.request_grant`` decides it, in one round trip.
        """
        decision: GrantDecision = await self.driver.run(partial(
            _request_tx, grant_id, name, run_id, task, owner, ttl, concurrency, per_second,
            per_minute), write=True, idempotent=True, alone=True)
        return decision

    async def renew_grant(self, grant_id: str, ttl: float) -> bool:
        """Extend a grant (held or waiting) by ``ttl``; False once released. One round trip."""
        renewed: int = await self.driver.run(partial(_renew_tx, self._f.grant_renew, grant_id,
                                                     ttl), write=True, idempotent=True, alone=True)
        return renewed > 0

    async def release_grant(self, grant_id: str, name: str) -> None:
        """Give a grant (or a wait for one) up, now and then pruning the limit; one round trip."""
        await self.driver.run(partial(_release_tx, grant_id, name), write=True,
                              idempotent=True, alone=True)


async def write_alone(tx: Tx[Any], perform: Any) -> Any:
    """Run ``tx``, a transaction function of one statement, with ``perform``; its value.

    Sent alone the statement is its own transaction; a function that asks
    for a second one is a mistake (the first has committed by then).
    """
    try:
        op: Op = next(tx)
        try:
            tx.send(await perform(op))
        except StopIteration as stop:
            return stop.value
        raise RuntimeError("a write sent alone asked for a second statement")
    except StopIteration as stop:  # nothing to write
        return stop.value
    finally:
        tx.close()
