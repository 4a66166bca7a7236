"""What a node that declares ``uses=("api", ...)`` waits for before it runs: a gate.

The engine knows only this protocol; the runtime gives a worker's
executions a gate over the store's limit grants (``runtime/_limits.py``).
Without a gate (``Runtime.run`` outside a worker) a node runs at once.
While a task holds its grants, :data:`CURRENT_USES` names them, so a model
call inside it can slow every task of those limits down (a 429's
``Retry-After``) and wait for such a pause itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from typing import Protocol

__all__ = ["CURRENT_USES", "Gate", "Uses"]


class Uses(Protocol):
    """The limits one running task holds grants of."""

    async def paced(self) -> None:
        """Wait while a provider asked these limits to pause (every worker sees it)."""
        ...

    async def slow_down(self, seconds: float) -> None:
        """Pause every limit held here for ``seconds``, for every task using them."""
        ...


class Gate(Protocol):
    """Grants of named limits for the tasks of one run execution."""

    def hold(self, names: Sequence[str], run_id: str,
             task: str) -> AbstractAsyncContextManager[Uses]:
        """Wait until every limit in ``names`` grants a use; hold them while the block runs."""
        ...


#: The limits the running task holds, for model calls made inside it.
CURRENT_USES: ContextVar[Uses | None] = ContextVar("durable_flow_current_uses", default=None)
