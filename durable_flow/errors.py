"""Every error durable-flow raises.

One root, :class:`DurableFlowError`; each error carries structured fields as
well as a readable message::

    DurableFlowError
    ├── WorkflowValidationError        build() found problems (.problems)
    │   └── ExpressionError            a condition string does not parse
    ├── WorkflowMismatchError          resumed with a different graph
    ├── InvalidInputError              bad input or arguments (also a ValueError)
    ├── StateUpdateError               a node wrote an unknown/ill-typed field
    ├── ConflictingUpdateError         two nodes wrote one last-write-wins field
    ├── SuperstepLimitError            max_supersteps reached
    ├── InvalidGotoError               Command(goto=...) to an undeclared target
    ├── DuplicateStepError             ctx.step name used twice in one node run
    ├── GuardError                     a guard transform's predicate was false
    ├── SubworkflowError               a nested workflow failed
    ├── RunFailedError                 RunResult.raise_for_status()
    ├── RunNotFoundError               unknown run id
    ├── CheckpointNotFoundError        unknown checkpoint id
    ├── RunNotResumableError           run is completed / cancelled
    ├── InvalidResponseError           an answer does not fit the request type
    ├── UnknownRequestError            an answer to a request that is not pending
    ├── NotAuthorizedError             this principal may not answer (or do) that
    ├── InvalidLinkError               an approval link is expired, used, altered or foreign
    ├── AuditError                     a run's audit trail does not hold what it acts on
    ├── RequestTimeoutError            ctx.request's deadline passed unanswered
    ├── EventTimeoutError              ctx.wait_event's timeout passed first
    ├── StoreError                     the checkpoint store failed
    │   ├── SerializationError         a value cannot be stored
    │   ├── CheckpointCorruptedError   a stored row cannot be read back
    │   ├── SchemaVersionError         the database is newer than this code
    │   ├── RunExistsError             a new run's id is already taken
    │   ├── RunLockedError             another runtime holds the run's lease
    │   └── LeaseLostError             our lease or the head we extend moved
    ├── ModelError                     a chat model call failed or replied badly
    └── BudgetExceededError            a person stopped a run at its budget

Control flow that user code must not swallow (a node pausing for a person)
is not an error: see ``durable_flow.engine._context.Interrupt`` (a ``BaseException``).

An error the runtime raises inside a node (through ``ctx.step``,
``ctx.request``, or a lost lease) has ``raised_by_runtime`` set: a node's
``RetryPolicy`` never retries it, nor an error the node raises from it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "AuditError",
    "BudgetExceededError",
    "CheckpointCorruptedError",
    "CheckpointNotFoundError",
    "ConflictingUpdateError",
    "DuplicateStepError",
    "DurableFlowError",
    "EventTimeoutError",
    "ExpressionError",
    "GuardError",
    "InvalidGotoError",
    "InvalidInputError",
    "InvalidLinkError",
    "InvalidResponseError",
    "LeaseLostError",
    "ModelError",
    "NotAuthorizedError",
    "RequestTimeoutError",
    "RunExistsError",
    "RunFailedError",
    "RunLockedError",
    "RunNotFoundError",
    "RunNotResumableError",
    "SchemaVersionError",
    "SerializationError",
    "StateUpdateError",
    "StoreError",
    "SubworkflowError",
    "SuperstepLimitError",
    "UnknownRequestError",
    "WorkflowMismatchError",
    "WorkflowValidationError",
]


class DurableFlowError(Exception):
    """Root of every error raised by durable-flow.

    ``raised_by_runtime`` is True on an error the runtime itself raised
    inside a node (recording a ``ctx.step``, asking through ``ctx.request``,
    a lost lease). Retrying the node could not cure it and would repeat the
    side effects before it, so a ``RetryPolicy`` never retries it. The same
    class raised by a node's own code stays False and is retried as
    configured.
    """

    raised_by_runtime: bool = False


class WorkflowValidationError(DurableFlowError):
    """``build()`` (or a loader) found problems; ``problems`` lists every one."""

    def __init__(self, problems: Sequence[str], *, workflow: str = "") -> None:
        self.problems = list(problems)
        self.workflow = workflow
        head = f"workflow {workflow!r} is invalid" if workflow else "workflow is invalid"
        body = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{head} ({len(self.problems)} problem(s)):\n{body}")


class ExpressionError(WorkflowValidationError):
    """A condition expression does not parse; ``position`` is the offset."""

    def __init__(self, source: str, reason: str, position: int = 0) -> None:
        self.source = source
        self.reason = reason
        self.position = position
        super().__init__([f"cannot parse {source!r} at offset {position}: {reason}"])


class WorkflowMismatchError(DurableFlowError):
    """A run is continued with a workflow other than the one that started it.

    ``expected``/``actual`` are the graph signatures of the run and of the
    workflow given; ``run_version``/``workflow_version`` their versions (None
    when not known); ``difference`` names the first node or edge that differs,
    or the nodes a migration cannot place, when known.
    """

    def __init__(self, run_id: str, expected: str, actual: str, *,
                 run_version: str | None = None, workflow_version: str | None = None,
                 difference: str | None = None, hint: str | None = None) -> None:
        self.run_id = run_id
        self.expected = expected
        self.actual = actual
        self.run_version = run_version
        self.workflow_version = workflow_version
        self.difference = difference
        if run_version is not None and workflow_version is not None \
                and run_version != workflow_version:
            what = (f"run {run_id} was started with version {run_version!r}, "
                    f"the workflow given is version {workflow_version!r}")
            hint = hint or "resume with migrate=True to move the run to the new version"
        else:
            where = f"version {run_version!r}: " if run_version is not None else ""
            what = (f"run {run_id} was started with graph signature {expected[:12]}, "
                    f"the workflow given ({where}same version) has {actual[:12]}")
            hint = hint or ("give it a new version (WorkflowBuilder(..., version=...)) and "
                            "migrate, or pass allow_mismatch=True to resume anyway")
        detail = f": {difference}" if difference else ""
        super().__init__(f"{what}{detail}; {hint}")


class InvalidInputError(DurableFlowError, ValueError):
    """Bad input or arguments, reported before anything is stored.

    Run input that does not fit the blackboard schema, or a misused argument
    (a ``RetryPolicy`` value, a store option, ...). It is also a
    ``ValueError``, so ``except ValueError`` keeps catching it.
    """


class StateUpdateError(DurableFlowError):
    """A node's update names an unknown field or has a wrongly typed value."""

    def __init__(self, node: str, field: str, reason: str) -> None:
        self.node = node
        self.field = field
        self.reason = reason
        super().__init__(f"node {node!r} wrote field {field!r}: {reason}")


