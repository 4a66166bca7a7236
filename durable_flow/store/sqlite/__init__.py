"""The embedded store: the shared SQL base on one SQLite file."""
