"""Checkpoint stores: the contract every store keeps, and the backends.

This folder's own modules are the contract (protocols, rows, the run state
machine, log segments, retention): the engine programs against them. Each backend
is a subpackage above it: ``sql/`` (the shared SQL base), ``sqlite/``,
``postgres/`` and ``memory/``.
"""
