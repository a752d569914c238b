"""The format of `skilltree.json`: the skill tree (categories holding skills, the planner's weights and their
history), its score vectors, and `parse`, which the consolidation gate runs on every change a task makes to it
(memory_shared/gate.py). The planner's behaviour over the tree lives in skilltree/.

File format — `skilltree.json` at the root of every memory generation, changed only by store
transactions (skilltree/tree.py's `save(txn, tree)` inside `MemoryStore.transaction(...)`):

    {
      "version": 1,
      "categories": {"web": {"name": "web", "description": "", "created": "2026-01-01T00:00:00Z"}},
      "skills": {
        "scrape-tables": {
          "id": "scrape-tables", "name": "Scrape tables", "category": "web",
          "description": "one line",
          "sop": "L3/web/scrape-tables.md",            # the L3 SOP; reading it = one use
          "scripts": ["L3/web/scrape_tables.py"],
          "created": "2026-01-01T00:00:00Z",
          "report": "reports/2026-01-01-scrape-tables.md",   # the exploration report that made it
          "evidence": ["reports/<run>/<task>.md"],         # reports that verified it again (optional)
          "predicted": 7.4,                               # planner score at creation (0-10)
          "score_vector": {"breadth": 10, "depth": 0, "utility": 8, "innovation": 6},
          "verified": true,
          "feedback": null     # set once by `ga skills feedback` when the 30-day rule judged it
        }
      },
      "weights": {"breadth": 0.3, "depth": 0.2, "utility": 0.3, "innovation": 0.2},
      "weight_history": [{"time": "...", "before": {...}, "after": {...}, "reason": "...",
                          "adjustments": [{"skill": "...", "rule": "over", "dimension": "utility",
                                           "factor": 0.9, "predicted": 8.6, "used": 1}]}]
    }

Tolerant reading: a missing file is an empty tree; `weights` may be a mapping, a list of four
numbers or {"current": ..., "history": [...]}; `categories` may be a list of names; `skills` may be
a list; a skill's id defaults to its key; a skill whose category is not listed creates it; unknown
top-level keys are kept on save. A category exists once it is listed (it may hold no skills).
"""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from typing import Annotated, Iterator, Optional

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from .layers import SKILLTREE
from .usererrors import validation_line

DIMENSIONS: tuple[str, ...] = ("breadth", "depth", "utility", "innovation")
INITIAL_WEIGHTS: dict[str, float] = {"breadth": 0.3, "depth": 0.2, "utility": 0.3, "innovation": 0.2}


def _from_sequence(data: object) -> object:
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
    def _coerce(cls, data: object) -> object:
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
    def _coerce(cls, data: object) -> object:
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


TREE_FILE = SKILLTREE


class SkillTreeError(ValueError):
    """skilltree.json cannot be read; str() is one line naming the file, the place and the fix."""


def utc(value: datetime) -> datetime:
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def slugify(text: str, fallback: str = "skill") -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:60].rstrip("-") or fallback


UtcDatetime = Annotated[datetime, AfterValidator(utc)]  # naive times are taken as UTC


