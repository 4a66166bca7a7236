"""The PostgreSQL store: the shared SQL base on asyncpg, with its one-round-trip commits and reads."""
