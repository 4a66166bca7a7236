"""Identifiers: time-sortable uuid7 strings for runs and checkpoints."""

from __future__ import annotations

from typing import NewType

import uuid6

RunId = NewType("RunId", str)
CheckpointId = NewType("CheckpointId", str)


def new_id() -> str:
    """Return a new time-sortable id (uuid7, canonical text form)."""
    return str(uuid6.uuid7())


def new_run_id() -> RunId:
    """Return a new run id."""
    return RunId(new_id())


def new_checkpoint_id() -> CheckpointId:
    """Return a new checkpoint id; ids sort in creation order."""
    return CheckpointId(new_id())
