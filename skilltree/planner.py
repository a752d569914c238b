"""The model-facing half of planning: ask for K candidates, judge them in one call, then hand
over to the pure scoring and selection in skilltree.plan.

Both replies must be JSON (a bare array, an object holding one, or either in a ``` fence). A
reply that does not parse, or has an item that does not validate, is retried once with the
problems quoted; after that the valid items of the better attempt are kept and every invalid
item is dropped with a log line (and recorded in the plan's `dropped`).
"""
from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Callable, Mapping, Optional, Sequence, TypeVar

import structlog
from pydantic import ConfigDict, Field, ValidationError

from memory_shared.usererrors import validation_line
from skilltree.plan import Dropped, ExplorationPlan, score_and_select, write_plan
from skilltree.reports import ExplorationReport
from skilltree.scoring import Candidate, Judgement
from skilltree.selection import MIN_CATEGORIES
from skilltree.summary import summary_for_prompt
from skilltree.tree import SkillTree

if TYPE_CHECKING:
    from configs.settings import PlannerSettings
    from worker.model import ChatMessage, Model

log = structlog.get_logger("skilltree.planner")
PROMPTS = Path(__file__).with_name("prompts")
FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


class IndexedJudgement(Judgement):
    model_config = ConfigDict(extra="ignore")
    index: int = Field(ge=1)


Item = TypeVar("Item")
Problem = tuple[str, object]  # what is wrong, and the item it is wrong with
Check = Callable[[list[object]], tuple[list[Item], list[Problem]]]  # a reply's items -> (the valid ones, problems)


def parse_json_array(content: str) -> list[object]:
    """The JSON array in a reply, its items unchecked; ValueError saying what is wrong otherwise."""
    texts = [content.strip(), *FENCE.findall(content)]
    start, end = content.find("["), content.rfind("]")
    if 0 <= start < end:
        texts.append(content[start:end + 1])
    for text in texts:
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict):
            arrays = [value for value in data.values() if isinstance(value, list)]
            if len(arrays) == 1:
                data = arrays[0]
        if isinstance(data, list):
            return data
    raise ValueError("the reply is not a JSON array")


