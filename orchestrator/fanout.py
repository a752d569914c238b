"""`fanout(...)`: the entry `ga fanout` and a parent agent's code_run both use.

    from orchestrator import fanout
    run = fanout("tasks.yaml")                     # or a dict spec, or a list of prompts
    run = fanout(["summarize a.md", "summarize b.md"], reduce={"prompt": "merge them"})
    run.status, run.run_dir, run.results, run.reduce, run.exit_code

Inside a task's code_run it starts nothing itself: it sends the spec to the task's model gateway
(worker/gateway.py, GA_GATEWAY names its socket), and the parent's own process, outside the sandbox, runs
it (`serve_nested`): a nested run under the parent task's directory, its usage counted in the parent task's
and held to what the parent may still spend, never deeper than max_depth. The script gets the run's public
result back, the same `Run` as a top-level call.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import tempfile
import threading
from contextlib import closing, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Optional, TypedDict, Union

import structlog

from configs import Settings, load_settings
from memory_shared import fsutil
from memory_shared.fsutil import atomic_write_text
from memory_shared.jsontypes import JSONObject
from memory_shared.yamlsource import YamlError, load_text
from orchestrator import spec as specs
from orchestrator.executor import Executor
from orchestrator.inputfiles import read_input, sandbox_may
from orchestrator.ledger import RunDir, new_run_id
from orchestrator.preflight import ModelBook, PreflightError, prompt_limit
from orchestrator.preflight import preflight as check_before_start
from orchestrator.records import Run, Usage  # Run: the result, public as fanout.Run
from orchestrator.spec import Plan, PlannedTask, SpecError
from worker import gateway, sandbox
from worker.modelconfig import (
    ModelConfig,
    ModelConfigError,
    load_model_entries,
    model_override,
    resolve_model,
    user_model_files,
)
from worker.runlog import run_log

if TYPE_CHECKING:
    from orchestrator.driver import Nesting

log = structlog.get_logger("ga.fanout")
SpecInput = Union[str, Path, dict, list, Plan]
REQUEST_SETTINGS = "request_settings.json"  # in a run's directory, for `ga replay` (orchestrator/replay.py)
REQUEST_SETTINGS_FORMAT = 1


class PlanRow(TypedDict):
    """A task of `--dry-run`'s plan, with the upper bound on its cost (None: a model without prices)."""

    id: str
    model: str
    max_turns: int
    timeout: Optional[float]
    inputs: list[str]  # base names
    prompt: str
    max_cost: Optional[float]


class BudgetLimits(TypedDict):
    tokens: Optional[int]
    cost: Optional[float]


class DryRun(TypedDict):
    """What `--dry-run` prints (`--json`: as is)."""

    name: str
    tasks: list[PlanRow]  # the reduce step last, as "(reduce)"
    total_max_cost: Optional[float]
    concurrency: int
    retries: int
    budget: BudgetLimits
    reduce: Optional[dict[str, object]]  # the reduce block's fields
    memory_commit: bool


class FanoutError(ValueError):
    """Bad input (spec, resume, depth, model, cluster address): nothing was started. One line per problem."""