class _Model(BaseModel):
    """Immutable, so trees can share them: a change is a new tree with new dicts, never an edit."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Adjustment(_Model):
    """One application of the 30-day rule that changed a weight."""

    skill: str
    rule: str  # "over": predicted > 8, used < 3 (x0.9); "under": predicted < 5, used > 5 (x1.1)
    dimension: str
    factor: float
    predicted: float
    used: int


class WeightRecord(_Model):
    time: UtcDatetime
    before: Weights
    after: Weights
    reason: str = ""
    adjustments: list[Adjustment] = []


class Feedback(_Model):
    """The 30-day verdict on a skill, recorded so a skill is judged exactly once."""

    time: UtcDatetime
    used: int
    rule: Optional[str] = None  # None: neither rule applied
    dimension: Optional[str] = None


class Category(_Model):
    name: str
    description: str = ""
    created: Optional[UtcDatetime] = None


class Skill(_Model):
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    category: str = Field(min_length=1)
    description: str = ""
    sop: Optional[str] = None
    scripts: list[str] = []
    created: UtcDatetime
    report: Optional[str] = None
    evidence: list[str] = []  # later reports that verified the same skill again (exploration files no duplicate)
    predicted: Optional[float] = None
    score_vector: Optional[ScoreVector] = None
    verified: bool = False
    feedback: Optional[Feedback] = None


class SkillTree(BaseModel):
    model_config = ConfigDict(extra="allow")
    version: int = 1
    categories: dict[str, Category] = {}
    skills: dict[str, Skill] = {}
    weights: Weights = Weights()
    weight_history: list[WeightRecord] = []

    @model_validator(mode="before")
    @classmethod
    def _tolerate(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        weights = data.get("weights")
        if isinstance(weights, dict) and "current" in weights:
            data["weights"] = weights["current"]
            data.setdefault("weight_history", weights.get("history", []))
        if weights is None:
            data.pop("weights", None)
        categories = data.get("categories") or {}
        if isinstance(categories, list):
            categories = {name: {"name": name} for name in categories}
        data["categories"] = {key: {"name": key, **(value or {})} if isinstance(value, dict) or value is None
                              else value for key, value in categories.items()}
        skills = data.get("skills") or {}
        if isinstance(skills, list):
            skills = {item.get("id") or slugify(item.get("name", "")): item for item in skills if isinstance(item, dict)}
        data["skills"] = {key: {"id": key, **value} if isinstance(value, dict) else value for key, value in skills.items()}
        return data

    @model_validator(mode="after")
    def _categories_of_skills_exist(self) -> "SkillTree":
        for skill in self.skills.values():
            if skill.category not in self.categories:
                self.categories[skill.category] = Category(name=skill.category)
        return self

    def add(self, skill: Skill) -> "SkillTree":
        """A new tree with `skill` (and its category, if new). An existing id is an error."""
        if skill.id in self.skills:
            raise ValueError(f"skill '{skill.id}' already exists in category '{self.skills[skill.id].category}'")
        categories = dict(self.categories)
        if skill.category not in categories:
            categories[skill.category] = Category(name=skill.category, created=skill.created)
        return self.copy_with(categories=categories, skills={**self.skills, skill.id: skill})

    def copy_with(self, **changes: object) -> "SkillTree":
        """A new tree sharing the (immutable) skills and categories, with fresh containers."""
        fresh = {"categories": dict(self.categories), "skills": dict(self.skills),
                 "weight_history": list(self.weight_history)}
        return self.model_copy(update={**fresh, **changes})

    def skills_in(self, category: str) -> list[Skill]:
        return [s for s in self.skills.values() if s.category == category]

    def find(self, target: str) -> Optional[Skill]:
        """A skill by id, else by name (case-insensitive), else by the slug of `target`; None when absent."""
        return TreeIndex(self).find(target)

    def category_name(self, name: str) -> str:
        """The existing category spelled like `name` up to case and punctuation, else the slug of
        `name` (so two spellings of one new category are one category)."""
        return TreeIndex(self).category_name(name)

    def unique_id(self, name: str) -> str:
        base = slugify(name)
        candidate, n = base, 2
        while candidate in self.skills:
            candidate, n = f"{base}-{n}", n + 1
        return candidate

    def to_json(self) -> str:
        data = self.model_dump(mode="json")
        data["categories"] = dict(sorted(data["categories"].items()))
        data["skills"] = dict(sorted(data["skills"].items()))
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


class TreeIndex:
    """Name and slug lookups over one tree, built once (planning resolves many candidates)."""

    def __init__(self, tree: SkillTree):
        self.tree = tree
        self.by_name: dict[str, str] = {}
        for skill_id in sorted(tree.skills):
            self.by_name.setdefault(tree.skills[skill_id].name.strip().lower(), skill_id)
        self.categories: dict[str, str] = {}
        for name in sorted(tree.categories):
            self.categories.setdefault(slugify(name, fallback="misc"), name)

    def find(self, target: str) -> Optional[Skill]:
        skills = self.tree.skills
        skill_id = target if target in skills else self.by_name.get(target.strip().lower()) or slugify(target)
        return skills.get(skill_id)

    def category_name(self, name: str) -> str:
        if name in self.tree.categories:
            return name
        wanted = slugify(name, fallback="misc")
        return self.categories.get(wanted, wanted)


def parse(text: str, source: str = TREE_FILE) -> SkillTree:
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise SkillTreeError(f"{source}:{exc.lineno}: not valid JSON ({exc.msg}); fix the file or restore "
                             f"a previous generation with `ga memory log`") from None
    try:
        return SkillTree.model_validate(data)
    except ValidationError as exc:
        raise SkillTreeError(f"{source}: {validation_line(exc, top='(top level)')}; see the format in memory_shared/skilltree_format.py") from None
