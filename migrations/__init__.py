"""Alembic scripts of durable-flow's store schema, shipped as ``durable_flow._migrations``."""
