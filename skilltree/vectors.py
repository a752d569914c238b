"""The four scoring dimensions, a score vector over them, and the planner's weights."""
from __future__ import annotations

from typing import Any, Iterator

from pydantic import BaseModel, ConfigDict, Field, model_validator

DIMENSIONS: tuple[str, ...] = ("breadth", "depth", "utility", "innovation")
INITIAL_WEIGHTS: dict[str, float] = {"breadth": 0.3, "depth": 0.2, "utility": 0.3, "innovation": 0.2}


def _from_sequence(data: Any) -> Any:
    """Accept [b, d, u, i] as well as a mapping (the store's seed and hand edits use either)."""
    if isinstance(data, (list, tuple)):
        if len(data) != len(DIMENSIONS):
            raise ValueError(f"expected {len(DIMENSIONS)} numbers ({', '.join(DIMENSIONS)}), got {len(data)}")
        return dict(zip(DIMENSIONS, data))
    return data


class ScoreVector(BaseModel):
    """breadth and depth in [0, 10] (computed), utility and innovation in [1, 10] (judged)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    breadth: float = Field(ge=0, le=10)
    depth: float = Field(ge=0, le=10)
    utility: float = Field(ge=1, le=10)
    innovation: float = Field(ge=1, le=10)

    @model_validator(mode="before")
    @classmethod
    def _coerce(cls, data: Any) -> Any:
        return _from_sequence(data)

    def values(self) -> tuple[float, ...]:
        return tuple(getattr(self, name) for name in DIMENSIONS)

    def dominant(self) -> str:
        """argmax over the raw vector (§6, as in the paper's pseudocode); a tie goes to the
        dimension listed first in DIMENSIONS, so the answer never depends on dict order."""
        values = self.values()
        return DIMENSIONS[values.index(max(values))]


class Weights(BaseModel):
    """Non-negative weights of the four dimensions; the planner keeps them summing to 1."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    breadth: float = Field(default=INITIAL_WEIGHTS["breadth"], ge=0)
    depth: float = Field(default=INITIAL_WEIGHTS["depth"], ge=0)
    utility: float = Field(default=INITIAL_WEIGHTS["utility"], ge=0)
    innovation: float = Field(default=INITIAL_WEIGHTS["innovation"], ge=0)

    @model_validator(mode="before")
    @classmethod
    def _coerce(cls, data: Any) -> Any:
        return _from_sequence(data)

    @model_validator(mode="after")
    def _not_all_zero(self) -> "Weights":
        if sum(self.values()) <= 0:
            raise ValueError("at least one weight must be positive")
        return self

    def values(self) -> tuple[float, ...]:
        return tuple(getattr(self, name) for name in DIMENSIONS)

    def items(self) -> Iterator[tuple[str, float]]:
        return iter(zip(DIMENSIONS, self.values()))

    def dot(self, vector: ScoreVector) -> float:
        return sum(w * v for w, v in zip(self.values(), vector.values()))

    def scaled(self, dimension: str, factor: float) -> "Weights":
        return Weights(**{**dict(self.items()), dimension: getattr(self, dimension) * factor})

    def normalized(self) -> "Weights":
        total = sum(self.values())
        return Weights(**{name: value / total for name, value in self.items()})
