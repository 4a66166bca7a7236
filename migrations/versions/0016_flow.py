"""Schedules and flow control: cron schedules, named limits and their grants.

Revision ID: 0016
Revises: 0014
Create Date: 2026-12-02

``schedules`` holds each cron schedule and its next tick not started yet;
``limits`` has one row per named limit (locked while a grant is decided, and
the time a provider asked everyone to slow down until); ``limit_grants``
records each task's use of a limit, waiting, held or released, under a lease.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("schedule_id", sa.String(), primary_key=True, nullable=False),
        sa.Column("workflow_name", sa.String(), nullable=False),
        sa.Column("workflow_version", sa.String(), nullable=False),
        sa.Column("cron", sa.String(), nullable=False),
        sa.Column("timezone", sa.String(), nullable=False),
        sa.Column("catch_up", sa.String(), nullable=False),
        sa.Column("input", sa.Text(), nullable=False),
        sa.Column("labels", sa.Text(), nullable=False),
        sa.Column("paused", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("next_tick", sa.BigInteger(), nullable=False),
        sa.Column("last_tick", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_schedules_due", "schedules", ["paused", "next_tick"])
    op.create_table(
        "limits",
        sa.Column("name", sa.String(), primary_key=True, nullable=False),
        sa.Column("paced_until", sa.BigInteger(), nullable=True),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "limit_grants",
        sa.Column("id", sa.String(), primary_key=True, nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("task", sa.String(), nullable=False),
        sa.Column("owner", sa.String(), nullable=False),
        sa.Column("requested_at", sa.BigInteger(), nullable=False),
        sa.Column("granted_at", sa.BigInteger(), nullable=True),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.Column("released_at", sa.BigInteger(), nullable=True),
        sa.Column("capacity", sa.Integer(), nullable=True),
    )
    op.create_index("ix_grants_live", "limit_grants", ["name", "released_at", "expires_at"])
    op.create_index("ix_grants_rate", "limit_grants", ["name", "granted_at"])
    op.create_index("ix_grants_run", "limit_grants", ["run_id"])


def downgrade() -> None:
    op.drop_table("limit_grants")
    op.drop_table("limits")
    op.drop_table("schedules")
