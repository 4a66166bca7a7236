"""durable-flow: durable multi-agent workflows on a typed blackboard.

A workflow is a graph of nodes sharing one ``Blackboard``; it runs in
supersteps and every superstep is committed to a checkpoint store, so runs
survive crashes, wait for people, and can be resumed or forked.

Every public name is importable from here. Each is imported on first use
(``from durable_flow import Runtime`` loads the runtime, not the agents, the
SQL stores or the command line), so ``import durable_flow`` costs almost
nothing; ``bench/imports.py`` measures it.
"""

import importlib as _importlib
import typing as _typing

from ._version import __version__ as __version__

# public name -> the private module that defines it (imported on first use)
_EXPORTS: dict[str, str] = {
    "Agent": "agents._agent",
    "ChatChunk": "agents._models",
    "ChatModel": "agents._models",
    "ChatResponse": "agents._models",
    "StreamingChatModel": "agents._models",
    "ToolSpec": "agents._models",
    "Usage": "agents._models",
    "OpenAIChatModel": "agents._openai",
    "tool": "agents._approval",
    "LangChainModel": "agents._providers",
    "PydanticAIModel": "agents._providers",
    "WorkflowBuilder": "building._builder",
    "ScheduleInfo": "model._schedules",
    "Limit": "runtime._limits",
    "Budget": "model._budget",
    "BudgetDecision": "model._budget",
    "RunUsage": "model._budget",
    "BudgetExceededError": "errors",
    "AuditError": "errors",
    "AuditReport": "model._audit",
    "to_mermaid": "building._diagram",
    "dump_workflow": "building.declarative._load",
    "load_workflow": "building.declarative._load",
    "NodeContext": "engine._context",
    "CheckpointCorruptedError": "errors",
    "CheckpointNotFoundError": "errors",
    "ConflictingUpdateError": "errors",
    "DuplicateStepError": "errors",
    "DurableFlowError": "errors",
    "EventTimeoutError": "errors",
    "ExpressionError": "errors",
    "GuardError": "errors",
    "InvalidGotoError": "errors",
    "InvalidInputError": "errors",
    "InvalidResponseError": "errors",
    "LeaseLostError": "errors",
    "InvalidLinkError": "errors",
    "ModelError": "errors",
    "NotAuthorizedError": "errors",
    "RequestTimeoutError": "errors",
    "RunExistsError": "errors",
    "RunFailedError": "errors",
    "RunLockedError": "errors",
    "RunNotFoundError": "errors",
    "RunNotResumableError": "errors",
    "SchemaVersionError": "errors",
    "SerializationError": "errors",
    "StateUpdateError": "errors",
    "StoreError": "errors",
    "SubworkflowError": "errors",
    "SuperstepLimitError": "errors",
    "UnknownRequestError": "errors",
    "WorkflowMismatchError": "errors",
    "WorkflowValidationError": "errors",
    "Approval": "model._effects",
    "InDoubtDecision": "model._effects",
    "NOT_DONE": "model._effects",
    "ToolDecision": "model._effects",
    "Policy": "model._approvals",
    "Principal": "model._approvals",
    "Blackboard": "model._blackboard",
    "Decision": "model._decisions",
    "END": "model._graph",
    "Command": "model._graph",
    "Workflow": "model._graph",
    "Message": "model._messages",
    "ToolCall": "model._messages",
    "CheckpointInfo": "model._records",
    "CheckpointRef": "model._records",
    "ErrorInfo": "model._records",
    "Event": "model._records",
    "ParkedTask": "model._records",
    "PendingRequest": "model._records",
    "RunInfo": "model._records",
    "RunResult": "model._records",
    "RunStatus": "model._records",
    "Snapshot": "model._records",
    "StreamEntry": "model._records",
    "add": "model._reducers",
    "append": "model._reducers",
    "merge": "model._reducers",
    "RetryPolicy": "model._retry",
    "Send": "model._send",
    "configure_logging": "runtime.observability._logging",
    "Notification": "runtime.notifications._notifiers",
    "Notifier": "runtime.notifications._notifiers",
    "SmtpNotifier": "runtime.notifications._notifiers",
    "WebhookNotifier": "runtime.notifications._notifiers",
    "Runtime": "runtime._runtime",
    "export_run": "runtime._transfer",
    "import_run": "runtime._transfer",
    "UpgradeProblem": "runtime._upgrade",
    "Worker": "runtime._worker",
    "MemoryStore": "store.memory._memory",
    "PostgresStore": "store.postgres._postgres",
    "CheckpointStore": "store._protocols",
    "SqliteStore": "store.sqlite._sqlite",
}

