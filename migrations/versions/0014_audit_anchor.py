"""The audit chain's anchor on the run row.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02

``runs.audit_count`` and ``runs.audit_head`` are the number of the run's
decisions and the digest of its last one, written in the transaction of
every decision, so deleting the newest decisions (or all of them) is caught;
``runs.audit_root`` is the digest the chain starts from (``""``; a fork's
source head). Existing runs are anchored at the decisions they hold.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("audit_count", sa.Integer(), nullable=False,
                                   server_default="0"))
        batch.add_column(sa.Column("audit_head", sa.Text(), nullable=False, server_default=""))
        batch.add_column(sa.Column("audit_root", sa.Text(), nullable=False, server_default=""))
    op.execute(
        "UPDATE runs SET"
        " audit_count = (SELECT max(d.seq) FROM decisions d WHERE d.run_id = runs.run_id),"
        " audit_head = (SELECT d.digest FROM decisions d WHERE d.run_id = runs.run_id"
        "  AND d.seq = (SELECT max(e.seq) FROM decisions e WHERE e.run_id = runs.run_id))"
        " WHERE EXISTS (SELECT 1 FROM decisions d WHERE d.run_id = runs.run_id)")


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("audit_root")
        batch.drop_column("audit_head")
        batch.drop_column("audit_count")
