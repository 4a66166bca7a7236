"""One model call of an agent node: streamed when the model can, retried when it fails transiently.

A model with ``stream`` (:func:`~._models.streams`) is streamed: each text
delta is published as a ``model_delta`` event (``Runtime.stream`` and the
run's stream log) with the round and the attempt it belongs to. A
:class:`~durable_flow.ModelError` marked ``transient`` (a timeout, a lost
connection, 429, 5xx) is retried with exponential backoff and jitter
(tenacity), never sooner than the server's ``Retry-After`` (which, in a node
with ``uses=``, also pauses those limits for every task using them); other errors,
and the last transient one, reach the node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from ..engine._uses import CURRENT_USES, Uses
from ..errors import ModelError
from ..model._messages import Message
from ._models import ChatModel, ChatResponse, ToolSpec, streams

__all__ = ["MAX_RETRY_AFTER", "ModelCall"]

MAX_RETRY_AFTER = 300.0  # seconds: a longer Retry-After is waited this long, then tried
_backoff = wait_random_exponential(multiplier=0.5, max=20)

Publish = Callable[..., None]


def _transient(exc: BaseException) -> bool:
    return isinstance(exc, ModelError) and exc.transient


def _wait(state: RetryCallState) -> float:
    """Backoff, but never less than the ``Retry-After`` the failed call carried."""
    exc = state.outcome.exception() if state.outcome is not None else None
    after = exc.retry_after if isinstance(exc, ModelError) and exc.retry_after else 0.0
    return max(_backoff(state), min(after, MAX_RETRY_AFTER))


class ModelCall:
    """Calls one model, streaming and retrying as the module docstring says."""

    def __init__(self, model: ChatModel, *, retries: int, publish: Publish,
                 wait: Callable[[RetryCallState], float] = _wait) -> None:
        self.model = model
        self.retries = retries
        self.publish = publish
        self.wait = wait

    async def __call__(self, convo: Sequence[Message], *, tools: Sequence[ToolSpec],
                       output_schema: Mapping[str, Any] | None, round: str) -> ChatResponse:
        """The model's reply to ``convo``, after up to ``retries`` transient failures."""
        retrying = AsyncRetrying(stop=stop_after_attempt(self.retries + 1), wait=self.wait,
                                 retry=retry_if_exception(_transient), reraise=True)
        uses = CURRENT_USES.get()  # the limits the node holds grants of (``uses=``)
        async for attempt in retrying:
            with attempt:
                number = attempt.retry_state.attempt_number
                if uses is None:
                    return await self.once(convo, tools, output_schema, round, number)
                return await self._paced(uses, convo, tools, output_schema, round, number)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _paced(self, uses: Uses, convo: Sequence[Message], tools: Sequence[ToolSpec],
                     output_schema: Mapping[str, Any] | None, round: str,
                     attempt: int) -> ChatResponse:
        """One attempt under limits: after their pause; a ``Retry-After`` pauses them for all."""
        await uses.paced()
        try:
            return await self.once(convo, tools, output_schema, round, attempt)
        except ModelError as exc:
            if exc.transient and exc.retry_after:
                await uses.slow_down(min(exc.retry_after, MAX_RETRY_AFTER))
            raise

    async def once(self, convo: Sequence[Message], tools: Sequence[ToolSpec],
                   output_schema: Mapping[str, Any] | None, round: str,
                   attempt: int) -> ChatResponse:
        """One attempt: streamed (deltas published) when the model streams."""
        if not streams(self.model):
            return await self.model.complete(convo, tools=tools, output_schema=output_schema)
        texts: list[str] = []
        response: ChatResponse | None = None
        stream = self.model.stream(convo, tools=tools, output_schema=output_schema)  # type: ignore[attr-defined]
        async for chunk in stream:
            if chunk.text:
                texts.append(chunk.text)
                self.publish("model_delta", text=chunk.text, round=round, attempt=attempt)
            if chunk.response is not None:
                response = chunk.response
        return response if response is not None else ChatResponse(Message.assistant("".join(texts)))
