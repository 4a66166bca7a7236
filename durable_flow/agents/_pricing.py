"""What a model call cost in dollars, from the ``genai-prices`` package's price list.

The model is named by its ``name`` attribute (``OpenAIChatModel("gpt-4o")``,
a pydantic-ai or LangChain model's own name), optionally ``provider:model``
or with a ``provider`` attribute. A model the list does not know is priced
at nothing (its tokens still count against a token budget); which models are
known is looked up once per name.
"""

from __future__ import annotations

from functools import cache

from ..model._budget import RunUsage
from ._models import Usage, model_name

__all__ = ["priced"]


def priced(model: object, usage: Usage) -> RunUsage:
    """A call's usage with its price (0.0 when the model is unknown)."""
    ref, provider = _reference(model)
    usd = _price(ref, provider, usage.input_tokens, usage.output_tokens) if _known(ref, provider) \
        else 0.0
    return RunUsage(usage.input_tokens, usage.output_tokens, usd)


def _reference(model: object) -> tuple[str, str | None]:
    name = model_name(model)
    provider = getattr(model, "provider", None)
    if not isinstance(provider, str) and ":" in name:
        provider, name = name.split(":", 1)
    return name, provider if isinstance(provider, str) else None


@cache
def _known(ref: str, provider: str | None) -> bool:
    try:
        _price(ref, provider, 1, 1)
    except LookupError:
        return False
    return True


def _price(ref: str, provider: str | None, input_tokens: int, output_tokens: int) -> float:
    from genai_prices import Usage as Tokens
    from genai_prices import calc_price

    calc = calc_price(Tokens(input_tokens=input_tokens, output_tokens=output_tokens),
                      model_ref=ref, provider_id=provider)
    return float(calc.total_price)