def fanout(spec: SpecInput, *, workers: Optional[int] = None, resume: Optional[str] = None, retry_failed: bool = False,
           address: Optional[str] = None, out: Optional[Union[str, Path]] = None, settings: Optional[Settings] = None,
           display: Optional[str] = None, preflight: bool = True, nest: Optional[Nesting] = None,
           cancel: Optional[threading.Event] = None, **top: object) -> Run:
    """Run every task of `spec` on the worker pool (in this process, or on Ray: orchestrator/executor.py), then
    the reduce step; see the module doc.

    `top` sets top-level spec keys when `spec` is a list of prompts (reduce=..., defaults=..., budget=...).
    display: "live", "log" or "quiet" (default: quiet when nested, else live on a terminal, log otherwise).
    preflight: False skips the endpoint probe (the local checks always run; orchestrator/preflight.py).
    nest, cancel: set by `serve_nested` (where the run stands; set when it must stop).
    """
    if nest is None and os.environ.get(gateway.ENV_SOCKET):
        return _through_gateway(spec, top, workers=workers, resume=resume, retry_failed=retry_failed,
                                preflight=preflight, fixed={"address": address, "out": out})
    if nest is None and os.environ.get(sandbox.ENV_MARK) == "bwrap":
        raise FanoutError("nested fan-out refused: this code_run has no model gateway (sandbox.network: off); "
                          "do the work in the current task, or let the parent's sandbox reach its gateway")
    from orchestrator.driver import Driver, Nesting  # here: +92 modules at every `ga` start (`ga --help` too)

    settings = settings or load_settings()
    nest = nest or Nesting()
    plan = build_plan(spec, **top)
    max_depth = nest.limit(plan.max_depth if plan.max_depth is not None else settings.fanout.max_depth)
    if nest.depth > max_depth:
        raise FanoutError(f"nested fan-out refused: depth {nest.depth} exceeds max_depth {max_depth}; do this part "
                          "of the work in the current task (or raise max_depth in the top-level tasks file)")
    runs_dir = Path(out) if out else (nest.runs_dir() or Path(settings.fanout.runs_dir))
    models = resolve_models(plan, settings)
    check_prompts(plan, settings, models)
    try:
        check_before_start(settings, models, runs_dir, probe_endpoints=preflight, check_memory=not nest.depth)
    except PreflightError as exc:
        raise FanoutError(str(exc)) from None
    try:
        executor = open_executor(settings.fanout.executor, address or nest.address or settings.fanout.address,
                                 settings.fanout.num_cpus)
    except RuntimeError as exc:  # pool.ClusterError: the cluster cannot be started or reached
        raise FanoutError(str(exc)) from None
    run, todo, spent = open_run(plan, runs_dir, resume, retry_failed)
    try:
        if not resume:
            write_request_settings(run.path, settings, models)  # what `ga replay` needs to build the same requests
        driver = Driver(plan, run, settings, models, nest, max_depth, executor,
                        workers=workers or plan.concurrency or settings.fanout.concurrency,
                        display=display or ("quiet" if nest.depth else None), cancel=cancel)
    except BaseException:
        if not resume:
            discard_run(run)  # nothing ran: no empty run directory is left behind
        raise
    try:
        with run_log(run.path):  # the run's info lines; stderr shows warnings unless --log-level says more
            return driver.execute(todo, spent, resumed=resume is not None)
    except BaseException:
        if not resume and not run.planned():
            discard_run(run)  # its plan could not be written (a full disk): a run nobody can show or resume
        raise


def choose_executor(executor: str, address: Optional[str]) -> str:
    """"local" or "ray", by the rule in orchestrator/executor.py's doc."""
    if executor != "auto":
        return executor
    if address:
        return "ray"
    ray = sys.modules.get("ray")
    return "ray" if ray is not None and ray.is_initialized() else "local"


def open_executor(executor: str, address: Optional[str], num_cpus: Optional[int]) -> Executor:
    """The executor for this run; a cluster that cannot be reached raises pool.ClusterError."""
    if choose_executor(executor, address) == "local":
        from orchestrator.local import LocalExecutor  # here: +83 modules at every `ga` start; a Ray run needs none

        return LocalExecutor()
    from orchestrator.pool import RayExecutor  # Ray (optional): imported only by a run on Ray

    return RayExecutor(address, num_cpus)


def write_request_settings(run_path: Path, settings: Settings, models: dict[Optional[str], ModelConfig]) -> None:
    """What shapes a run's requests besides its spec: the worker and context settings and each model's
    config (the context window sizes the context; key *names* only, never a key)."""
    data = {"format": REQUEST_SETTINGS_FORMAT, "worker": settings.worker.model_dump(mode="json"),
            "context": settings.context.model_dump(mode="json"),
            "models": {str(name): config.model_dump(mode="json") for name, config in models.items()}}
    atomic_write_text(Path(run_path) / REQUEST_SETTINGS, json.dumps(data, indent=1) + "\n")


def build_plan(spec: SpecInput, **top: object) -> Plan:
    try:
        if isinstance(spec, Plan):
            return spec
        if isinstance(spec, (str, Path)):
            return specs.load(Path(spec))
        if isinstance(spec, dict):
            return specs.from_data({**spec, **top})
        if isinstance(spec, list):
            return specs.from_prompts(spec, **top)
    except SpecError as exc:
        raise FanoutError(str(exc)) from None
    raise FanoutError(f"fanout() takes a tasks file path, a spec dict, a list of prompts or a Plan (got {type(spec).__name__})")


