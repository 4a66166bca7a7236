"""Checkpoint stores: the small protocols, the shared SQL base, SQLite, memory."""
