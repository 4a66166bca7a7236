"""Retry policies for nodes, built on tenacity."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

from ..errors import DurableFlowError, InvalidInputError

__all__ = ["RetryPolicy"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently a failing node is tried again.

    ``max_attempts`` counts the first try. Delays grow from ``initial_delay``
    by ``backoff`` up to ``max_delay``, with random jitter unless disabled.
    Only exceptions that are instances of ``retry_on`` (a tuple of exception
    classes; one class is taken as a tuple of one) are retried; a node
    timeout raises ``TimeoutError`` inside the task. Never retried, whatever
    ``retry_on`` says: the runtime's own errors (``raised_by_runtime``, see
    ``DurableFlowError``), also when the node raised its own error from one
    or while handling one, and a cancellation of the task from outside (a
    ``CancelledError`` the node raises itself is retried only when listed).
    Bad values raise ``InvalidInputError`` at once.
    """

    max_attempts: int = 3
    initial_delay: float = 0.5
    backoff: float = 2.0
    max_delay: float = 30.0
    jitter: bool = True
    retry_on: tuple[type[BaseException], ...] = (Exception,)

    def __post_init__(self) -> None:
        attempts = self.max_attempts
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise InvalidInputError(
                f"RetryPolicy.max_attempts must be an int of at least 1 (the first try "
                f"counts), got {attempts!r}")
        _check_number("initial_delay", self.initial_delay, 0.0, "a number of seconds >= 0")
        _check_number("backoff", self.backoff, 1.0, "a number >= 1 (the growth factor)")
        _check_number("max_delay", self.max_delay, 0.0, "a number of seconds >= 0",
                      allow_inf=True)
        if not isinstance(self.jitter, bool):
            raise InvalidInputError(f"RetryPolicy.jitter must be True or False, got {self.jitter!r}")
        object.__setattr__(self, "retry_on", _exception_classes(self.retry_on))

    def to_dict(self) -> dict[str, Any]:
        """Plain form for signatures and declarative files."""
        return {"max_attempts": self.max_attempts, "initial_delay": self.initial_delay,
                "backoff": self.backoff, "max_delay": self.max_delay, "jitter": self.jitter}

    async def call(
        self,
        fn: Callable[[], Awaitable[T]],
        on_retry: Callable[[int, BaseException, float], Awaitable[None]],
    ) -> T:
        """Run ``fn`` under this policy; ``on_retry(attempt, error, delay)`` before each retry."""
        wait: Any = wait_exponential(multiplier=self.initial_delay, exp_base=self.backoff,
                                     max=self.max_delay)
        if self.jitter:
            # random extra delay so many failing runs do not retry in lockstep
            wait = wait + wait_random(0, self.initial_delay)

        async def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            delay = state.next_action.sleep if state.next_action else 0.0
            if exc is not None:
                await on_retry(state.attempt_number, exc, delay)

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.max_attempts), wait=wait,
            retry=retry_if_exception(self.should_retry), before_sleep=before_sleep, reraise=True)
        return await retrying(fn)

    def should_retry(self, exc: BaseException) -> bool:
        """Whether this policy tries again after ``exc`` (called inside the failing task)."""
        if isinstance(exc, asyncio.CancelledError) and cancelled_from_outside():
            return False
        return isinstance(exc, self.retry_on) and not raised_by_runtime(exc)


def raised_by_runtime(exc: BaseException) -> bool:
    """True if ``exc``, its cause, its context or a grouped error is the runtime's own error.

    The context counts too: a node that catches a lost lease and raises its
    own error in the ``except`` block must not run its side effects again.
    """
    seen: set[int] = set()
    todo = [exc]
    while todo:
        err = todo.pop()
        if id(err) in seen:
            continue
        seen.add(id(err))
        if isinstance(err, DurableFlowError) and err.raised_by_runtime:
            return True
        todo.extend(e for e in (err.__cause__, err.__context__) if e is not None)
        if isinstance(err, BaseExceptionGroup):
            todo.extend(err.exceptions)
    return False


def cancelled_from_outside() -> bool:
    """True while the current task is being cancelled, as opposed to code raising ``CancelledError``.

    A node that raises ``CancelledError`` itself fails like any other node;
    a cancellation requested of its task (the caller went away,
    ``Runtime.cancel``, a lost lease) must propagate, never be retried.
    """
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _check_number(name: str, value: object, minimum: float, what: str, *,
                  allow_inf: bool = False) -> None:
    ok = (isinstance(value, int | float) and not isinstance(value, bool)
          and not math.isnan(value) and value >= minimum
          and (allow_inf or not math.isinf(value)))
    if not ok:
        raise InvalidInputError(f"RetryPolicy.{name} must be {what}, got {value!r}")


def _exception_classes(value: object) -> tuple[type[BaseException], ...]:
    """``retry_on`` as a tuple of exception classes, or InvalidInputError naming the bad item."""
    items = (value,) if isinstance(value, type) else value
    if not isinstance(items, tuple | list):
        raise InvalidInputError(
            f"RetryPolicy.retry_on must be a tuple of exception classes, e.g. (ConnectionError,), "
            f"got {value!r}")
    for item in items:
        if not (isinstance(item, type) and issubclass(item, BaseException)):
            raise InvalidInputError(
                f"RetryPolicy.retry_on must hold exception classes, got {item!r} in {value!r}")
    return tuple(items)
