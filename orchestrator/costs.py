"""An upper bound on what a task can cost, for `ga fanout --dry-run` (starts no model server).

Per turn a request carries at most the context budget (plus the largest tool output cap) and
the reply at most the model's max_tokens; a task runs at most max_turns turns, and never past its
own max_cost limit.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional


def upper_bound(model_name: Optional[str], turns: int, max_cost: Optional[float], settings: Any) -> Optional[float]:
    prices = model_prices(model_name, settings)
    if prices is None:
        return max_cost
    price_in, price_out, max_tokens = prices
    ctx = settings.context
    prompt = ctx.context_tokens + max(ctx.caps.model_dump().values()) // max(1, ctx.chars_per_token)
    bound = turns * (prompt * price_in + max_tokens * price_out) / 1e6
    return min(bound, max_cost) if max_cost else bound


def model_prices(name: Optional[str], settings: Any) -> Optional[tuple[float, float, int]]:
    """(USD per million input tokens, per million output tokens, max reply tokens); None if unknown."""
    if name and name.startswith("scripted:"):
        from worker.models import DEFAULT_MAX_TOKENS
        from worker.scripted import ScriptError, load_script

        try:
            fields = load_script(Path(name[len("scripted:"):])).model
        except ScriptError:
            return None
        return float(fields.get("price_input", 0.0)), float(fields.get("price_output", 0.0)), int(fields.get("max_tokens", DEFAULT_MAX_TOKENS))
    from worker.models import ModelConfigError, resolve_model

    try:
        config = resolve_model(name, settings)
    except ModelConfigError:
        return None
    return config.price_input, config.price_output, config.max_tokens
