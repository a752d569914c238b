"""Tokens and money: what a model call used and cost (`Usage`, priced by its model), and the `Account` a task
spends against, shared by its loop and its gateway."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping, Optional

from pydantic import ConfigDict, computed_field
from typing_extensions import Self

from worker.types import Record

if TYPE_CHECKING:
    from worker.modelconfig import ModelConfig


def cost_of(prices: ModelConfig, prompt: int, completion: int, cached: int) -> float:
    """USD for these tokens at the model's prices (per million tokens; cached input at price_input if unpriced)."""
    cached_price = prices.price_input if prices.price_cached is None else prices.price_cached
    return ((prompt - cached) * prices.price_input + cached * cached_price + completion * prices.price_output) / 1e6


class Usage(Record):
    """Tokens and cost: one model call's, a task's, a run's (the one usage record of every part)."""

    model_config = ConfigDict(extra="ignore")

    prompt: int = 0
    completion: int = 0
    cached: int = 0
    cost: float = 0.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total(self) -> int:
        return self.prompt + self.completion

    def __add__(self, other: Optional[Usage]) -> Self:  # a WorkerTotals plus a Usage is a WorkerTotals
        if other is None:
            return self.model_copy()
        return self.model_copy(update={"prompt": self.prompt + other.prompt, "completion": self.completion + other.completion,
                                       "cached": self.cached + other.cached, "cost": self.cost + other.cost})

    @classmethod
    def priced(cls, prompt: int, completion: int, cached: int, prices: ModelConfig) -> Self:
        """One reply's tokens, and their cost at the model's prices."""
        return cls(prompt=prompt, completion=completion, cached=cached, cost=cost_of(prices, prompt, completion, cached))

    def to_dict(self) -> dict[str, float]:
        return self.model_dump()

    @classmethod
    def from_dict(cls, data: Optional[Mapping[str, object]]) -> "Usage":
        """A usage as a record holds it (checked)."""
        return cls.model_validate(data or {})


@dataclass
class Account:
    """What a task spends: its own model calls and the gateway's direct ones (`usage`), and its nested runs
    (`nested`, `runs`), against the task's limit and what the run's budget left it (the lower of the two).

    The gateway holds a bound on what a call or nested run may spend before it starts (`reserve`) and lets go
    of it when it ends (`settle`): while the calls in flight may spend what is left, the next one waits for
    them. So concurrent calls overshoot the budget by at most one call's bound, never by their sum."""

    max_tokens: Optional[int] = None
    max_cost: Optional[float] = None
    usage: Usage = field(default_factory=Usage)
    nested: Usage = field(default_factory=Usage)
    runs: int = 0
    held_tokens: int = 0  # the bounds held by the calls and nested runs in flight
    held_cost: float = 0.0
    in_flight: int = 0
    lock: threading.Condition = field(default_factory=threading.Condition, repr=False)

    @property
    def limited(self) -> bool:
        return self.max_tokens is not None or self.max_cost is not None

    def add(self, usage: Usage) -> None:
        with self.lock:
            self.usage = self.usage + usage

    def add_run(self, usage: Usage) -> None:
        with self.lock:
            self.nested, self.runs = self.nested + usage, self.runs + 1

    def spent(self) -> Usage:
        with self.lock:
            return self.usage + self.nested

    def reserve(self, tokens: int, cost: float, cancelled: Optional[threading.Event] = None) -> str:
        """Hold `tokens` and `cost` (a bound on what a call will spend) before it starts; "" once held, else
        why it may not start. While what is in flight holds the rest of the budget, wait for it to settle."""
        with self.lock:
            refusal = self._wait_for_room(cancelled)
            if not refusal:
                self._hold(tokens, cost)
            return refusal

    def reserve_call(self, prompt: int, prompt_cost: float, completion: int, choices: int, token_cost: float,
                     cancelled: Optional[threading.Event] = None) -> tuple[str, int]:
        """`reserve` for one model call whose reply may hold `choices` completions: its prompt bound, and each
        completion cut to what the budget leaves once the prompt is held; ("", tokens per completion) once held
        (hold `prompt + tokens * choices`), else (why not, 0). While calls in flight hold what this one needs,
        wait for them to settle."""
        with self.lock:
            while True:
                refusal = self._refusal(self.held_tokens, self.held_cost)
                allowed = 0 if refusal else self._completion_room(prompt, prompt_cost, completion, choices, token_cost)
                if allowed >= 1:
                    self._hold(prompt + allowed * choices, prompt_cost + allowed * choices * token_cost)
                    return "", allowed
                if not self.in_flight:
                    return refusal or (f"the task's budget cannot hold this call (its prompt alone is about {prompt:,} "
                                       f"tokens, {choices} completion(s) asked for); send less"), 0
                if cancelled is not None and cancelled.is_set():
                    return "the task is ending", 0
                self.lock.wait(0.5)

    def _completion_room(self, prompt: int, prompt_cost: float, completion: int, choices: int, token_cost: float) -> int:
        spent = self.usage + self.nested
        allowed = completion
        if self.max_tokens is not None:
            allowed = min(allowed, (self.max_tokens - spent.total - self.held_tokens - prompt) // choices)
        if self.max_cost is not None and token_cost > 0:
            room = self.max_cost - spent.cost - self.held_cost - prompt_cost
            allowed = min(allowed, int(room / (token_cost * choices)))
        return allowed

    def reserve_rest(self, cancelled: Optional[threading.Event] = None) -> tuple[str, Optional[int], Optional[float]]:
        """`reserve` for a nested run: it holds all that is left, its budget (None: no limit)."""
        with self.lock:
            refusal = self._wait_for_room(cancelled)
            if refusal:
                return refusal, None, None
            spent = self.usage + self.nested
            tokens = None if self.max_tokens is None else self.max_tokens - spent.total - self.held_tokens
            cost = None if self.max_cost is None else self.max_cost - spent.cost - self.held_cost
            self._hold(tokens or 0, cost or 0.0)
            return "", tokens, cost

    def settle(self, tokens: int, cost: float) -> None:
        """The call that held `tokens` and `cost` ended (its usage added): let go of them."""
        with self.lock:
            self.held_tokens, self.held_cost = self.held_tokens - tokens, self.held_cost - cost
            self.in_flight -= 1
            self.lock.notify_all()

    def _wait_for_room(self, cancelled: Optional[threading.Event]) -> str:
        while self.in_flight and self._refusal(self.held_tokens, self.held_cost):
            if cancelled is not None and cancelled.is_set():
                return "the task is ending"
            self.lock.wait(0.5)
        return self._refusal(self.held_tokens, self.held_cost)

    def _hold(self, tokens: int, cost: float) -> None:
        self.held_tokens, self.held_cost = self.held_tokens + tokens, self.held_cost + cost
        self.in_flight += 1

    def _refusal(self, held_tokens: int, held_cost: float) -> str:
        """Why no more model calls or nested runs may start, counting what is held ("" while they may)."""
        spent = self.usage + self.nested
        if self.max_tokens is not None and spent.total + held_tokens >= self.max_tokens:
            return f"the task's token budget is spent ({spent.total:,} of {self.max_tokens:,} tokens)"
        if self.max_cost is not None and spent.cost + held_cost >= self.max_cost:
            return f"the task's cost budget is spent (${spent.cost:.4f} of ${self.max_cost:.4f})"
        return ""
