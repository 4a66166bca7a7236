"""Schema revisions; alembic skips this file."""
