"""The public surface named in DESIGN.md is importable from ``durable_flow``."""

from __future__ import annotations

import enum
import inspect
import subprocess
import sys

import pytest

import durable_flow

# Every name DESIGN.md lists as importable from the package.
CONTRACT_NAMES = [
    "END", "Blackboard", "Command", "Message", "ToolCall", "NodeContext", "WorkflowBuilder",
    "Workflow", "Runtime", "MemoryStore", "SqliteStore", "PostgresStore", "RunStatus", "RunResult",
    "PendingRequest", "Snapshot", "CheckpointInfo", "CheckpointRef", "RunInfo", "Event",
    "ErrorInfo", "RetryPolicy", "add", "append", "merge", "ChatModel", "load_workflow",
    "DurableFlowError", "WorkflowValidationError", "WorkflowMismatchError", "InvalidInputError",
    "StateUpdateError", "ConflictingUpdateError", "SuperstepLimitError", "InvalidGotoError",
    "DuplicateStepError", "SubworkflowError", "RunFailedError", "RunNotFoundError",
    "InvalidResponseError", "UnknownRequestError", "SerializationError", "RunLockedError",
    "LeaseLostError", "Worker", "Send", "EventTimeoutError", "RequestTimeoutError",
    "ParkedTask",
]


def test_every_contract_name_is_importable_from_the_package() -> None:
    missing = [name for name in CONTRACT_NAMES
               if not hasattr(durable_flow, name) or name not in durable_flow.__all__]
    assert missing == []


def _isort_key(name: str) -> tuple[int, str]:
    # ruff's RUF022 order: CONSTANTS, then CamelCase, then the rest, each alphabetical
    kind = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return kind, name


def test_all_is_sorted_and_lists_every_public_name() -> None:
    exported = durable_flow.__all__
    assert exported == sorted(exported, key=_isort_key)
    assert len(set(exported)) == len(exported)
    # every name is imported on first use: the table of exports is __all__
    assert set(durable_flow._EXPORTS) == set(exported)
    public = {name for name in dir(durable_flow) if not name.startswith("_")}
    modules = {name for name in public if inspect.ismodule(getattr(durable_flow, name))}
    assert public - modules == set(exported)
    for name in exported:
        assert hasattr(durable_flow, name), name
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        durable_flow.Nope  # noqa: B018


@pytest.mark.process
def test_import_loads_no_dependency_until_a_name_is_used() -> None:
    code = ("import sys, durable_flow; "
            "print(sorted(m for m in sys.modules if m.startswith('durable_flow')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    # the version module is one constant, kept below every layer
    assert out.strip() == "['durable_flow', 'durable_flow._version']"


HEAVY = ("sqlalchemy", "sqlmodel", "alembic", "jsonschema", "rich", "typer", "httpx", "structlog",
         "durable_flow.agents", "durable_flow.cli", "durable_flow.building.declarative")


@pytest.mark.process
def test_the_core_names_leave_the_heavy_parts_unimported() -> None:
    code = ("import sys; from durable_flow import (Blackboard, MemoryStore, Runtime, "
            "WorkflowBuilder, Worker, END, RunStatus); "
            "print(' '.join(sorted(sys.modules)))")
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                check=True).stdout.split())
    assert [m for m in loaded if m.split(".")[0] in HEAVY or m.startswith(HEAVY)] == []


def test_every_public_name_and_method_has_a_docstring() -> None:
    undocumented = []
    for name in durable_flow.__all__:
        obj = getattr(durable_flow, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue  # constants such as END
        if not (obj.__doc__ or "").strip():
            undocumented.append(name)
        if inspect.isclass(obj) and obj.__module__.startswith("durable_flow"):
            for attr, member in vars(obj).items():
                if attr.startswith("_") or not inspect.isfunction(member):
                    continue
                if not (member.__doc__ or "").strip():
                    undocumented.append(f"{name}.{attr}")
    assert undocumented == []


def test_every_error_derives_from_durable_flow_error() -> None:
    for name in durable_flow.__all__:
        obj = getattr(durable_flow, name)
        if inspect.isclass(obj) and issubclass(obj, Exception):
            assert issubclass(obj, durable_flow.DurableFlowError), name


def test_run_status_is_a_str_enum_with_the_contract_values() -> None:
    rs = durable_flow.RunStatus
    assert issubclass(rs, str) and issubclass(rs, enum.Enum)
    assert {s.value for s in rs} == {"queued", "running", "waiting", "completed", "failed",
                                     "cancelled", "paused"}
    assert rs.WAITING == "waiting" and rs.QUEUED == "queued"
    assert rs("completed") is rs.COMPLETED
    assert isinstance(rs.FAILED, str)


def test_end_is_a_string_target() -> None:
    assert isinstance(durable_flow.END, str) and durable_flow.END
