"""durable-flow: durable multi-agent workflows on a typed blackboard.

A workflow is a graph of nodes sharing one ``Blackboard``; it runs in
supersteps and every superstep is committed to a checkpoint store, so runs
survive crashes, wait for people, and can be resumed or forked.
"""

import typing as _typing

from .agents._agent import Agent
from .agents._models import ChatModel, ChatResponse, OpenAIChatModel, ToolSpec, Usage
from .build._builder import WorkflowBuilder
from .build._diagram import to_mermaid
from .build.declarative._load import dump_workflow, load_workflow
from .engine._context import NodeContext
from .errors import (
    CheckpointCorruptedError,
    CheckpointNotFoundError,
    ConflictingUpdateError,
    DuplicateStepError,
    DurableFlowError,
    EventTimeoutError,
    ExpressionError,
    GuardError,
    InvalidGotoError,
    InvalidInputError,
    InvalidResponseError,
    LeaseLostError,
    ModelError,
    RequestTimeoutError,
    RunExistsError,
    RunFailedError,
    RunLockedError,
    RunNotFoundError,
    RunNotResumableError,
    SchemaVersionError,
    SerializationError,
    StateUpdateError,
    StoreError,
    SubworkflowError,
    SuperstepLimitError,
    UnknownRequestError,
    WorkflowMismatchError,
    WorkflowValidationError,
)
from .model._blackboard import Blackboard
from .model._graph import END, Command, Workflow
from .model._messages import Message, ToolCall
from .model._records import (
    CheckpointInfo,
    CheckpointRef,
    ErrorInfo,
    Event,
    PendingRequest,
    RunInfo,
    RunResult,
    RunStatus,
    Snapshot,
)
from .model._reducers import add, append, merge
from .model._retry import RetryPolicy
from .runtime._logging import configure_logging
from .runtime._runtime import Runtime
from .runtime._worker import Worker
from .store._memory import MemoryStore
from .store._protocols import CheckpointStore

if _typing.TYPE_CHECKING:
    from .store._postgres import PostgresStore
    from .store._sqlite import SqliteStore

__version__ = "0.1.0"


def __getattr__(name: str) -> _typing.Any:
    # the SQL stores pull in SQLAlchemy and alembic: import them on first use
    # (and PostgresStore imports asyncpg only when one is created)
    if name == "SqliteStore":
        from .store._sqlite import SqliteStore

        return SqliteStore
    if name == "PostgresStore":
        from .store._postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module 'durable_flow' has no attribute {name!r}")

__all__ = [
    "END",
    "Agent",
    "Blackboard",
    "ChatModel",
    "ChatResponse",
    "CheckpointCorruptedError",
    "CheckpointInfo",
    "CheckpointNotFoundError",
    "CheckpointRef",
    "CheckpointStore",
    "Command",
    "ConflictingUpdateError",
    "DuplicateStepError",
    "DurableFlowError",
    "ErrorInfo",
    "Event",
    "EventTimeoutError",
    "ExpressionError",
    "GuardError",
    "InvalidGotoError",
    "InvalidInputError",
    "InvalidResponseError",
    "LeaseLostError",
    "MemoryStore",
    "Message",
    "ModelError",
    "NodeContext",
    "OpenAIChatModel",
    "PendingRequest",
    "PostgresStore",
    "RequestTimeoutError",
    "RetryPolicy",
    "RunExistsError",
    "RunFailedError",
    "RunInfo",
    "RunLockedError",
    "RunNotFoundError",
    "RunNotResumableError",
    "RunResult",
    "RunStatus",
    "Runtime",
    "SchemaVersionError",
    "SerializationError",
    "Snapshot",
    "SqliteStore",
    "StateUpdateError",
    "StoreError",
    "SubworkflowError",
    "SuperstepLimitError",
    "ToolCall",
    "ToolSpec",
    "UnknownRequestError",
    "Usage",
    "Worker",
    "Workflow",
    "WorkflowBuilder",
    "WorkflowMismatchError",
    "WorkflowValidationError",
    "add",
    "append",
    "configure_logging",
    "dump_workflow",
    "load_workflow",
    "merge",
    "to_mermaid",
]