# ---- the plan `ga fanout` runs ----
# Its tasks file's, or for `--resume RUN` without a file the run's own (spec.jsonl in the run directory), with the
# model switch applied. Which model a task uses, first found of: `--model`, `GA_MODEL`
# (worker.modelconfig.model_override), the tasks file's (the task's, else `defaults:`), settings.worker.model. The
# switch covers the reduce step too.


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
    """The plan a run started with, from its spec.jsonl (ga's own file, written when the run was created)."""
    try:
        run = RunDir.existing(runs_dir, resume)
    except FileNotFoundError as exc:
        raise FanoutError(str(exc)) from None
    try:
        return Plan.from_dict(run.spec())
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise FanoutError(f"{run.spec_path}: not a run's plan ({type(exc).__name__}: {exc}); resume with "
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
    """`scripted:FILE` relative to the current directory, made absolute: the run's spec.jsonl records it and
    a resume from another directory must find the same file (worker.modelconfig finds shipped examples)."""
    if not name.startswith("scripted:"):
        return name
    path = Path(name[len("scripted:"):]).expanduser()
    return f"scripted:{path.resolve()}" if not path.is_absolute() and path.is_file() else name


def resolve_models(plan: Plan, settings: Settings) -> dict[Optional[str], ModelConfig]:
    """Every model the run uses, resolved once here (scripted files get one server, in this process)."""
    names = {t.model for t in plan.tasks}
    if plan.reduce:
        names.add(plan.reduce.model or _reduce_default_model(plan))
    models: dict[Optional[str], ModelConfig] = {}
    pending = sorted(names, key=str)
    while pending:  # the models named, then their fallbacks
        name = pending.pop(0)
        try:
            config = resolve_model(name, settings)
            config.api_key()  # fails now, not in every worker, when the key is missing
            config.chat_url()  # ... or when the URL cannot be used
        except ModelConfigError as exc:
            raise FanoutError(str(exc)) from None
        except Exception as exc:  # httpx.InvalidURL and friends: a base_url that is not a URL
            if not (isinstance(exc, ValueError) or type(exc).__name__ == "InvalidURL"):
                raise
            raise FanoutError(f"model {name or '(default)'}: its URL cannot be used ({exc}); fix base_url in "
                              "models.yaml or the scripted@URL") from None
        models[name] = config
        pending += [fallback for fallback in config.fallbacks if fallback not in models and fallback not in pending]
    return models


def check_prompts(plan: Plan, settings: Settings, models: dict[Optional[str], ModelConfig]) -> None:
    """A prompt the worker's context cannot hold is refused now, not silently cut at run time."""
    limits = {name: prompt_limit(settings, config.context_window) for name, config in models.items()}
    fallback = prompt_limit(settings, None)  # once: it reads the system prompt's file (100,000 tasks read it 100,000 times)
    try:
        specs.check_prompt_sizes(plan, lambda name: limits.get(name, fallback))
    except SpecError as exc:
        raise FanoutError(str(exc)) from None


def discard_run(run: RunDir) -> None:
    """Remove a run directory made by this process: before any task started, or one without its plan."""
    with suppress(OSError):  # a full disk: it goes all the same
        run.close()
    shutil.rmtree(run.path, ignore_errors=True)


def _reduce_default_model(plan: Plan) -> Optional[str]:
    return plan.tasks[0].model if plan.tasks else None


def open_run(plan: Plan, runs_dir: Path, resume: Optional[str], retry_failed: bool) -> tuple[RunDir, list[PlannedTask], Usage]:
    """A new run directory, or the one being resumed after checking its tasks did not change."""
    if not resume:
        return _create_run(plan, runs_dir), list(plan.tasks), Usage()
    try:
        run = RunDir.existing(runs_dir, resume)
    except FileNotFoundError as exc:
        raise FanoutError(str(exc)) from None
    try:
        before = specs.stored_fingerprints(run.spec())
    except (OSError, ValueError) as exc:
        raise FanoutError(f"{run.spec_path}: {exc}; start a new run without --resume") from None
    now = {t.id: t.fingerprint() for t in plan.tasks}
    changed = sorted(i for i in now if i in before and before[i] != now[i])
    added = sorted(set(now) - set(before))
    removed = sorted(set(before) - set(now))
    if changed or added or removed:
        parts = ([f"changed: {', '.join(changed)}"] if changed else []) + ([f"added: {', '.join(added)}"] if added else []) \
            + ([f"removed: {', '.join(removed)}"] if removed else [])
        raise FanoutError(f"run {run.run_id} was started from different tasks ({'; '.join(parts)}); restore that tasks "
                          "file to resume, or start a new run without --resume")
    if not run.lock():
        raise FanoutError(f"run {run.run_id} is still running (process {run.holder()}); wait for it to finish or "
                          "stop it (Ctrl-C) before resuming")
    run.open_files()
    if retry_failed:
        run.forget_failed()
    done = run.results()
    spent = sum((record.spent for record in done.values()), Usage())
    return run, [t for t in plan.tasks if t.id not in done], spent


def _create_run(plan: Plan, runs_dir: Path) -> RunDir:
    """A new run directory, or none at all: a failure while making it (full disk) leaves nothing."""
    run_id = new_run_id(plan.name)
    try:
        return RunDir.create(runs_dir, run_id, plan.to_dict)  # written while the run starts
    except BaseException:
        shutil.rmtree(Path(runs_dir) / run_id, ignore_errors=True)
        raise


def dry_run(spec: SpecInput, settings: Optional[Settings] = None, **top: object) -> DryRun:
    """The expanded plan with an upper bound on cost per task and in total; starts nothing."""
    with specs.collections_paused():
        return _dry_run(spec, settings, **top)


def _dry_run(spec: SpecInput, settings: Optional[Settings] = None, **top: object) -> DryRun:
    settings = settings or load_settings()
    plan = build_plan(spec, **top)
    book = ModelBook(settings)  # each model's prices and window looked up once, not once per task
    try:
        specs.check_prompt_sizes(plan, book.prompt_limit)
    except SpecError as exc:
        raise FanoutError(str(exc)) from None
    rows: list[PlanRow] = []
    total: Optional[float] = 0.0
    for task in plan.tasks:
        turns = task.max_turns or settings.worker.max_turns
        bound = book.upper_bound(task.model, turns, task.max_cost)
        total = None if bound is None or total is None else total + bound
        rows.append({"id": task.id, "model": task.model or settings.worker.model or "(default)", "max_turns": turns,
                     "timeout": task.timeout or settings.fanout.timeout, "inputs": [Path(p).name for p in task.inputs],
                     "prompt": task.prompt, "max_cost": bound})
    if plan.reduce:  # one pass; a hierarchical reduce (results over its context budget) adds passes
        model = plan.reduce.model or _reduce_default_model(plan)
        turns = plan.reduce.max_turns or settings.worker.max_turns
        bound = book.upper_bound(model, turns, None)
        total = None if bound is None or total is None else total + bound
        rows.append({"id": "(reduce)", "model": model or settings.worker.model or "(default)", "max_turns": turns,
                     "timeout": plan.reduce.timeout or settings.fanout.timeout, "inputs": [],
                     "prompt": plan.reduce.prompt, "max_cost": bound})
    if total is not None and plan.budget_cost:
        total = min(total, plan.budget_cost)
    return {"name": plan.name, "tasks": rows, "total_max_cost": total,
            "concurrency": plan.concurrency or settings.fanout.concurrency,
            "retries": plan.retries if plan.retries is not None else settings.fanout.retries,
            "budget": {"tokens": plan.budget_tokens, "cost": plan.budget_cost},
            "reduce": plan.reduce.model_dump() if plan.reduce else None,
            "memory_commit": plan.memory_commit}


# ---- nested runs: the sandbox's side and the parent's side ----


def nested_here() -> bool:
    """Whether this process is a task's script (a fan-out from here is a nested run)."""
    return bool(int(os.environ.get("GA_DEPTH") or 0) or os.environ.get(gateway.ENV_SOCKET))


def _through_gateway(spec: SpecInput, top: dict[str, object], *, workers: Optional[int], resume: Optional[str],
                     retry_failed: bool, preflight: bool, fixed: dict[str, object]) -> Run:
    """Inside a task's sandbox: the parent runs the fan-out (serve_nested); this waits for its result."""
    named = [name for name, value in fixed.items() if value is not None]
    if named:
        raise FanoutError(f"nested fan-out: {', '.join(named)} cannot be chosen from inside a task (the parent run "
                          "places its nested runs); drop the option")
    request: dict[str, object] = {"cwd": os.getcwd(), "top": top, "workers": workers, "resume": resume,
                                  "retry_failed": retry_failed, "preflight": preflight}
    if isinstance(spec, (str, Path)):
        path = Path(spec).absolute()
        try:  # read here: the parent reads nothing on the sandbox's behalf
            request.update(file=str(path), text=path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise FanoutError(f"{path}: cannot read the tasks file ({exc}); give the path of a tasks YAML file") from None
    elif isinstance(spec, dict):
        request["data"] = spec
    elif isinstance(spec, list):
        request["prompts"] = spec
    else:
        raise FanoutError("inside a task, fanout() takes a tasks file path, a spec dict or a list of prompts "
                          f"(got {type(spec).__name__})")
    try:
        status, reply = gateway.post_to_gateway(gateway.FANOUT_ROUTE, json.loads(json.dumps(request, default=str)))
    except OSError as exc:
        raise FanoutError(f"nested fan-out: the task's gateway cannot be reached ({exc}); the task may be ending") from None
    if status != 200:
        message = str((reply.get("error") or {}).get("message") or f"HTTP {status}")
        raise FanoutError(message.removeprefix("ga gateway: "))
    return Run.from_public(reply)


def serve_nested(request: JSONObject, parent: gateway.Parent) -> dict[str, object]:
    """A nested fan-out a task's code_run asked for, run in the parent's process (outside the sandbox): the
    request is untrusted input; the nested run is held to what the parent may still spend."""
    settings = parent.settings.model_copy(deep=True)
    if parent.env.get("GA_MODEL"):  # the task's model, unless the nested spec names another
        settings.worker.model = parent.env["GA_MODEL"]
    from orchestrator.driver import Nesting  # here, as in fanout(): +92 modules at every `ga` start

    plan = _nested_plan(request, parent)
    tokens, cost = parent.budget  # what the gateway holds for this run: what the task had left
    if tokens is not None:  # never 0: a budget of 0 would mean none
        left = max(1, tokens)
        plan.budget_tokens = min(plan.budget_tokens or left, left)
    if cost is not None:
        left_cost = max(1e-9, cost)
        plan.budget_cost = min(plan.budget_cost or left_cost, left_cost)
    workers = request.get("workers")
    resume = request.get("resume")
    run = fanout(plan, workers=workers if isinstance(workers, int) and workers > 0 else None,
                 resume=resume if isinstance(resume, str) else None, retry_failed=request.get("retry_failed") is True,
                 settings=settings, display="quiet", preflight=request.get("preflight") is not False,
                 nest=dataclasses.replace(Nesting.from_env(parent.env), subtree=True), cancel=parent.cancelled)
    return run.public()


def _nested_plan(request: JSONObject, parent: gateway.Parent) -> Plan:
    """The plan of a nested request; refused when it would set sandbox options or read what sandboxes hide."""
    cwd = Path(str(request.get("cwd") or parent.workdir))
    base = cwd if cwd.is_absolute() else parent.workdir
    top: JSONObject = request["top"] if isinstance(request.get("top"), dict) else {}
    source, lines = None, None
    data: JSONObject
    try:
        if "file" in request:
            source = base / str(request["file"])
            _refuse_unseen(source, "the tasks file", parent)
            data, lines = load_text(str(request.get("text") or ""), str(source))
            if not isinstance(data, dict):
                raise FanoutError(f"{source}:1: a tasks file is a mapping with 'tasks:' and/or 'matrix:'")
            base = source.parent
        elif isinstance(request.get("data"), dict):
            data = {**request["data"], **top}
        elif isinstance(request.get("prompts"), list):
            data = {**top, "tasks": [{"prompt": p} if isinstance(p, str) else p for p in request["prompts"]]}
        else:
            raise FanoutError("nested fan-out: the request names no tasks")
        with tempfile.TemporaryDirectory(prefix="ga-nested-matrix-") as private:
            data = _private_matrix_files(data, base, Path(private), parent)
            plan = specs.from_data(data, source=source, lines=lines, base_dir=base)
    except (SpecError, YamlError) as exc:
        raise FanoutError(str(exc)) from None
    for task in plan.tasks:
        if task.sandbox:
            raise FanoutError(f"nested fan-out refused: task {task.id} sets sandbox options; only the top-level "
                              "tasks file or the user's config may set them")
        for path in task.inputs:
            _refuse_unseen(Path(path), f"task {task.id}'s input", parent)
            if os.path.islink(path):  # the copy follows none (orchestrator/inputfiles.py): refused now, not later
                raise FanoutError(f"nested fan-out refused: task {task.id}'s input {path} is a symbolic link; ga "
                                  "follows no link in a nested run's inputs (give the file it points to)")
    _refuse_foreign_models(plan, parent)
    return plan


def _private_matrix_files(data: JSONObject, base: Path, private: Path, parent: gateway.Parent) -> JSONObject:
    """`data` with each matrix's items file (`from:`) read as the sandbox would read it (no link followed, its
    permission bits) into `private`, a folder only ga can write, where the spec reads it: nothing swapped after
    the check can reach the plan."""
    entry = data.get("matrix")
    if entry is None:
        return data
    copied = []
    for index, matrix in enumerate(entry if isinstance(entry, list) else [entry]):
        if isinstance(matrix, dict) and isinstance(matrix.get("from"), str):
            source = Path(os.path.abspath(base / matrix["from"]))
            _refuse_unseen(source, "a matrix's items file", parent)
            if os.path.lexists(source):  # else the spec says it is not found
                target = private / str(index) / source.name
                target.parent.mkdir()
                with closing(fsutil.Folder("/")) as root:
                    try:
                        target.write_bytes(read_input(root, str(source), follow_link=False))
                    except OSError as exc:
                        raise FanoutError(f"nested fan-out refused: matrix file {str(exc).removeprefix('input ')}") \
                            from None
                matrix = {**matrix, "from": str(target)}
        copied.append(matrix)
    return {**data, "matrix": copied if isinstance(entry, list) else copied[0]}


def _refuse_foreign_models(plan: Plan, parent: gateway.Parent) -> None:
    """A nested run's models are the task's own or those the user configured (the shipped and the user's
    models.yaml): never a `scripted@URL`, `scripted:FILE` or project model a task names, which would send
    what the task chooses wherever it chooses, and hand back what comes from there."""
    own = parent.env.get("GA_MODEL") or parent.settings.worker.model
    try:
        configured = set(load_model_entries(user_model_files()))
    except ModelConfigError as exc:
        raise FanoutError(str(exc)) from None
    named = [(f"task {t.id}", t.model) for t in plan.tasks]
    named += [("the reduce step", plan.reduce.model)] if plan.reduce else []
    for who, name in named:
        if name and name != own and name not in configured:
            shown = name if len(name) <= 80 else name[:80] + "…"
            raise FanoutError(f"nested fan-out refused: {who} names model {shown!r}, which the user has not "
                              f"configured; leave 'model' out (the task's own: {own or 'the default'}) or name one "
                              "of ~/.config/ga/models.yaml")


def _refuse_unseen(path: Path, what: str, parent: gateway.Parent) -> None:
    """ga reads nothing for a sandbox that the sandbox could not read itself: what sandboxes hide (GA_HOME's
    sessions included), the host's /tmp outside the task's writable paths (a sandbox's /tmp is its own), and
    what the permission bits keep from it (root in a sandbox has no capabilities: another user's 0600 file is
    not its to read). The copy checks the bits again on its handles (orchestrator/inputfiles.py)."""
    settings = parent.settings
    if sandbox.hidden(path, more=[settings.home_dir / name for name in sandbox.GA_HIDDEN]):
        raise FanoutError(f"nested fan-out refused: {what} {path} is hidden from sandboxes; use a file the task can read")
    real = Path(os.path.realpath(path))
    seen = [parent.workdir, *settings.sandbox.writable, *settings.worker.allow_write]
    if real.is_relative_to("/tmp") and not any(real.is_relative_to(os.path.realpath(p)) for p in seen):
        raise FanoutError(f"nested fan-out refused: {what} {path} is in the host's /tmp, which the task's sandbox "
                          "cannot see (its /tmp is its own); use a file in the task's directory")
    if not _sandbox_could_read(real):
        raise FanoutError(f"nested fan-out refused: {what} {path} is not readable by the task's sandbox (its "
                          "permission bits); a nested run gets only what its task can read")


def _sandbox_could_read(real: Path) -> bool:
    """Each folder on the path searchable and the file readable by this process without capabilities (a path
    that does not exist is for the spec to report)."""
    try:
        for folder in [*reversed(real.parents)]:
            if not sandbox_may(os.stat(folder), os.X_OK):
                return False
        return sandbox_may(os.stat(real), os.R_OK)
    except FileNotFoundError:
        return True
    except OSError:
        return False