class ConflictingUpdateError(DurableFlowError):
    """Two nodes wrote one last-write-wins field in the same superstep."""

    def __init__(self, field: str, nodes: Sequence[str]) -> None:
        self.field = field
        self.nodes = tuple(nodes)
        super().__init__(
            f"nodes {' and '.join(repr(n) for n in self.nodes)} both wrote the "
            f"last-write-wins field {field!r} in one superstep; give the field a reducer "
            "(e.g. Annotated[..., append]) or let only one of them write it"
        )


class SuperstepLimitError(DurableFlowError):
    """The run reached ``max_supersteps`` without finishing."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"the run reached max_supersteps={limit} without finishing")


class InvalidGotoError(DurableFlowError):
    """A node returned ``Command(goto=...)`` to a target it did not declare."""

    def __init__(self, node: str, target: str, allowed: Sequence[str]) -> None:
        self.node = node
        self.target = target
        self.allowed = tuple(allowed)
        super().__init__(
            f"node {node!r} tried to go to {target!r}; declared goto targets: "
            f"{', '.join(self.allowed) or '(none)'}"
        )


class DuplicateStepError(DurableFlowError):
    """``ctx.step`` was called twice with one name in one node run."""

    def __init__(self, node: str, name: str) -> None:
        self.node = node
        self.name = name
        super().__init__(
            f"node {node!r} called ctx.step({name!r}) twice in one run; step names must be unique"
        )


class GuardError(DurableFlowError):
    """A ``guard`` transform's predicate was false; ``node`` and ``message`` say which."""

    def __init__(self, node: str, message: str) -> None:
        self.node = node
        self.message = message
        super().__init__(f"guard failed in node {node!r}: {message}")


class SubworkflowError(DurableFlowError):
    """A nested workflow failed; names the inner path and the original error."""

    def __init__(self, path: str, error_type: str, message: str,
                 traceback: str | None = None) -> None:
        self.path = path
        self.error_type = error_type
        self.error_message = message
        self.inner_traceback = traceback
        super().__init__(f"sub-workflow failed at {path}: {error_type}: {message}")


