"""Who started a run, and the roles that operate and read it.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02

``runs`` gains ``started_by`` (the principal id ``by=`` of ``run``,
``submit`` or ``fork`` named; NULL: not named) and ``access`` (JSON text
``{"operators": [...], "viewers": [...]}``, the workflow's role names as
they were when the run started; NULL: none). The web app and the API read
them to decide who may see and change the run (``model/_access.py``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # plain ADD COLUMN (nullable, no default): SQLite need not copy the table
    op.add_column("runs", sa.Column("started_by", sa.String(), nullable=True))
    op.add_column("runs", sa.Column("access", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("access")
        batch.drop_column("started_by")
