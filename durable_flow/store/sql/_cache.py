"""The compiled statements of a dialect: read back from the statement cache, or compiled.

Compiling the statements (``_tables.py``, ``_wait_queries.py``) takes
SQLAlchemy, and importing SQLAlchemy and SQLModel is most of what opening a
store costs a short-lived process such as ``durable-flow runs``. So the
compiled statements of each dialect are kept in a small JSON file in the
user's cache directory, named by a digest of everything that decides their
SQL: this format, the dialect, durable-flow's version, the bytes of the
modules that define the tables and statements (:data:`SOURCES`, this one
included), and SQLAlchemy's and SQLModel's ``__init__.py`` (their versions).
A process that finds the file never imports SQLAlchemy to run statements.

The file is written atomically (a temporary file renamed over it) after the
statements it holds were read back and found identical, and it is checked
when read: the digest, a checksum of the body, the shape of every entry, and
(POSIX) that it belongs to this user and nobody else may write it. A file
that fails any check is ignored and written again; a directory that is
missing and cannot be made, or is not writable, only means compiling every
time. ``DURABLE_FLOW_CACHE_DIR`` names the directory (empty: no cache);
otherwise ``$XDG_CACHE_HOME/durable-flow``, else ``~/.cache/durable-flow``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import orjson

from ..._version import __version__
from ._statement import Statement

if TYPE_CHECKING:
    from ._approval_queries import ApprovalQueries
    from ._tables import Queries, SqlDialect
    from ._wait_queries import WaitQueries

__all__ = ["CACHE_ENV", "SOURCES", "CachedQueries", "cache_dir", "cache_file", "compile_all",
           "load_or_compile", "sql_dialect", "statements_for"]

#: The environment variable naming the cache directory (empty: no cache).
CACHE_ENV = "DURABLE_FLOW_CACHE_DIR"
#: The package's modules whose bytes decide the compiled SQL (paths from the package root).
#: Every module the statement modules import is here too (a test checks it).
SOURCES = ("store/sql/_cache.py", "store/sql/_statement.py", "store/sql/_schema.py",
           "store/sql/_tables.py", "store/sql/_wait_queries.py", "store/sql/_codec.py",
           "model/_records.py", "model/_budget.py", "store/sql/_approval_queries.py",
           "store/sql/_flow_queries.py")
_FORMAT = 1
_PACKAGE = Path(__file__).resolve().parent.parent.parent
_LIBRARIES = ("sqlalchemy", "sqlmodel")
_KEEP = 8  # files per dialect (other versions and checkouts sharing the directory)


@cache
def sql_dialect(name: str) -> SqlDialect:
    """The SQLAlchemy dialect statements are compiled for (imports SQLAlchemy)."""
    from ._tables import SqlDialect

    if name == "sqlite":
        from sqlalchemy.dialects import sqlite

        return SqlDialect(sqlite.dialect(), sqlite.insert)
    if name == "postgresql":
        from sqlalchemy.dialects import postgresql

        # asyncpg's dialect: ``$1`` parameters; SQLAlchemy leaves its constructor unannotated.
        return SqlDialect(postgresql.asyncpg.dialect(),  # type: ignore[no-untyped-call]
                          postgresql.insert, returning=True)
    raise ValueError(f"unknown SQL dialect {name!r}")


def compile_all(name: str) -> tuple[Queries, WaitQueries, ApprovalQueries]:
    """Every statement of a dialect, compiled now (shared within the process)."""
    from ._approval_queries import compiled_approvals
    from ._tables import queries_for
    from ._wait_queries import compiled_waits

    dialect = sql_dialect(name)
    return queries_for(dialect), compiled_waits(dialect), compiled_approvals(dialect)


class CachedQueries:
    """The statements of :class:`~durable_flow.store.sql._tables.Queries`, read back.

    It has the same attributes, and ``waits`` (the wait statements, which
    :func:`~durable_flow.store.sql._waits.waits_of` takes from it).
    """

    def __init__(self, name: str, attrs: dict[str, Any], waits: dict[str, Any],
                 approvals: dict[str, Any]) -> None:
        self.__dict__.update(attrs)
        self.waits = _Namespace(waits)
        self.approvals = _Namespace(approvals)  # taken by _decisions.approvals_of
        self._name = name

    @property
    def dialect(self) -> SqlDialect:
        """The SQLAlchemy dialect, as ``Queries.dialect`` (imports SQLAlchemy)."""
        return sql_dialect(self._name)


class _Namespace:
    def __init__(self, attrs: dict[str, Any]) -> None:
        self.__dict__.update(attrs)


@cache
def statements_for(name: str) -> Queries:
    """The statements of dialect ``name`` (the first call of the process reads or compiles)."""
    return load_or_compile(name)


def load_or_compile(name: str) -> Queries:
    """The statements of dialect ``name``: from the cache file, else compiled (and cached)."""
    where = _located(name)
    if where is not None:
        found = _read(*where)
        if found is not None:
            return cast("Queries", CachedQueries(name, found["queries"], found["waits"],
                                                 found["approvals"]))
    queries, waits, approvals = compile_all(name)
    if where is not None:
        _write(*where, {"queries": {k: v for k, v in vars(queries).items() if k != "dialect"},
                        "waits": dict(vars(waits)), "approvals": dict(vars(approvals))})
    return queries


# -- where, and under which key ----------------------------------------------------------


def cache_dir() -> Path | None:
    """The directory of the statement cache, or None when there is none."""
    named = os.environ.get(CACHE_ENV)
    if named is not None:
        return Path(named).expanduser() if named else None
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):
        return Path(xdg) / "durable-flow"
    try:
        return Path.home() / ".cache" / "durable-flow"
    except RuntimeError:  # no home directory
        return None


def cache_file(name: str) -> Path | None:
    """The cache file of dialect ``name`` for this code and these libraries.

    None when there is no cache directory, or no key: sources that cannot be
    read (an install without them) are never cached.
    """
    where = _located(name)
    return None if where is None else where[0]


def _located(name: str) -> tuple[Path, str] | None:
    """The cache file and the key it must hold."""
    folder = cache_dir()
    key = None if folder is None else _digest(name)
    if folder is None or key is None:
        return None
    return folder / f"sql-{name}-{key[:24]}.json", key


@cache
def _digest(name: str) -> str | None:
    try:
        return _hash_sources(name)
    except (OSError, ImportError, ValueError):
        return None


def _hash_sources(name: str) -> str:
    h = hashlib.sha256()

    def part(data: bytes) -> None:
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)

    for text in (str(_FORMAT), name, __version__):
        part(text.encode())
    for source in SOURCES:
        part(source.encode())
        part((_PACKAGE / source).read_bytes())
    for library in _LIBRARIES:
        spec = importlib.util.find_spec(library)
        part(library.encode())
        part(Path(spec.origin).read_bytes() if spec is not None and spec.origin else b"")
    return h.hexdigest()


# -- reading and writing ------------------------------------------------------------------


def _read(path: Path, key: str) -> dict[str, dict[str, Any]] | None:
    """The file's statements if every check passes, else None."""
    try:
        with open(path, "rb") as f:
            if hasattr(os, "getuid"):
                st = os.fstat(f.fileno())
                if st.st_uid != os.getuid() or st.st_mode & 0o022:
                    return None
            data = f.read()
        head, _, body = data.partition(b"\n")
        header = orjson.loads(head)
        if header != {"format": _FORMAT, "key": key,
                      "sha256": hashlib.sha256(body).hexdigest()}:
            return None
        return _decode_body(orjson.loads(body))
    except (OSError, ValueError, TypeError, RecursionError):  # JSONDecodeError is a ValueError
        return None


