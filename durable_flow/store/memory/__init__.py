"""The in-memory store: the shared SQL base over an in-memory SQLite database."""
