"""``db prune --dry-run`` and giving pruned space back to the file system."""

from __future__ import annotations

import contextlib
import sqlite3
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

from ..model._clock import utcnow
from ..model._records import RunStatus
from ..runtime._runtime import Runtime
from ..store._retention import Key, Scanned, doomed
from ._db import parse_db
from ._support import CliError

__all__ = ["plan_prune", "reclaim_disk"]


async def plan_prune(rt: Runtime, run_id: str | None, keep_last: int | None,
                     older_than: timedelta | None) -> int:
    """How many checkpoints ``prune`` would remove now, by the rule every store applies."""
    cutoff = utcnow() - older_than if older_than is not None else None
    runs = [run_id] if run_id is not None else [r.run_id for r in await rt.list_runs()]
    threads: dict[Key, list[Scanned]] = defaultdict(list)
    for run in runs:
        metas = await rt.store.list_checkpoints(run)
        for meta in sorted(metas, key=lambda m: (m.thread, m.seq)):
            old = cutoff is None or meta.created_at < cutoff
            threads[(run, meta.thread)].append(Scanned(
                run_id=run, thread=meta.thread, id=meta.id, old=old,
                completed=meta.status is RunStatus.COMPLETED,
                parked=tuple(p.anchor for p in meta.parked)))
    open_at = {(r.run_id, r.checkpoint_id) for r in await rt.store.pending_requests()
               if run_id is None or r.run_id == run_id}
    return len(doomed(threads, open_at, keep_last))


def reclaim_disk(db: str) -> tuple[int, int] | None:
    """VACUUM a SQLite database; its size before and after (None for PostgreSQL).

    Deleting rows only marks pages free inside the file; VACUUM rewrites it
    without them (and the write-ahead log is truncated first).
    """
    kind, target = parse_db(db)
    if kind != "sqlite":
        return None
    path = Path(target).expanduser()
    before = _size(path)
    conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.OperationalError as exc:
        raise CliError(f"checkpoints were removed, but {path} could not be compacted "
                       f"({exc}); run `db prune` again when it is idle") from None
    finally:
        with contextlib.suppress(sqlite3.Error):
            conn.close()
    return before, _size(path)


def _size(path: Path) -> int:
    """The database's bytes on disk, its write-ahead log included."""
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
