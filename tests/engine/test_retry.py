"""RetryPolicy.should_retry: the node's own errors as configured, the runtime's own never."""

from __future__ import annotations

import asyncio

from durable_flow import (
    LeaseLostError,
    ModelError,
    RetryPolicy,
    SerializationError,
)


def runtime_error() -> SerializationError:
    exc = SerializationError("work", "step 'blob'", "not storable")
    exc.raised_by_runtime = True
    return exc


def test_errors_listed_in_retry_on_are_retried_others_not() -> None:
    policy = RetryPolicy(retry_on=(ConnectionError,))
    assert policy.should_retry(ConnectionError("down"))
    assert not policy.should_retry(KeyError("x"))


def test_a_durable_flow_error_the_node_raises_itself_is_retried() -> None:
    assert RetryPolicy().should_retry(ModelError("bad reply"))
    assert RetryPolicy().should_retry(SerializationError("n", "f", "raised by user code"))


def test_an_error_the_runtime_raised_is_never_retried() -> None:
    assert not RetryPolicy().should_retry(runtime_error())
    assert not RetryPolicy(retry_on=(BaseException,)).should_retry(LeaseLostError("r", 1))


def test_an_own_error_raised_from_or_while_handling_a_runtime_error_is_not_retried() -> None:
    policy = RetryPolicy()
    try:
        try:
            raise runtime_error()
        except SerializationError as exc:
            raise RuntimeError("wrapped") from exc
    except RuntimeError as wrapped:
        assert not policy.should_retry(wrapped)
    try:
        try:
            raise runtime_error()
        except SerializationError:
            raise ValueError("replaced") from None
    except ValueError as replaced:
        assert not policy.should_retry(replaced)
    group = ExceptionGroup("several", [ValueError("mine"), runtime_error()])
    assert not policy.should_retry(group)
    assert policy.should_retry(ExceptionGroup("several", [ValueError("mine")]))


async def test_cancelled_error_is_retried_only_when_listed_and_never_while_cancelling() -> None:
    listed = RetryPolicy(retry_on=(asyncio.CancelledError,))
    assert not RetryPolicy().should_retry(asyncio.CancelledError())
    assert listed.should_retry(asyncio.CancelledError())
    seen: list[bool] = []

    async def cancelled() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError as exc:
            seen.append(listed.should_retry(exc))
            raise

    task = asyncio.create_task(cancelled())
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert seen == [False]
