"""Alembic environment of durable-flow's store schema.

The stores migrate programmatically: they hand a connection, already inside
their own transaction, to ``config.attributes["connection"]`` (see
``durable_flow/store/sql/_migrate.py``). Without one, the ``alembic`` command line
connects to ``sqlalchemy.url``.

Logging is left alone on purpose: the template's ``fileConfig`` call would
replace the configuration of the application that opens the store.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine, pool

from durable_flow.store.sql._tables import METADATA

config = context.config


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=METADATA,
        # SQLite cannot ALTER most things: autogenerate batch (copy-and-move) ops.
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=METADATA,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    given = config.attributes.get("connection")
    if given is not None:
        _run(given)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("set sqlalchemy.url (or pass a connection) to run migrations")
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            _run(connection)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