def _write(path: Path, key: str, groups: dict[str, dict[str, Any]]) -> None:
    """Write the cache file atomically, only if it reads back identical; never raises."""
    try:
        body = orjson.dumps({group: {k: _encode(v) for k, v in attrs.items()}
                             for group, attrs in groups.items()})
        if not _same(_decode_body(orjson.loads(body)), groups):
            return
    except (ValueError, TypeError):  # a value JSON cannot carry exactly: compile every time
        return
    header = orjson.dumps({"format": _FORMAT, "key": key,
                           "sha256": hashlib.sha256(body).hexdigest()})
    import tempfile

    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(header + b"\n" + body)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
        _prune(path)
    except OSError:
        return


def _prune(path: Path) -> None:
    """Keep the newest files of a dialect (other versions may share the directory)."""
    pattern = path.name[:path.name.rindex("-")] + "-*.json"
    files = sorted(path.parent.glob(pattern), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in files[_KEEP:]:
        old.unlink(missing_ok=True)


# -- the format: JSON with tags for statements, tuples and dicts ---------------------------


def _encode(value: Any) -> Any:
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if kind is Statement:
        return {"$stmt": [value.sql, _encode(value.names), _encode(value.constants),
                          _encode(value.columns)]}
    if kind is tuple:
        return {"$tuple": [_encode(v) for v in value]}
    if kind is list:
        return [_encode(v) for v in value]
    if kind is dict:
        return {"$dict": [[_encode(k), _encode(v)] for k, v in value.items()]}
    raise TypeError(f"the statement cache cannot hold {kind.__name__}")


def _decode(value: Any) -> Any:
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if kind is list:
        return [_decode(v) for v in value]
    if kind is dict and len(value) == 1:
        ((tag, inner),) = value.items()
        if type(inner) is list:
            if tag == "$stmt" and len(inner) == 4:
                return _statement(*(_decode(v) for v in inner))
            if tag == "$tuple":
                return tuple(_decode(v) for v in inner)
            if tag == "$dict" and all(type(p) is list and len(p) == 2 for p in inner):
                return {_decode(k): _decode(v) for k, v in inner}
    raise ValueError("not a statement cache entry")


def _statement(sql: object, names: object, constants: object, columns: object) -> Statement:
    if not (type(sql) is str and _strings(names) and _strings(columns) and type(constants) is dict
            and all(type(k) is str for k in constants)):
        raise ValueError("not a statement")
    return Statement(sql, cast("tuple[str, ...]", names), constants,
                     cast("tuple[str, ...]", columns))


def _strings(value: object) -> bool:
    return type(value) is tuple and all(type(v) is str for v in value)


def _decode_body(body: Any) -> dict[str, dict[str, Any]]:
    if type(body) is not dict or set(body) != {"queries", "waits", "approvals"}:
        raise ValueError("not a statement cache")
    out: dict[str, dict[str, Any]] = {}
    for group, attrs in body.items():
        if type(attrs) is not dict:
            raise ValueError("not a statement cache")
        out[group] = {k: _decode(v) for k, v in attrs.items()}
    return out


def _same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (``True`` is not ``1`` here)."""
    if type(a) is not type(b):
        return False
    if type(a) is Statement:
        return all(_same(getattr(a, f), getattr(b, f))
                   for f in ("sql", "names", "constants", "columns"))
    if type(a) in (tuple, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is dict:
        return len(a) == len(b) and all(
            _same(ka, kb) and _same(va, vb)
            for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True))
    return bool(a == b)
