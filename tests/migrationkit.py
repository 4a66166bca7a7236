"""Take a SQLite test database back to an older schema revision with the migrations' own downgrades.

A test of an upgrade builds a database with today's code, goes back to the revision
it starts from, and opens it again: the migrations after that revision run as they
would on a user's file. Going back with alembic (not hand-dropped columns) keeps such
tests right whatever migrations are added later.
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from durable_flow.store.sql._migrate import script_location


def downgrade_sqlite(db: Path, revision: str) -> None:
    """Run the downgrades of every migration after ``revision`` on the SQLite file ``db``."""
    engine = sa.create_engine(f"sqlite:///{db}")
    try:
        with engine.begin() as connection:
            config = Config()
            config.set_main_option("script_location", str(script_location()))
            config.attributes["connection"] = connection
            command.downgrade(config, revision)
    finally:
        engine.dispose()
