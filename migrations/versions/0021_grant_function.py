"""A limit grant decided by one statement on PostgreSQL: ``durable_flow_request_grant``.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-07

PostgreSQL only (SQLite keeps deciding grants in the store's transaction):
the function runs ``request_grant``'s transaction (``store/sql/_flow.py``)
on the server, so a grant is one round trip instead of seven (BEGIN, five
statements, COMMIT). It locks the limit's row (made first on the limit's
first use), then reads the request, inserts or renews it, counts the grants
held and waited for, and takes the grant unless it must wait. Each statement
of a plpgsql function sees what committed before it started, as each
statement of the transaction did: a request that waited for the lock
counts the grant its predecessor just took.

Its arguments are the request's; ``p_now`` is the caller's clock (UTC
microseconds) when it sent the statement and ``p_ttl`` the lease in
microseconds. The time of the decision is ``p_now`` plus how long the
statement waited for the lock. It returns whether the grant is held, the
grants held (``in_use``) and waited for (``waiting``) as the request left
them, and when it waits: the earliest time to ask again (``retry_at``, NULL:
when a grant comes back) and why (``why``: ``paced``, ``full``, ``rate``
with ``seen`` grants in the last ``window_s`` seconds, or ``behind``:
requests before it go first). The caller words the reason.
"""

from __future__ import annotations

from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

_FUNCTION = """
CREATE OR REPLACE FUNCTION durable_flow_request_grant(
    p_id text, p_name text, p_run_id text, p_task text, p_owner text,
    p_now bigint, p_ttl bigint, p_concurrency integer,
    p_per_second double precision, p_per_minute double precision,
    OUT granted boolean, OUT in_use bigint, OUT waiting bigint, OUT retry_at bigint,
    OUT why text, OUT seen bigint, OUT window_s integer)
LANGUAGE plpgsql VOLATILE AS $body$
DECLARE
    v_paced bigint;
    v_now bigint;
    v_expires bigint;
    v_granted bigint;
    v_released bigint;
    v_found boolean;
    v_free bigint;
    v_rate bigint;
    v_window bigint;
    v_times bigint[];
    v_i integer;
BEGIN
    granted := false;
    -- the limit's row, locked (made first on the limit's first use): one decision at a time
    SELECT l.paced_until INTO v_paced FROM limits l WHERE l.name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO limits (name, paced_until, updated_at) VALUES (p_name, NULL, p_now)
            ON CONFLICT (name) DO NOTHING;
        SELECT l.paced_until INTO v_paced FROM limits l WHERE l.name = p_name FOR UPDATE;
    END IF;
    -- decided at its own time: the caller's clock, plus the wait for the lock
    v_now := p_now + greatest(0, floor(extract(epoch FROM clock_timestamp()
                                                - statement_timestamp()) * 1000000))::bigint;
    v_expires := v_now + p_ttl;
    SELECT g.granted_at, g.released_at INTO v_granted, v_released
        FROM limit_grants g WHERE g.id = p_id;
    v_found := FOUND;
    IF v_found THEN  -- asked again: its place renewed
        UPDATE limit_grants SET expires_at = v_expires
            WHERE id = p_id AND released_at IS NULL;
    ELSE
        INSERT INTO limit_grants (id, name, run_id, task, owner, requested_at, granted_at,
                                  expires_at, released_at, capacity)
            VALUES (p_id, p_name, p_run_id, p_task, p_owner, v_now, NULL, v_expires, NULL,
                    p_concurrency);
    END IF;
    SELECT count(g.granted_at), count(*) - count(g.granted_at) INTO in_use, waiting
        FROM limit_grants g
        WHERE g.name = p_name AND g.released_at IS NULL AND g.expires_at > v_now;
    IF v_found AND v_granted IS NOT NULL AND v_released IS NULL THEN
        granted := true;  -- held already
        RETURN;
    END IF;
    IF v_paced IS NOT NULL AND v_paced > v_now THEN
        retry_at := v_paced;
        why := 'paced';
        RETURN;
    END IF;
    -- how many may be granted now: the free slots, and the room left in each window
    IF p_concurrency IS NOT NULL THEN
        v_free := p_concurrency - in_use;
    ELSE
        v_free := greatest(waiting, 1);
    END IF;
    IF v_free <= 0 THEN
        why := 'full';
        RETURN;
    END IF;
    FOR v_i IN 1..2 LOOP
        IF v_i = 1 THEN
            v_rate := trunc(p_per_second)::bigint;
            v_window := 1000000;
        ELSE
            v_rate := trunc(p_per_minute)::bigint;
            v_window := 60000000;
        END IF;
        CONTINUE WHEN v_rate IS NULL;
        SELECT array_agg(g.granted_at ORDER BY g.granted_at) INTO v_times
            FROM limit_grants g WHERE g.name = p_name AND g.granted_at >= v_now - v_window;
        seen := coalesce(cardinality(v_times), 0);
        IF v_rate - seen <= 0 THEN
            -- the window frees a place when its oldest grants leave it
            retry_at := v_times[seen - v_rate + 1] + v_window;
            why := 'rate';
            window_s := v_window / 1000000;
            RETURN;
        END IF;
        v_free := least(v_free, v_rate - seen);
    END LOOP;
    seen := NULL;
    IF waiting > 1 AND NOT EXISTS (
            SELECT 1 FROM (SELECT g.id FROM limit_grants g
                           WHERE g.name = p_name AND g.released_at IS NULL
                             AND g.expires_at > v_now AND g.granted_at IS NULL
                           ORDER BY g.requested_at, g.id LIMIT v_free) ahead
            WHERE ahead.id = p_id) THEN
        why := 'behind';  -- first come, first served
        RETURN;
    END IF;
    UPDATE limit_grants SET granted_at = v_now, expires_at = v_expires
        WHERE id = p_id AND granted_at IS NULL;
    granted := true;
    in_use := in_use + 1;
    waiting := waiting - 1;
END;
$body$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_FUNCTION)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS durable_flow_request_grant(text, text, text, text, "
                   "text, bigint, bigint, integer, double precision, double precision)")