if _typing.TYPE_CHECKING:
    from .agents._agent import Agent
    from .agents._approval import tool
    from .agents._models import (
        ChatChunk,
        ChatModel,
        ChatResponse,
        StreamingChatModel,
        ToolSpec,
        Usage,
    )
    from .agents._openai import OpenAIChatModel
    from .agents._providers import LangChainModel, PydanticAIModel
    from .building._builder import WorkflowBuilder
    from .building._diagram import to_mermaid
    from .building.declarative._load import dump_workflow, load_workflow
    from .engine._context import NodeContext
    from .errors import (
        AuditError,
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
        InvalidLinkError,
        InvalidResponseError,
        LeaseLostError,
        ModelError,
        NotAuthorizedError,
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
    from .model._approvals import Policy, Principal
    from .model._audit import AuditReport
    from .model._blackboard import Blackboard
    from .model._decisions import Decision
    from .model._effects import NOT_DONE, Approval, InDoubtDecision, ToolDecision
    from .model._graph import END, Command, Workflow
    from .model._messages import Message, ToolCall
    from .model._records import (
        CheckpointInfo,
        CheckpointRef,
        ErrorInfo,
        Event,
        ParkedTask,
        PendingRequest,
        RunInfo,
        RunResult,
        RunStatus,
        Snapshot,
        StreamEntry,
    )
    from .model._reducers import add, append, merge
    from .model._retry import RetryPolicy
    from .model._schedules import ScheduleInfo
    from .model._send import Send
    from .runtime._limits import Limit
    from .runtime._runtime import Runtime
    from .runtime._transfer import export_run, import_run
    from .runtime._upgrade import UpgradeProblem
    from .runtime._worker import Worker
    from .runtime.notifications._notifiers import Notification, Notifier, SmtpNotifier, WebhookNotifier
    from .runtime.observability._logging import configure_logging
    from .store._protocols import CheckpointStore
    from .store.memory._memory import MemoryStore
    from .store.postgres._postgres import PostgresStore
    from .store.sqlite._sqlite import SqliteStore


def __getattr__(name: str) -> _typing.Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'durable_flow' has no attribute {name!r}")
    value = getattr(_importlib.import_module(f"durable_flow.{module}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "END",
    "NOT_DONE",
    "Agent",
    "Approval",
    "AuditError",
    "AuditReport",
    "Blackboard",
    "Budget",
    "BudgetDecision",
    "BudgetExceededError",
    "ChatChunk",
    "ChatModel",
    "ChatResponse",
    "CheckpointCorruptedError",
    "CheckpointInfo",
    "CheckpointNotFoundError",
    "CheckpointRef",
    "CheckpointStore",
    "Command",
    "ConflictingUpdateError",
    "Decision",
    "DuplicateStepError",
    "DurableFlowError",
    "ErrorInfo",
    "Event",
    "EventTimeoutError",
    "ExpressionError",
    "GuardError",
    "InDoubtDecision",
    "InvalidGotoError",
    "InvalidInputError",
    "InvalidLinkError",
    "InvalidResponseError",
    "LangChainModel",
    "LeaseLostError",
    "Limit",
    "MemoryStore",
    "Message",
    "ModelError",
    "NodeContext",
    "NotAuthorizedError",
    "Notification",
    "Notifier",
    "OpenAIChatModel",
    "ParkedTask",
    "PendingRequest",
    "Policy",
    "PostgresStore",
    "Principal",
    "PydanticAIModel",
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
    "RunUsage",
    "Runtime",
    "ScheduleInfo",
    "SchemaVersionError",
    "Send",
    "SerializationError",
    "SmtpNotifier",
    "Snapshot",
    "SqliteStore",
    "StateUpdateError",
    "StoreError",
    "StreamEntry",
    "StreamingChatModel",
    "SubworkflowError",
    "SuperstepLimitError",
    "ToolCall",
    "ToolDecision",
    "ToolSpec",
    "UnknownRequestError",
    "UpgradeProblem",
    "Usage",
    "WebhookNotifier",
    "Worker",
    "Workflow",
    "WorkflowBuilder",
    "WorkflowMismatchError",
    "WorkflowValidationError",
    "add",
    "append",
    "configure_logging",
    "dump_workflow",
    "export_run",
    "import_run",
    "load_workflow",
    "merge",
    "to_mermaid",
    "tool",
]
