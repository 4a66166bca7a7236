"""Spending limits of a run: ``Budget``, the usage it is measured against, a person's decision.

A run's :class:`RunUsage` sums every model call its agent nodes made (input
and output tokens, and dollars where ``genai-prices`` knows the model). A
:class:`Budget` caps it; before a model call starts on a run already at or
past its budget, the node asks a person instead (a request whose payload has
``kind: "budget"``), who answers with a :class:`BudgetDecision`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..errors import InvalidInputError

__all__ = ["Budget", "BudgetDecision", "RunUsage"]


@dataclass(frozen=True, slots=True)
class RunUsage:
    """What a run's model calls used: tokens in and out, and dollars (priced calls only)."""

    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: RunUsage) -> RunUsage:
        return RunUsage(self.input_tokens + other.input_tokens,
                        self.output_tokens + other.output_tokens, self.usd + other.usd)

    def to_dict(self) -> dict[str, Any]:
        """Plain form (the ``used`` of a budget request)."""
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "total_tokens": self.total_tokens, "usd": self.usd}


@dataclass(frozen=True, slots=True)
class Budget:
    """A run's spending limit: total tokens, dollars, or both (None: no limit on that).

    Given to ``Runtime.run``/``submit`` (``budget=``) or as the workflow's
    default (``WorkflowBuilder(..., budget=...)``). A model call about to
    start when the run's usage has reached either limit waits for a person's
    :class:`BudgetDecision` first.
    """

    max_tokens: int | None = None
    max_usd: float | None = None

    def __post_init__(self) -> None:
        tokens, usd = self.max_tokens, self.max_usd
        if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int)
                                   or tokens < 0):
            raise InvalidInputError(f"max_tokens must be a whole number >= 0, got {tokens!r}")
        if usd is not None and (isinstance(usd, bool) or not isinstance(usd, int | float)
                                or not math.isfinite(usd) or usd < 0):
            raise InvalidInputError(f"max_usd must be a finite number >= 0, got {usd!r}")

    def reached(self, used: RunUsage) -> bool:
        """True when ``used`` is at or past either limit."""
        return (self.max_tokens is not None and used.total_tokens >= self.max_tokens) or \
            (self.max_usd is not None and used.usd >= self.max_usd)

    def to_dict(self) -> dict[str, Any]:
        """Plain form (the ``limit`` of a budget request)."""
        return {"max_tokens": self.max_tokens, "max_usd": self.max_usd}


class BudgetDecision(BaseModel):
    """The answer to a budget request: raise a limit (the call goes ahead) or stop the run.

    ``stop`` fails the run with ``BudgetExceededError``. Otherwise each limit
    given replaces the run's; the call then goes ahead (even when the new
    limit is still reached: the next call asks again).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    raise_to_tokens: int | None = Field(default=None, ge=0)
    raise_to_usd: float | None = Field(default=None, ge=0)
    stop: bool = False
