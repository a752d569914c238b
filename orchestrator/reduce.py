"""The reduce step: a worker whose input is the map results; hierarchical when they do not fit.

The results go into the reduce worker's first message. When they exceed its chunk budget
(`reduce.chunk_tokens`, default half the context budget), they are reduced in groups first
(`reduce-1-0`, `reduce-1-1`, ...), then the partial answers, level by level, until one final
`reduce` task sees everything. The final answer is written to `reduce/<output>`.

Each step is paid once per run: its record goes to the ledger (keyed by step id and a digest of its
model and prompt) as it finishes, and a resumed run reuses it. Its memory commit is keyed by
(run, step@digest, attempt), so a step that did run again after a crash does not commit twice.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Protocol, get_args

from configs import Settings
from memory_shared.fsutil import atomic_write_text
from orchestrator.executor import Pool
from orchestrator.ledger import RunDir
from orchestrator.maploop import MapLoop
from orchestrator.records import Job, ReduceResult, TaskRecord, Usage
from orchestrator.spec import Plan, PlannedTask
from worker.answers import NOTHING_RAN
from worker.context.cut import cut_head_tail
from worker.types import Status

if TYPE_CHECKING:
    from orchestrator.views.progress import Display

MAX_LEVELS = 6
STATUSES = "|".join(get_args(Status))  # a task status, as a head names it
ENTRY_STATUS = re.compile(rf"### .*? \(({STATUSES})\)\n")
HEAD = re.compile(rf"^### (\S+) \(({STATUSES})\)$", re.M)  # _entry's head, as an answer copies it
STATUS_NOTE = ("Each result is headed by its task's status: succeeded (backed by a successful tool run or check), "
               "unverified (answered, but nothing backs the answer; the reason says why), or failed. Do not "
               "present an unverified or failed answer as established.")


class RunHost(Protocol):
    """What the reduce step uses of the run it ends (orchestrator/driver.py's Driver)."""

    plan: Plan
    run: RunDir
    settings: Settings
    retries: int

    def job(self, task: PlannedTask, attempt: int, base: Optional[Path] = None, step: Optional[str] = None) -> Job: ...

    def timeout_of(self, task: PlannedTask) -> Optional[float]: ...


class Reducer:
    def __init__(self, driver: RunHost, pool: Pool[Any], display: Display):
        self.driver, self.pool, self.display = driver, pool, display
        if driver.plan.reduce is None:
            raise ValueError("this run's plan has no reduce step")
        self.cfg = driver.plan.reduce
        ctx = driver.settings.context
        self.budget_chars = (self.cfg.chunk_tokens or ctx.context_tokens // 2) * ctx.chars_per_token
        self.dir = driver.run.path / "reduce"
        self.usage = Usage()
        self.levels = 0
        self.done_before = driver.run.reduce_results()
        self.reused: list[str] = []

    def run(self, results: list[TaskRecord]) -> ReduceResult:
        entries = [_entry(r) for r in results]
        statuses = [r.status for r in results]  # what the next step's inputs are: all succeeded backs its answer
        level = 0
        while True:
            groups = chunk(entries, self.budget_chars)
            if len(groups) <= 1 or level >= MAX_LEVELS:
                break
            level += 1
            tasks = [self._task(f"reduce-{level}-{i}", self._partial_prompt(group, i, len(groups)))
                     for i, group in enumerate(groups)]
            records = self._run(tasks)
            parts = {t.id: backed_by_inputs(records[t.id], _statuses_of(group)) for t, group in zip(tasks, groups, strict=True)}
            entries = [f"### part {i + 1} of {len(groups)} ({parts[t.id][0]})\n"
                       + (records[t.id].answer or records[t.id].reason) for i, t in enumerate(tasks)]
            statuses = [parts[t.id][0] for t in tasks]
        self.levels = level
        final = self._task("reduce", f"{self.cfg.prompt}\n\n{STATUS_NOTE}\n\n<results count=\"{len(results)}\">\n"
                                     + "\n\n".join(cut_head_tail(e, self.budget_chars) for e in entries) + "\n</results>")
        record = self._run([final])["reduce"]
        status, reason = backed_by_inputs(record, statuses)
        answer, restored = restore_heads(record.answer, {r.task_id: r.status for r in results})
        if restored:
            status = "unverified" if status == "succeeded" else status
            reason = f"ga restored the status its answer misstated: {', '.join(restored)}; {reason}"
        output = self.dir / self.cfg.output
        atomic_write_text(output, answer + "\n")
        summary = ReduceResult(status=status, reason=reason, answer=answer, path=str(output),
                               levels=level, usage=self.usage, memory_generation=record.memory_generation,
                               reused=self.reused)
        atomic_write_text(self.dir / "result.json", summary.model_dump_json(indent=2) + "\n")
        self.driver.run.ledger("reduce_finished", status=summary.status, levels=level, reused=len(self.reused),
                               memory_generation=summary.memory_generation)
        return summary

    def _partial_prompt(self, group: list[str], index: int, count: int) -> str:
        return (f"{self.cfg.prompt}\n\nThe results are too many for one pass: this is part {index + 1} of {count}. "
                "Reduce this part only; keep every fact the final answer may need.\n\n<results>\n"
                + "\n\n".join(group) + "\n</results>")

    def _task(self, task_id: str, prompt: str) -> PlannedTask:
        plan = self.driver.plan
        model = self.cfg.model or (plan.tasks[0].model if plan.tasks else None)
        return PlannedTask(id=task_id, prompt=prompt, inputs=[], model=model, max_turns=self.cfg.max_turns,
                           timeout=self.cfg.timeout, tools=None)

    def _run(self, tasks: list[PlannedTask]) -> dict[str, TaskRecord]:
        records: dict[str, TaskRecord] = {}
        keys = {t.id: step_key(t) for t in tasks}
        for task in tasks:
            earlier = self.done_before.get(keys[task.id])
            if earlier is not None:  # paid for by an earlier driver of this run
                records[task.id] = earlier
                self.reused.append(task.id)
                self.usage += earlier.spent
        todo = [t for t in tasks if t.id not in records]
        if not todo:
            return records

        def keep(record: TaskRecord) -> bool:
            if record.task_id in records:
                return False
            records[record.task_id] = record
            self.driver.run.ledger(record.status, record.task_id, attempt=record.attempt, reason=record.reason,
                                   step="reduce")
            self.driver.run.add_reduce_result(keys[record.task_id], record)  # after: the status line closes
            # the attempt for `ga runs show`; a kill between the two lines costs this step once more
            self.usage += record.spent
            return True

        def job(task: PlannedTask, attempt: int) -> Job:
            return self.driver.job(task, attempt, base=self.dir, step=keys[task.id])

        loop = MapLoop(self.pool, self.driver.run, job, retries=self.driver.retries, timeout_of=self.driver.timeout_of,
                       record=keep)
        outcome = loop.run_all(todo)
        for task in tasks:
            records.setdefault(task.id, TaskRecord(task_id=task.id, status="failed",
                                                   reason=f"not finished ({outcome.stop or 'unknown'})"))
        return records


def backed_by_inputs(record: TaskRecord, inputs: list[str]) -> tuple[Status, str]:
    """A reduce step's status: its answer is a synthesis of its inputs, so with no tool run behind it (it needed
    none) it is backed when every input succeeded. A failed run of its own, or a check, still decides."""
    if record.status == "unverified" and record.reason.startswith(NOTHING_RAN) and inputs \
            and all(status == "succeeded" for status in inputs):
        return "succeeded", f"backed by its {len(inputs)} succeeded input(s)"
    return record.status, record.reason


def restore_heads(answer: str, statuses: dict[str, str]) -> tuple[str, list[str]]:
    """`answer` with each copied `### <task> (<status>)` head saying its task's real status, and what was
    restored. The heads are ga's labels, not the model's to change: live, the 1.5B reduce headed an
    unverified fib "(succeeded)" in the file the user reads."""
    restored: list[str] = []

    def real(found: re.Match[str]) -> str:
        task, said = found.group(1), found.group(2)
        if task not in statuses or statuses[task] == said:
            return found.group(0)
        restored.append(f"{task} {statuses[task]} (it said {said})")
        return f"### {task} ({statuses[task]})"

    return HEAD.sub(real, answer), restored


def _statuses_of(group: list[str]) -> list[str]:
    """The statuses of the entries in `group` (each entry's head names it: `### id (status)` or `### part ...`)."""
    found = [ENTRY_STATUS.match(entry) for entry in group]
    return [m.group(1) if m else "unverified" for m in found]


def step_key(task: PlannedTask) -> str:
    """A reduce step's identity within its run: its id and what it is asked (other map results, another step)."""
    digest = hashlib.sha256(f"{task.model or ''}\n{task.prompt}".encode()).hexdigest()[:16]
    return f"{task.id}@{digest}"


def _entry(record: TaskRecord) -> str:
    head = f"### {record.task_id} ({record.status})"
    body = record.answer
    if record.status != "succeeded":
        body = f"{body}\n(reason: {record.reason})".strip()
    return f"{head}\n{body}"


def chunk(entries: list[str], budget: int) -> list[list[str]]:
    """Greedy groups of whole entries, each under budget chars (an oversized entry is cut to fit alone)."""
    groups: list[list[str]] = [[]]
    size = 0
    for entry in entries:
        entry = cut_head_tail(entry, budget)
        if groups[-1] and size + len(entry) + 2 > budget:
            groups.append([])
            size = 0
        groups[-1].append(entry)
        size += len(entry) + 2
    return [g for g in groups if g] or [[]]