class RunFailedError(DurableFlowError):
    """Raised by ``RunResult.raise_for_status()`` for a failed run."""

    def __init__(self, run_id: str, error_type: str, message: str, node: str | None) -> None:
        self.run_id = run_id
        self.error_type = error_type
        self.error_message = message
        self.node = node
        where = f" in node {node!r}" if node else ""
        super().__init__(f"run {run_id} failed{where}: {error_type}: {message}")


class RunNotFoundError(DurableFlowError):
    """No run with this id exists in the store."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"no run with id {run_id!r}")


class CheckpointNotFoundError(DurableFlowError):
    """No checkpoint with this id exists for the run."""

    def __init__(self, run_id: str, checkpoint_id: str) -> None:
        self.run_id = run_id
        self.checkpoint_id = checkpoint_id
        super().__init__(f"run {run_id!r} has no checkpoint {checkpoint_id!r}")


class RunNotResumableError(DurableFlowError):
    """The run has ended (completed or cancelled) and cannot continue.

    ``action`` is what was refused (``"resumed"``, ``"cancelled"``).
    """

    def __init__(self, run_id: str, status: str, action: str = "resumed") -> None:
        self.run_id = run_id
        self.status = status
        self.action = action
        hint = "; fork it instead" if action == "resumed" else ""
        super().__init__(f"run {run_id} is {status} and cannot be {action}{hint}")


class InvalidResponseError(DurableFlowError):
    """An answer does not validate against the request's response type."""

    def __init__(self, request_id: str, reason: str, schema: object = None) -> None:
        self.request_id = request_id
        self.reason = reason
        self.schema = schema
        super().__init__(f"answer to request {request_id!r} is invalid: {reason}")


class UnknownRequestError(DurableFlowError):
    """An answer names a request that is not pending on the run."""

    def __init__(self, run_id: str, request_id: str) -> None:
        self.run_id = run_id
        self.request_id = request_id
        super().__init__(f"run {run_id} has no pending request {request_id!r}")


class NotAuthorizedError(DurableFlowError):
    """A principal may not do what it asked: answer, reassign or sign in.

    ``by`` is the principal id (None when nobody was named), ``action`` what
    was refused, ``run_id``/``request_id`` the request concerned when there
    is one, ``allowed`` who may (``"alice or role finance"``) when that is
    known. Nothing was written.
    """

    def __init__(self, by: str | None, action: str, *, run_id: str | None = None,
                 request_id: str | None = None, allowed: str | None = None) -> None:
        self.by = by
        self.action = action
        self.run_id = run_id
        self.request_id = request_id
        self.allowed = allowed
        where = "" if request_id is None else f" (request {request_id!r} of run {run_id})"
        only = f"; only {allowed} may" if allowed else ""
        if by is None:
            message = f"refused to {action}{where}: nobody was named{only} (pass by=PRINCIPAL)"
        else:
            message = f"{by!r} may not {action}{where}{only}"
        super().__init__(message)


class InvalidLinkError(DurableFlowError):
    """An approval link cannot be used; ``reason`` says why, nothing was written.

    ``reason`` is one of ``"altered"`` (the signature does not match: a
    changed or made-up token, or another secret), ``"expired"``, ``"foreign"``
    (the token names another request than the page it was opened on),
    ``"used"`` (its request was already answered) or ``"unknown"`` (no such
    pending request).
    """

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


class AuditError(DurableFlowError):
    """A run's audit trail does not prove what the run would act on; nothing ran.

    Raised by ``resume`` (and a worker's start) when an answer stored on a
    request is not the one its decision records, or the decision chain was
    edited, cut short or re-chained. ``problems`` names each (see
    ``Runtime.verify_audit``).
    """

    def __init__(self, run_id: str, problems: list[str] | tuple[str, ...]) -> None:
        self.run_id = run_id
        self.problems = tuple(problems)
        super().__init__(f"the audit trail of run {run_id} does not match what it would act "
                         f"on: {'; '.join(self.problems)}")


class RequestTimeoutError(DurableFlowError):
    """Raised inside a node by ``ctx.request(..., timeout=...)`` with no ``default``.

    The request's deadline (``expires_at``) passed before anyone answered it;
    the node may catch it (to escalate, say). Answers that arrive later are
    refused with ``UnknownRequestError``.
    """

    def __init__(self, node: str, request_id: str, expires_at: object) -> None:
        self.node = node
        self.request_id = request_id
        self.expires_at = expires_at
        super().__init__(f"request {request_id!r} of node {node!r} was not answered "
                         f"by its deadline ({expires_at})")


