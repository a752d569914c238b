"""What the plan can know about a model before anything starts: an upper bound on a task's cost (for
`ga fanout --dry-run`, starting no model server) and how large a prompt the worker's context holds.

Per turn a request carries at most the context budget (plus the largest tool output cap) and
the reply at most the model's max_tokens; a task runs at most max_turns turns, and never past its
own max_cost limit. Facts are looked up once per model name: 10,000 tasks share a handful of models.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from configs import Settings

DEFAULT_CONTEXT_WINDOW = 32000


@dataclass(frozen=True)
class ModelFacts:
    price_input: float  # USD per million input tokens
    price_output: float
    max_tokens: int  # the longest reply
    context_window: Optional[int]  # tokens (None: unknown)


class ModelBook:
    """ModelFacts by model name, each resolved once; None for a model that cannot be resolved."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._facts: dict[Optional[str], Optional[ModelFacts]] = {}
        self._limits: dict[Optional[str], int] = {}
        self._bounds: dict[tuple, Optional[float]] = {}  # 100,000 tasks share a few (model, turns, max_cost)

    def facts(self, name: Optional[str]) -> Optional[ModelFacts]:
        if name not in self._facts:
            self._facts[name] = model_facts(name, self.settings)
        return self._facts[name]

    def upper_bound(self, name: Optional[str], turns: int, max_cost: Optional[float]) -> Optional[float]:
        key = (name, turns, max_cost)
        if key not in self._bounds:
            self._bounds[key] = self._upper_bound(name, turns, max_cost)
        return self._bounds[key]

    def _upper_bound(self, name: Optional[str], turns: int, max_cost: Optional[float]) -> Optional[float]:
        facts = self.facts(name)
        if facts is None:
            return max_cost
        ctx = self.settings.context
        prompt = ctx.context_tokens + max(ctx.caps.model_dump().values()) // max(1, ctx.chars_per_token)
        bound = turns * (prompt * facts.price_input + facts.max_tokens * facts.price_output) / 1e6
        return min(bound, max_cost) if max_cost else bound

    def prompt_limit(self, name: Optional[str]) -> int:
        if name not in self._limits:
            facts = self.facts(name)
            self._limits[name] = prompt_limit(self.settings, facts.context_window if facts else None)
        return self._limits[name]


def prompt_limit(settings: Settings, context_window: Optional[int]) -> int:
    """The largest first prompt (JSON-serialized chars, as the context budget measures) that the worker
    sends uncut: the context budget (capped by the model's window) less the system prompt and L1 index."""
    from worker.prompt import SYSTEM_TEMPLATE

    ctx = settings.context
    tokens = min(ctx.context_tokens, context_window or ctx.context_tokens)
    reserve = len(SYSTEM_TEMPLATE.read_text(encoding="utf-8")) + settings.memory.l1_max_chars + 500
    return max(0, tokens * ctx.chars_per_token - reserve)


def prompt_chars(prompt: str) -> int:
    return len(json.dumps(prompt, ensure_ascii=False))


def upper_bound(model_name: Optional[str], turns: int, max_cost: Optional[float], settings: Settings) -> Optional[float]:
    return ModelBook(settings).upper_bound(model_name, turns, max_cost)


def model_facts(name: Optional[str], settings: Settings) -> Optional[ModelFacts]:
    if name and name.startswith("scripted:"):
        from worker.models import DEFAULT_MAX_TOKENS
        from worker.scripted import ScriptError, load_script

        try:
            fields = load_script(Path(name[len("scripted:"):])).model
        except ScriptError:
            return None
        return ModelFacts(float(fields.get("price_input", 0.0)), float(fields.get("price_output", 0.0)),
                          int(fields.get("max_tokens", DEFAULT_MAX_TOKENS)),
                          int(fields.get("context_window", DEFAULT_CONTEXT_WINDOW)))
    from worker.models import ModelConfigError, resolve_model

    try:
        config = resolve_model(name, settings)
    except ModelConfigError:
        return None
    return ModelFacts(config.price_input, config.price_output, config.max_tokens, config.context_window)
