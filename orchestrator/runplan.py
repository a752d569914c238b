"""The plan `ga fanout` runs: its tasks file's, or for `--resume RUN` without a file the run's own
(spec.yaml in the run directory), with the model switch applied.

Which model a task uses, first found of: `--model`, `GA_MODEL` (worker.models.model_override), the tasks
file's (the task's, else `defaults:`), settings.worker.model. The switch covers the reduce step too.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional

from orchestrator.fanout import FanoutError, build_plan
from orchestrator.ledger import RunDir
from orchestrator.spec import Plan
from worker.models import model_override


def plan_for(file: Optional[Path], resume: Optional[str], runs_dir: Path, model: Optional[str]) -> Plan:
    """The tasks file's plan, or the resumed run's own when no file is given; FanoutError if neither is."""
    stored: Optional[Plan] = None
    if file is not None:
        plan = build_plan(file)
        stored = _stored_or_none(runs_dir, resume) if resume else None
    elif resume:
        plan = stored = stored_plan(runs_dir, resume)
    else:
        raise FanoutError("give a tasks file (see configs/examples/quickstart.yaml), or --resume RUN to finish a run")
    plan = with_model(plan, model_override(model))
    if stored is not None:
        check_same_models(plan, stored)
    return plan


def check_same_models(plan: Plan, stored: Plan) -> None:
    """A resumed run keeps its tasks' models (they are part of what a task is): say which, before the
    fingerprint check would call it a different tasks file."""
    before = {task.id: task.model for task in stored.tasks}
    for task in plan.tasks:
        if task.id in before and before[task.id] != task.model:
            old = before[task.id]
            fix = f"resume with --model {old}" if old else "resume without --model and GA_MODEL"
            raise FanoutError(f"task '{task.id}' of this run ran on model {old or '(the configured default)'}, not "
                              f"{task.model or '(the configured default)'}; {fix}, or start a new run without --resume")


def stored_plan(runs_dir: Path, resume: str) -> Plan:
    """The plan a run started with, from its spec.yaml (ga's own file, written when the run was created)."""
    try:
        run = RunDir.existing(runs_dir, resume)
    except FileNotFoundError as exc:
        raise FanoutError(str(exc)) from None
    try:
        return Plan.from_dict(run.spec())
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise FanoutError(f"{run.path / 'spec.yaml'}: not a run's plan ({type(exc).__name__}: {exc}); resume with "
                          f"the tasks file instead: `ga fanout FILE --resume {run.run_id}`") from None


def _stored_or_none(runs_dir: Path, resume: str) -> Optional[Plan]:
    try:
        return stored_plan(runs_dir, resume)
    except FanoutError:
        return None  # fanout() says what is wrong with the run


def with_model(plan: Plan, name: Optional[str]) -> Plan:
    """Every task and the reduce step on model `name` (None: the plan as it is)."""
    if not name:
        return plan
    name = _absolute_script(name)
    tasks = [dataclasses.replace(task, model=name) for task in plan.tasks]
    reduce = plan.reduce.model_copy(update={"model": name}) if plan.reduce else None
    return dataclasses.replace(plan, tasks=tasks, reduce=reduce)


def _absolute_script(name: str) -> str:
    """`scripted:FILE` relative to the current directory, made absolute: the run's spec.yaml records it and
    a resume from another directory must find the same file (worker.models finds shipped examples)."""
    if not name.startswith("scripted:"):
        return name
    path = Path(name[len("scripted:"):]).expanduser()
    return f"scripted:{path.resolve()}" if not path.is_absolute() and path.is_file() else name