class Planner:
    """Talks to one model (worker.model.Model); counts calls and tokens."""

    def __init__(self, model: Model, *, candidates: int = 12, summary_chars: int = 3000):
        self.model = model
        self.k = candidates
        self.summary_chars = summary_chars
        self.calls = 0
        self.tokens = 0
        self.dropped: list[Dropped] = []

    def _ask(self, messages: list[ChatMessage]) -> str:
        reply = self.model.chat(messages, [])
        self.calls += 1
        self.tokens += reply.usage.total
        return reply.content or ""

    def _drop(self, stage: str, reason: str, item: object = None) -> None:
        log.warning("planner.dropped", stage=stage, reason=reason, item=str(item)[:200] if item is not None else None)
        self.dropped.append(Dropped(stage=stage, reason=reason, item=item))

    def _two_attempts(self, stage: str, prompt: str, check: Check[Item]) -> list[Item]:
        """Ask, validate with `check(array) -> (valid, problems)`; retry once when anything is wrong."""
        messages: list[ChatMessage] = [{"role": "user", "content": prompt}]
        attempts: list[tuple[list[Item], list[Problem]]] = []
        for attempt in range(2):
            content = self._ask(messages)
            problems: list[Problem]
            try:
                valid, problems = check(parse_json_array(content))
            except ValueError as exc:
                valid = []
                problems = [(str(exc), content[:500])]
            attempts.append((valid, problems))
            if not problems:
                break
            if attempt == 0:
                log.info("planner.retry", stage=stage, problems=[p for p, _ in problems][:5])
                listed = "\n".join(f"- {p}" for p, _ in problems[:10])
                messages.extend([{"role": "assistant", "content": content},
                             {"role": "user", "content": f"Your reply could not be used:\n{listed}\n"
                                                         "Reply again with the complete JSON array only."}])
        valid, problems = max(reversed(attempts), key=lambda a: len(a[0]))
        for reason, item in problems:
            self._drop(stage, reason, item)
        return valid

    def propose(self, tree: SkillTree, usage: Mapping[str, int], reports: Sequence[ExplorationReport] = ()) -> list[Candidate]:
        recent = "\n".join(f"- [{'verified' if r.verified else 'unverified'}] {r.title} ({r.category}/{r.skill})"
                           for r in reports[:10]) or "(none yet)"
        prompt = Template((PROMPTS / "propose.md").read_text()).substitute(
            summary=summary_for_prompt(tree, self.summary_chars, usage), reports=recent, k=self.k)

        def check(items: list[object]) -> tuple[list[Candidate], list[Problem]]:
            valid: list[Candidate] = []
            problems: list[Problem] = []
            titles: set[str] = set()
            for n, item in enumerate(items, 1):
                try:
                    candidate = Candidate.model_validate(item)
                except ValidationError as exc:
                    problems.append((f"item {n}: {validation_line(exc, top='item', every=True, quote=False)}", item))
                    continue
                if candidate.title.casefold() in titles:
                    problems.append((f"item {n}: duplicate title {candidate.title!r}", item))
                    continue
                titles.add(candidate.title.casefold())
                valid.append(candidate)
            if len(valid) > self.k:
                problems += [(f"more than {self.k} candidates", c.model_dump()) for c in valid[self.k:]]
                valid = valid[: self.k]
            return valid, problems

        return self._two_attempts("propose", prompt, check)

    def judge(self, tree: SkillTree, usage: Mapping[str, int], candidates: Sequence[Candidate]) -> list[Optional[Judgement]]:
        """One call for the whole batch; judgements[i] is None when candidate i got no valid one."""
        if not candidates:
            return []
        listed = json.dumps([{"index": n, **c.model_dump()} for n, c in enumerate(candidates, 1)], indent=1, ensure_ascii=False)
        prompt = Template((PROMPTS / "judge.md").read_text()).substitute(
            summary=summary_for_prompt(tree, self.summary_chars, usage), candidates=listed)
        n = len(candidates)

        def check(items: list[object]) -> tuple[list[IndexedJudgement], list[Problem]]:
            valid: dict[int, IndexedJudgement] = {}
            problems: list[Problem] = []
            for item in items:
                try:
                    judgement = IndexedJudgement.model_validate(item)
                except ValidationError as exc:
                    problems.append((f"judgement {item!r:.80}: {validation_line(exc, top='item', every=True, quote=False)}", item))
                    continue
                if judgement.index > n or judgement.index in valid:
                    problems.append((f"judgement index {judgement.index} is not a single candidate 1-{n}", item))
                    continue
                valid[judgement.index] = judgement
            problems += [(f"candidate {i} has no valid judgement; left out", candidates[i - 1].model_dump())
                         for i in range(1, n + 1) if i not in valid]
            return list(valid.values()), problems

        by_index = {j.index: Judgement(utility=j.utility, innovation=j.innovation)
                    for j in self._two_attempts("judge", prompt, check)}
        return [by_index.get(i) for i in range(1, n + 1)]


def plan_exploration(model: Model, tree: SkillTree, usage: Mapping[str, int], *, now: datetime, candidates: int = 12,
         batch_size: int = 4, reports: Sequence[ExplorationReport] = (), run_dir: Optional[Path] = None,
         generation: Optional[int] = None, min_categories: int = MIN_CATEGORIES,
         planner_settings: Optional[PlannerSettings] = None, recent: Optional[Mapping[str, int]] = None,
         trend: Optional[Mapping[str, int]] = None) -> ExplorationPlan:
    """Propose, judge, score, select (planner_settings: configs PlannerSettings, its rule and
    parameters; recent/trend: uses per skill in its two windows); plan.json to run_dir when given."""
    planner = Planner(model, candidates=candidates)
    proposed = planner.propose(tree, usage, reports)
    judgements = planner.judge(tree, usage, proposed)
    kept = [(c, j) for c, j in zip(proposed, judgements, strict=False) if j is not None]
    result = score_and_select(tree, usage, [c for c, _ in kept], [j for _, j in kept], batch_size=batch_size,
                              now=now, min_categories=min_categories, generation=generation,
                              planner=planner_settings, recent=recent, trend=trend)
    result = result.model_copy(update={"dropped": planner.dropped, "model_calls": planner.calls, "tokens": planner.tokens})
    if run_dir is not None:
        write_plan(run_dir, result)
    log.info("planner.planned", candidates=len(result.candidates), selected=len(result.selected),
             categories=result.categories_covered, dropped=len(result.dropped), calls=planner.calls)
    return result