class EventTimeoutError(DurableFlowError):
    """Raised inside a node by ``ctx.wait_event(name, timeout=...)`` when no event came in time.

    An event of that name sent later is kept for the run's next wait for it.
    """

    def __init__(self, node: str, name: str, expires_at: object) -> None:
        self.node = node
        self.name = name
        self.expires_at = expires_at
        super().__init__(f"node {node!r} waited for event {name!r} until {expires_at}; "
                         "none came")


class StoreError(DurableFlowError):
    """The checkpoint store failed.

    ``unavailable`` is True when the store could not be reached (or a
    connection was lost mid-commit): a run that meets it stops like a crash
    and stays resumable, instead of being marked failed.
    """

    unavailable: bool = False

    @classmethod
    def lost(cls, message: str) -> StoreError:
        """A ``StoreError`` for a store that could not be reached."""
        err = cls(message)
        err.unavailable = True
        return err


class SerializationError(StoreError):
    """A value cannot be encoded for the store (raised at write time)."""

    def __init__(self, node: str, field: str, reason: str) -> None:
        self.node = node
        self.field = field
        self.reason = reason
        super().__init__(f"cannot store field {field!r} written by {node!r}: {reason}")


class CheckpointCorruptedError(StoreError):
    """A stored row cannot be read back (bad bytes, unknown type tag, a changed digest).

    A changed digest: bytes that no longer match the digest they were written with.
    """

    def __init__(self, run_id: str, checkpoint_id: str, reason: str) -> None:
        self.run_id = run_id
        self.checkpoint_id = checkpoint_id
        self.reason = reason
        super().__init__(f"checkpoint {checkpoint_id} of run {run_id} is corrupted: {reason}")


class SchemaVersionError(StoreError):
    """The database schema is newer than this version of durable-flow."""

    def __init__(self, database_version: str, code_version: str) -> None:
        self.database_version = database_version
        self.code_version = code_version
        super().__init__(
            f"database schema version {database_version} is newer than this "
            f"durable-flow's {code_version}; upgrade durable-flow to open it"
        )


class RunExistsError(StoreError):
    """A run with this id already exists; nothing was written."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"run {run_id} already exists")


class RunLockedError(StoreError):
    """Another runtime holds a live lease on the run."""

    def __init__(self, run_id: str, owner: str, expires_in: float) -> None:
        self.run_id = run_id
        self.owner = owner
        self.expires_in = expires_in
        super().__init__(
            f"run {run_id} is being executed by {owner} (lease expires in {expires_in:.1f}s)"
        )


class LeaseLostError(StoreError):
    """Our lease moved on (taken over, or the run cancelled), or the head we extend moved.

    Nothing was written. ``reason`` says which.
    """

    # only the runtime loses a lease, wherever the error is raised
    raised_by_runtime = True

    def __init__(self, run_id: str, epoch: int, reason: str | None = None) -> None:
        self.run_id = run_id
        self.epoch = epoch
        self.reason = reason or "another runtime took it over"
        super().__init__(f"lost the lease on run {run_id} (epoch {epoch}): {self.reason}")


class ModelError(DurableFlowError):
    """A chat model call failed, or its reply could not be used.

    ``transient`` is True for failures worth trying again (a timeout, a lost
    connection, HTTP 429 or 5xx): agent nodes retry those with backoff,
    waiting at least ``retry_after`` seconds when the server said so.
    """

    def __init__(self, message: str, *, raw: str | None = None, transient: bool = False,
                 retry_after: float | None = None) -> None:
        self.raw = raw
        self.transient = transient
        self.retry_after = retry_after
        super().__init__(message if raw is None else f"{message}; raw reply: {raw!r}")


class BudgetExceededError(DurableFlowError):
    """A run reached its ``Budget`` and the person asked chose to stop it.

    ``used`` and ``limit`` are the plain forms of the run's usage and budget
    when the node asked.
    """

    def __init__(self, run_id: str, node: str, used: Mapping[str, Any],
                 limit: Mapping[str, Any]) -> None:
        self.run_id = run_id
        self.node = node
        self.used = dict(used)
        self.limit = dict(limit)
        super().__init__(f"run {run_id}: node {node!r} stopped at its budget "
                         f"(used {self.used}, limit {self.limit})")
