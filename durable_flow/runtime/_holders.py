"""Whether a lease's holder is a process of this machine that no longer exists.

Runtimes and workers name themselves ``[worker:]HOST:PID:RANDOM``. A store whose
holders all run on one machine (``holders_on_this_host``: a SQLite file) lets a
claim take a live lease whose holder is a process of this host that is gone
(``kill -9``): waiting out its lease protects nothing, since a dead process
writes nothing. A pid that is alive again (reused) or that this process may
not signal counts as alive, so the rule can only make a takeover wait, never
let two live processes overlap.
"""

from __future__ import annotations

import os
import socket
from datetime import datetime

from ..store._protocols import CheckpointStore, RunRecord

__all__ = ["dead_holder", "holder_is_gone"]


def holder_is_gone(owner: str, *, host: str | None = None) -> bool:
    """True when ``owner`` names a process of this host (or ``host``) that is gone."""
    parts = owner.split(":")
    if len(parts) < 3 or not parts[-2].isdigit():
        return False
    holder_host, pid = parts[-3], int(parts[-2])
    if holder_host != (host or socket.gethostname()) or pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, another user's (PermissionError), or unknowable
        return False
    return False


def dead_holder(store: CheckpointStore, record: RunRecord, now: datetime) -> str | None:
    """The holder of ``record``'s live lease when a claim may take it at once, else None."""
    owner, expires = record.lease_owner, record.lease_expires_at
    if owner is None or expires is None or expires <= now:
        return None
    if not getattr(store, "holders_on_this_host", False):
        return None
    return owner if holder_is_gone(owner) else None
