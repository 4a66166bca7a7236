"""Retry policies for nodes, built on tenacity."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
    wait_exponential_jitter,
)

__all__ = ["RetryPolicy"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently a failing node is tried again.

    ``max_attempts`` counts the first try. Delays grow from ``initial_delay``
    by ``backoff`` up to ``max_delay``, with random jitter unless disabled.
    Only exceptions that are instances of ``retry_on`` are retried; a node
    timeout raises ``TimeoutError`` inside the task.
    """

    max_attempts: int = 3
    initial_delay: float = 0.5
    backoff: float = 2.0
    max_delay: float = 30.0
    jitter: bool = True
    retry_on: tuple[type[BaseException], ...] = (Exception,)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("RetryPolicy.max_attempts must be at least 1")
        if self.initial_delay < 0 or self.max_delay < 0 or self.backoff < 1:
            raise ValueError("RetryPolicy delays must be >= 0 and backoff >= 1")

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
        if self.jitter:
            wait: Any = wait_exponential_jitter(
                multiplier=self.initial_delay, exp_base=self.backoff, max=self.max_delay,
                jitter=self.initial_delay)
        else:
            wait = wait_exponential(multiplier=self.initial_delay, exp_base=self.backoff,
                                    max=self.max_delay)

        async def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            delay = state.next_action.sleep if state.next_action else 0.0
            if exc is not None:
                await on_retry(state.attempt_number, exc, delay)

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.max_attempts), wait=wait,
            retry=retry_if_exception_type(self.retry_on), before_sleep=before_sleep,
            reraise=True)
        return await retrying(fn)
