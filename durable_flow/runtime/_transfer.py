"""A run as one JSON document: ``export_run`` / ``import_run`` (``durable-flow export/import``).

The document holds every stored row of the run, so a run moves between
stores (SQLite to PostgreSQL and back) or goes with a bug report, and loads
back exactly: every checkpoint (sub-workflows included), log segment,
request (answered or open, timers and event waits too), recorded step,
saved task write and mailbox event, and the run's graph description::

    {"format": "durable-flow run", "version": 1, "run_id": "...",
     "exported_at": "2026-...Z",
     "tables": {"runs": [...], "checkpoints": [...], "channel_values": [...],
                "log_chunks": [...], "task_writes": [...], "steps": [...],
                "requests": [...], "mailbox": [...], "graphs": [...]}}

Each row maps column names to values as stored: times are microseconds
since the epoch (UTC), JSON text columns stay strings, and payload columns
(bytes holding JSON) are the JSON itself, or ``{"$bytes": BASE64}`` when it
would not come back byte for byte. The lease is not exported: an imported
run that was executing is ``running`` without a holder, resumable at once.

Trust: with ``DURABLE_FLOW_SECRET`` set, ``export`` signs the document
(``"signature"``, an HMAC over the rest); ``import`` checks the signature,
reads every row back as the store would, checks references, the decision
chain from its anchor and the answers' decisions (``_import_checks.py``),
and writes nothing unless all of it holds. An imported run's recorded
``workflow_ref`` (``MODULE:WORKFLOW``) is dropped unless
``keep_workflow_refs=True``: a document must never name code that later
commands import.

A JSON null stored in a payload column is written as ``{"$bytes": ...}``
where the column may hold SQL NULL (``requests.answer``), so the two stay
apart; in a column that may not, a null reads back as the JSON null.

``version`` changes only when a table's meaning changes. A nullable column
is added without a new version (a row without it reads it as null: the
checkpoints' ``digests``, migration 0011; the run row's audit anchor, migration
0014, taken from the chain as it is when absent), and so is a table: an importer
refuses a table it does not know that has rows, and reads a table missing
from the document as empty. So the
approvals' ``decisions`` will be one more key of ``tables``, and documents
without decisions keep importing everywhere. An importer refuses a newer
``version``, and a row of another run (a document only ever writes its own
run, and the graph its run names).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from typing import Any

import orjson

from ..errors import InvalidInputError, RunNotFoundError
from ..model._approvals import Principal, principal_of
from ..model._audit import SECRET_ENV, audit_key
from ..model._clock import utcnow
from ..model._decisions import DecisionVia
from ..model._records import RunInfo
from ..store._approval_rows import DecisionDraft
from ..store._protocols import CheckpointStore, RunRows, Transfer
from ._import_checks import SIGNATURE, check_rows, check_signature, sign
from ._inspect import Inspector

__all__ = ["FORMAT", "VERSION", "export_run", "import_run"]

FORMAT = "durable-flow run"
VERSION = 1
_BYTES = "$bytes"
_TYPES: dict[str, type] = {"bool": bool, "int": int, "str": str, "bytes": bytes}
_UNHELD = {"lease_owner": None, "lease_expires_at": None, "claim_token": None}
_AUDIT = ("audit_count", "audit_head", "audit_root")


def _transfer(store: CheckpointStore) -> Transfer:
    if not isinstance(store, Transfer):
        raise InvalidInputError(f"{type(store).__name__} cannot export or import runs "
                                "(SqliteStore and PostgresStore can)")
    return store


async def export_run(store: CheckpointStore, run_id: str, *,
                     secret: str | None = None) -> dict[str, Any]:
    """The run ``run_id`` as one JSON-ready document (see the module); ``RunNotFoundError``.

    Signed under ``secret`` (default ``DURABLE_FLOW_SECRET``; unsigned when neither is set).
    """
    rows = await _transfer(store).export_rows(run_id)
    if rows is None:
        raise RunNotFoundError(run_id)
    from ..store.sql._transfer import columns

    tables = {}
    for name, found in rows.tables.items():
        binary = {col: nullable for col, kind, nullable in columns(name) if kind == "bytes"}
        tables[name] = [{k: _payload_out(v, binary[k]) if k in binary else v
                         for k, v in row.items()} for row in found]
    tables["runs"] = [{**row, **_UNHELD} for row in tables["runs"]]
    document = {"format": FORMAT, "version": VERSION, "run_id": run_id,
                "exported_at": utcnow().isoformat().replace("+00:00", "Z"), "tables": tables}
    key = secret if secret is not None else os.environ.get(SECRET_ENV)
    if key:
        # signed over the JSON the document becomes (a payload's floats, ...)
        document = orjson.loads(orjson.dumps(document))
        document[SIGNATURE] = sign(document, key)
    return document


def _payload_out(value: Any, nullable: bool) -> Any:
    if not isinstance(value, bytes):
        return value
    try:
        parsed = orjson.loads(value)
    except orjson.JSONDecodeError:
        parsed = None
    exact = orjson.dumps(parsed) == value and not (isinstance(parsed, dict) and _BYTES in parsed)
    if parsed is None and nullable:  # a JSON null, not the SQL NULL the column may hold
        exact = False
    return parsed if exact else {_BYTES: base64.b64encode(value).decode()}


async def import_run(store: CheckpointStore, document: Mapping[str, Any], *,
                     secret: str | None = None, unsigned: bool = False,
                     keep_workflow_refs: bool = False, by: Principal | str | None = None,
                     via: DecisionVia = "api") -> RunInfo:
    """Write a run exported by :func:`export_run` into ``store``, in one transaction.

    Checks the whole document first (``InvalidInputError``: another format,
    a newer version, an unknown table with rows, a row of another run, a
    column missing, unknown or of the wrong type, a row the store could not
    read back, a reference to a checkpoint not in the document, a decision
    chain or answer that does not verify, a signature that does not match;
    with ``secret`` (default ``DURABLE_FLOW_SECRET``) set, an unsigned
    document unless ``unsigned``). The run's recorded ``workflow_ref`` is
    dropped unless ``keep_workflow_refs``. The import is recorded in the
    run's audit chain (a decision of kind ``"import"``, ``by``, ``via``, in
    the same transaction). Raises ``RunExistsError`` when the run id is
    taken, writing nothing. Returns the imported run.
    """
    target = _transfer(store)
    key = secret if secret is not None else os.environ.get(SECRET_ENV)
    run_id, tables, audited = _checked(document)
    signed = check_signature(document, key or None, unsigned=unsigned)
    check_rows(run_id, tables, audit_key(key) if key else None, audited, unsigned=unsigned)
    ref = tables["runs"][0]["workflow_ref"] if keep_workflow_refs else None
    tables["runs"] = [{**row, "workflow_ref": ref} for row in tables["runs"]]
    who = principal_of(by)
    noted = {"signed": signed, "exported_at": document.get("exported_at"), "workflow_ref": ref}
    decision = DecisionDraft("", "", "import", noted, None if who is None else who.id, via,
                             utcnow(), None, {**noted, "signature": document.get(SIGNATURE)})
    await target.import_rows(RunRows(run_id, tables, decision))
    record = await store.get_run(run_id)
    if record is None:  # pragma: no cover - the insert just committed it
        raise RunNotFoundError(run_id)
    return Inspector(store).info(record)


def _checked(document: Mapping[str, Any]) -> tuple[str, dict[str, list[dict[str, object]]], bool]:
    """The run id and the rows, decoded and checked; nothing is written before this passes."""
    if not isinstance(document, Mapping) or document.get("format") != FORMAT:
        raise InvalidInputError(f"not an exported run: its format is not {FORMAT!r}")
    version, run_id, given = document.get("version"), document.get("run_id"), \
        document.get("tables")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InvalidInputError(f"an exported run's version is a positive int, got {version!r}")
    if version > VERSION:
        raise InvalidInputError(f"this run was exported by a newer durable-flow (document "
                                f"version {version}); this one reads up to version {VERSION}")
    if not isinstance(run_id, str) or not run_id or not isinstance(given, Mapping):
        raise InvalidInputError("an exported run needs a run_id and its tables")
    from ..store.sql._transfer import RUN_TABLES

    known = (*RUN_TABLES, "graphs")
    runs = given.get("runs")
    audited = isinstance(runs, list) and all(
        isinstance(r, Mapping) and all(c in r for c in _AUDIT) for r in runs)
    for name, rows in given.items():
        if name not in known and rows:
            raise InvalidInputError(f"table {name!r} is unknown to this durable-flow; "
                                    "import it with the version that exported it")
    tables = {name: [_row(name, run_id, row) for row in _rows(given.get(name, []), name)]
              for name in known}
    if len(tables["runs"]) != 1:
        raise InvalidInputError(f"an exported run holds one row of runs, got "
                                f"{len(tables['runs'])}")
    signature = tables["runs"][0]["signature"]
    if any(g["signature"] != signature for g in tables["graphs"]):
        raise InvalidInputError("an exported run holds only the graph of its own signature")
    return run_id, tables, audited


def _rows(value: Any, table: str) -> list[Any]:
    if not isinstance(value, list):
        raise InvalidInputError(f"table {table!r} must be a list of rows")
    return value


def _row(table: str, run_id: str, row: Any) -> dict[str, object]:
    """One row decoded for its table: every column there, of its type, and of this run."""
    from ..store.sql._transfer import columns

    cols = columns(table)
    if isinstance(row, Mapping):  # a nullable column added since (``digests``) may be absent
        row = {**{name: None for name, _, nullable in cols if nullable and name not in row}, **row}
        if table == "runs":  # so may the audit anchor (0014): taken from the chain instead
            row = {**dict(zip(_AUDIT, (0, "", ""), strict=True)), **row}
    if not isinstance(row, Mapping) or set(row) != {name for name, _, _ in cols}:
        names = sorted(set(row) ^ {n for n, _, _ in cols}) if isinstance(row, Mapping) else []
        raise InvalidInputError(f"a row of {table!r} does not have its columns "
                                f"(missing or unknown: {', '.join(names) or 'not a row'})")
    out: dict[str, object] = {}
    for name, kind, nullable in cols:
        out[name] = _value(table, name, kind, nullable, row[name])
    if table != "graphs" and out["run_id"] != run_id:
        raise InvalidInputError(f"a row of {table!r} belongs to run {out['run_id']!r}, "
                                f"not to {run_id!r}")
    return out


def _value(table: str, name: str, kind: str, nullable: bool, value: Any) -> object:
    if value is None:
        if nullable:
            return None
        if kind == "bytes":  # a payload that is the JSON null (a field set to None)
            return b"null"
    elif kind == "bytes":
        try:
            if isinstance(value, Mapping) and set(value) == {_BYTES}:
                return base64.b64decode(str(value[_BYTES]), validate=True)
            return orjson.dumps(value)
        except (ValueError, TypeError) as exc:
            raise InvalidInputError(f"column {table}.{name} cannot be stored: {exc}") from None
    elif kind == "float":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif isinstance(value, _TYPES[kind]) and (kind == "bool" or not isinstance(value, bool)):
        return value
    raise InvalidInputError(f"column {table}.{name} holds {value!r}, not a {kind}"
                            + ("" if nullable else " (it may not be null)"))
