"""tasks.yaml: a versioned schema, expanded into a Plan of concrete tasks, every problem reported as file:line.

```yaml
version: 1
name: summaries
defaults: {model: NAME, max_turns: 20, timeout: 300, tools: [file_read, code_run], limits: {max_tokens: 50000}}
concurrency: 8          # workers at once; more tasks wait in the queue
retries: 2              # extra attempts after a worker dies
budget: {tokens: 2000000, cost: 5.0}      # no new task starts once spent
memory: {commit: true}  # verified learnings may be committed to the memory tier
max_depth: 2            # nested fan-outs from a task's code_run
tasks:
  - id: intro           # optional; generated (stable) when missing
    prompt: "Summarize intro.md in three bullet points."
    inputs: [docs/intro.md]   # copied into the worker's directory; must lie inside this file's directory
    max_turns: 10             # any default can be overridden per task
    check: {pattern: "^- ", script: "test -s summary.md"}   # optional: decides success (see below)
    truncate: true            # a prompt over the worker's context is cut instead of refused
allow_paths: [/data/shared]  # inputs may also come from here (files or directories)
matrix:                 # one task per item (a mapping, or a list of them)
  template: "Summarize {{title}} from {{url}}."
  items: [{title: A, url: "http://..."}]   # or  from: items.csv | items.jsonl
  id: "{{title}}"       # optional id template
reduce: {prompt: "Merge the summaries into one report.", output: report.md}
```
Relative paths (inputs, matrix `from`, `scripted:FILE` models) are relative to the tasks file.
`check:` (in defaults, a task or a matrix): `pattern` is a regex the answer must contain, `script`
(bash, or `type: python`; `timeout` s) runs in the task's directory through code_run with the answer
in $GA_ANSWER and must exit 0. A task whose check fails is failed and retried per `retries`; one that
passes is `succeeded` even if no tool run backs its answer (worker/taskcheck.py).
An input must resolve (symlinks followed) to a file inside the tasks file's directory or an `allow_paths:`
entry; it is copied under its own name (a symlink's name, not its target's).
"""
from __future__ import annotations

import contextlib
import csv
import difflib
import functools
import gc
import hashlib
import io
import json
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Callable, Iterator, Literal, Mapping, Optional, Sequence, TypedDict, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails

from configs.settings import NetworkMode, network_mode, sandbox_shorthand
from memory_shared.jsontypes import JSONObject
from memory_shared.usererrors import FieldError
from memory_shared.yamlsource import YamlError, current_limits, line_of, load_mapping
from orchestrator.preflight import prompt_chars
from worker.modelconfig import ModelConfigError, load_model_entries
from worker.taskcheck import TaskCheck

SPEC_VERSION = 1
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$"
PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
MEMORY_WRITE_TOOL = "start_long_term_update"
EXAMPLE = "configs/examples/quickstart.yaml"


class SpecError(ValueError):
    """Problems in a tasks file; str() is one line per problem, each `file:line: what; fix`."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


# ---- the schema -------------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)


class Limits(_Strict):
    max_tokens: Optional[int] = Field(default=None, gt=0)
    max_cost: Optional[float] = Field(default=None, gt=0)


class SandboxOption(_Strict):
    """code_run's sandbox for these tasks, over the config's `sandbox:` (writable paths are added to it)."""

    mode: Optional[Literal["bwrap", "off"]] = None
    network: Optional[NetworkMode] = None
    writable: Optional[list[str]] = None

    _shorthand = model_validator(mode="before")(sandbox_shorthand)
    _network = field_validator("network", mode="before")(network_mode)


class Options(_Strict):
    """What `defaults` sets and each task (or matrix) may override."""

    model: Optional[str] = None
    max_turns: Optional[int] = Field(default=None, ge=1)
    timeout: Optional[float] = Field(default=None, gt=0)
    tools: Optional[list[str]] = None
    limits: Optional[Limits] = None
    check: Optional[TaskCheck] = None  # {script, type, timeout, pattern}: decides success (worker/taskcheck.py)
    truncate: Optional[bool] = None  # a prompt over the worker's context is cut (not refused)
    sandbox: Optional[SandboxOption] = None


class TaskEntry(Options):
    id: Optional[str] = Field(default=None, pattern=ID_PATTERN)
    prompt: str = Field(min_length=1)
    inputs: list[str] = []


MatrixItem = Union[dict[str, object], str, int, float]  # a mapping's values fill its placeholders, else {{item}}


class Matrix(Options):
    template: str = Field(min_length=1)
    items: Optional[list[MatrixItem]] = None
    from_: Optional[str] = Field(default=None, alias="from")
    id: Optional[str] = None
    inputs: list[str] = []


class Budget(_Strict):
    tokens: Optional[int] = Field(default=None, gt=0)
    cost: Optional[float] = Field(default=None, gt=0)


class Reduce(_Strict):
    prompt: str = Field(min_length=1)
    output: str = "answer.md"
    model: Optional[str] = None
    max_turns: Optional[int] = Field(default=None, ge=1)
    timeout: Optional[float] = Field(default=None, gt=0)
    chunk_tokens: Optional[int] = Field(default=None, ge=1000)  # default: the reduce worker's context budget / 2


class MemoryOption(_Strict):
    commit: bool = True


class TasksFile(_Strict):
    version: int = SPEC_VERSION
    name: Optional[str] = Field(default=None, pattern=ID_PATTERN)
    defaults: Options = Options()
    tasks: list[TaskEntry] = []
    matrix: Optional[Union[Matrix, list[Matrix]]] = None
    concurrency: Optional[int] = Field(default=None, ge=1)
    retries: Optional[int] = Field(default=None, ge=0)
    budget: Optional[Budget] = None
    reduce: Optional[Reduce] = None
    memory: MemoryOption = MemoryOption()
    max_depth: Optional[int] = Field(default=None, ge=0)
    allow_paths: list[str] = []  # inputs may come from these files/directories besides the tasks file's

    @field_validator("version")
    @classmethod
    def _version(cls, value: int) -> int:
        if value != SPEC_VERSION:
            raise ValueError(f"unsupported version {value}; this ga reads version {SPEC_VERSION}")
        return value


# ---- the expanded plan ------------------------------------------------------------------------


class SandboxKeys(TypedDict, total=False):
    """The sandbox keys a tasks file set for a task (its defaults', its own over them), writable paths absolute."""

    mode: Literal["bwrap", "off"]
    network: NetworkMode
    writable: list[str]


class TaskOptions(TypedDict):
    """What a task takes from its own options and the file's defaults (`_Expander.merged`)."""

    model: Optional[str]
    max_turns: Optional[int]
    timeout: Optional[float]
    tools: Optional[list[str]]
    max_tokens: Optional[int]
    max_cost: Optional[float]
    check: Optional[dict[str, object]]
    truncate: bool
    sandbox: Optional[SandboxKeys]


@dataclass
class PlannedTask:
    id: str
    prompt: str
    inputs: list[str]  # absolute paths, copied into the worker's directory under their base names
    model: Optional[str]
    max_turns: Optional[int]
    timeout: Optional[float]
    tools: Optional[list[str]]
    max_tokens: Optional[int] = None
    max_cost: Optional[float] = None
    line: int = 0
    check: Optional[dict[str, object]] = None  # a TaskCheck's fields
    truncate: bool = False
    sandbox: Optional[SandboxKeys] = None

    def fingerprint(self) -> str:
        """Changes when anything that shapes the task's work changes (inputs by content)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}  # shallow: asdict deep-copies (slow at 10,000)
        data.pop("line")
        if data["check"] is None:
            data.pop("check")
        if not data["truncate"]:
            data.pop("truncate")
        if data["sandbox"] is None:
            data.pop("sandbox")
        data["inputs"] = [(Path(p).name, _file_hash(Path(p))) for p in self.inputs]
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass
class Plan:
    name: str
    source: Optional[Path]
    tasks: list[PlannedTask]
    concurrency: Optional[int] = None
    retries: Optional[int] = None
    budget_tokens: Optional[int] = None
    budget_cost: Optional[float] = None
    reduce: Optional[Reduce] = None  # its model named as the tasks' are (a scripted file resolved)
    memory_commit: bool = True
    max_depth: Optional[int] = None
    fingerprints: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        """The plan as plain data (a run's spec.jsonl); a task's unset fields are left out (100,000 tasks). The
        fingerprints kept are those of tasks with inputs (they hash the inputs' content as the run found it); any
        other task's follows from its stored fields (`stored_fingerprints`)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}  # shallow: each value is replaced or plain
        data["source"] = str(self.source) if self.source else None
        data["tasks"] = [_task_data(t) for t in self.tasks]
        data["fingerprints"] = {t.id: t.fingerprint() for t in self.tasks if t.inputs}
        data["reduce"] = self.reduce.model_dump() if self.reduce else None
        return data

    @classmethod
    def from_dict(cls, data: JSONObject) -> "Plan":
        data = dict(data)
        data["tasks"] = [PlannedTask(**{**_UNSET_TASK_FIELDS, **t}) for t in data["tasks"]]
        data["source"] = Path(data["source"]) if data.get("source") else None
        data["reduce"] = Reduce.model_validate(data["reduce"]) if data.get("reduce") else None
        return cls(**data)


_UNSET_TASK_FIELDS: dict[str, object] = {"inputs": [], "model": None, "max_turns": None, "timeout": None, "tools": None}


def stored_fingerprints(data: JSONObject) -> dict[str, str]:
    """Every task's fingerprint in a stored plan (spec.jsonl's data): as kept there (a task with inputs, or any task
    of a run made by an older ga), else made from the task's stored fields, as when it was planned."""
    kept = dict(data.get("fingerprints") or {})
    for entry in data.get("tasks") or []:
        if entry.get("id") not in kept:
            task = PlannedTask(**{**_UNSET_TASK_FIELDS, **entry})
            kept[task.id] = task.fingerprint()
    return kept


def _task_data(task: PlannedTask) -> dict[str, object]:
    """A task's fields as plain data, without its line and without what is unset (None, no inputs, no truncate)."""
    data: dict[str, object] = {}
    for f in fields(task):
        value = getattr(task, f.name)
        if f.name == "line" or value is None or (f.name in ("inputs", "truncate") and not value):
            continue
        data[f.name] = list(value) if isinstance(value, list) else dict(value) if isinstance(value, dict) else value
    return data


# ---- loading ----------------------------------------------------------------------------------


def load(path: Union[str, Path]) -> Plan:
    """Read, validate and expand a tasks file; SpecError listing every problem."""
    path = Path(path)
    try:
        data, lines = load_mapping(path, missing=f"tasks file not found; give the path of a tasks YAML file (see {EXAMPLE})",
                                   shape=f"a tasks file is a mapping with 'tasks:' and/or 'matrix:'; see {EXAMPLE}")
    except YamlError as exc:
        raise SpecError([str(exc)]) from None
    return from_data(data, source=path, lines=lines)


def from_data(data: JSONObject, *, source: Optional[Path] = None, lines: Optional[dict] = None,
              base_dir: Optional[Path] = None) -> Plan:
    """Validate and expand an already parsed spec (`fanout()` accepts dicts and lists too)."""
    where = str(source) if source else "<spec>"
    lines = lines or {}
    base = (base_dir or (source.parent if source else Path.cwd())).resolve()
    try:
        spec = TasksFile.model_validate(data)
    except ValidationError as exc:
        problems = [_describe(error, where, lines) for error in _merge_misspelled(exc.errors())]
        raise SpecError(sorted(problems, key=_line_number)) from None
    return _Expander(spec, where, lines, base, source).plan()


def from_prompts(prompts: list[Union[str, JSONObject]], **top: object) -> Plan:
    """`fanout(["task a", "task b"])`: a list of prompts (or task mappings) with top-level options."""
    tasks = [{"prompt": p} if isinstance(p, str) else p for p in prompts]
    return from_data({**top, "tasks": tasks})


def check_prompt_sizes(plan: Plan, limit_of: Callable[[Optional[str]], int]) -> None:
    """SpecError naming every task whose prompt the worker's context cannot hold (unless `truncate: true`).

    limit_of(model) is the largest prompt in JSON-serialized chars (orchestrator.preflight.prompt_limit)."""
    where = str(plan.source) if plan.source else "<spec>"
    problems = []
    for task in plan.tasks:
        limit = limit_of(task.model)
        if task.truncate or len(task.prompt) * 6 < limit:  # JSON escaping at most sextuples a character
            continue
        size = prompt_chars(task.prompt)
        if size > limit:
            problems.append(f"{where}:{task.line or 1}: task '{task.id}': the prompt is {size:,} chars, more than the "
                            f"{limit:,} the worker's context holds (context.context_tokens, the model's context_window); "
                            "put the text in an input file, shorten it, or set 'truncate: true' to let it be cut")
    if problems:
        raise SpecError(problems)


def _line_number(problem: str) -> int:
    match = re.match(r"^.*?:(\d+): ", problem)
    return int(match.group(1)) if match else 0


def _merge_misspelled(errors: list[ErrorDetails]) -> list[ErrorDetails]:
    """`promt:` gives 'prompt missing' and 'promt unknown': report only the unknown key (it names the fix)."""
    extras = {tuple(e["loc"][:-1]): str(e["loc"][-1]) for e in errors if e["type"] == "extra_forbidden"}
    kept = []
    for error in errors:
        parent, name = tuple(error["loc"][:-1]), str(error["loc"][-1]) if error["loc"] else ""
        if error["type"] == "missing" and parent in extras and difflib.get_close_matches(extras[parent], [name], n=1):
            continue
        kept.append(error)
    return kept


def _describe(error: ErrorDetails, where: str, lines: dict) -> str:
    problem = FieldError.of(error, tags={"Matrix"})
    loc = tuple("from" if p == "from_" else p for p in problem.loc)
    place = f"{where}:{line_of(lines, loc) or 1}"
    key = _dotted(loc) or "(top)"
    if error["type"] == "extra_forbidden":
        allowed = _allowed_keys(loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        return f"{place}: unknown key '{key}'; {hint}allowed here: {', '.join(allowed)}"
    if error["type"] == "missing":
        return f"{place}: '{key}' is required; add it (see {EXAMPLE})"
    if error["type"] == "string_pattern_mismatch":
        return (f"{place}: '{key}': {error.get('input')!r:.60} is not a valid name; use letters, digits, '.', '_' "
                "and '-' (at most 80, starting with a letter or digit)")
    return f"{place}: '{key}': {problem.message}{problem.got}; see {EXAMPLE} for the format"


def _allowed_keys(parent: tuple) -> list[str]:
    """The keys a mapping at this location accepts (for 'did you mean')."""
    model: type[BaseModel] = TasksFile
    for part in parent:
        if isinstance(part, int):
            continue
        annotation = model.model_fields[part].annotation if part in model.model_fields else None
        found = _model_in(annotation)
        if found is None:
            return []
        model = found
    return [f.alias or name for name, f in model.model_fields.items()]


def _model_in(annotation: object) -> Optional[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_in(arg)
        if found is not None:
            return found
    return None



def _dotted(loc: tuple) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


class _Expander:
    """Turns the validated file into concrete tasks, collecting every semantic problem."""

    def __init__(self, spec: TasksFile, where: str, lines: dict, base: Path, source: Optional[Path]):
        self.spec, self.where, self.lines, self.base, self.source = spec, where, lines, base, source
        self.problems: list[str] = []
        self.ids: dict[str, tuple] = {}
        self.checked_models: dict[str, Optional[str]] = {}  # name -> problem (None: fine); 10,000 tasks share few
        self.model_names: dict[str, str] = {}
        self.allowed = [self.resolve(p).resolve() for p in spec.allow_paths]

    def at(self, loc: tuple) -> str:
        return f"{self.where}:{line_of(self.lines, loc) or 1}"

    def problem(self, loc: tuple, text: str) -> None:
        self.problems.append(f"{self.at(loc)}: {text}")

    def plan(self) -> Plan:
        with collections_paused():
            return self._plan()

    def _plan(self) -> Plan:
        spec = self.spec
        self.check_options(spec.defaults, ("defaults",))
        tasks = [self.explicit(i, entry) for i, entry in enumerate(spec.tasks)]
        matrices = spec.matrix if isinstance(spec.matrix, list) else ([spec.matrix] if spec.matrix else [])
        for m_index, matrix in enumerate(matrices):
            loc = ("matrix", m_index) if isinstance(spec.matrix, list) else ("matrix",)
            tasks += self.expand(matrix, loc)
        if not spec.tasks and not matrices:
            self.problem((), f"no tasks: add a 'tasks:' list or a 'matrix:' (see {EXAMPLE})")
        if spec.budget is not None and spec.budget.tokens is None and spec.budget.cost is None:
            self.problem(("budget",), "'budget' needs 'tokens' and/or 'cost'")
        reduce = None
        if spec.reduce is not None:
            if spec.reduce.model:
                self.check_model(spec.reduce.model, ("reduce", "model"))
            reduce = spec.reduce.model_copy(update={"model": self.model_name(spec.reduce.model)})
            if Path(spec.reduce.output).name != spec.reduce.output or spec.reduce.output in ("", ".", ".."):
                self.problem(("reduce", "output"), f"'reduce.output' must be a plain file name (got {spec.reduce.output!r})")
        if self.problems:
            raise SpecError(self.problems)
        name = spec.name or (self.source.stem if self.source else "fanout")
        plan = Plan(name=name, source=self.source.resolve() if self.source else None, tasks=tasks,
                    concurrency=spec.concurrency, retries=spec.retries,
                    budget_tokens=spec.budget.tokens if spec.budget else None,
                    budget_cost=spec.budget.cost if spec.budget else None, reduce=reduce,
                    memory_commit=spec.memory.commit, max_depth=spec.max_depth)
        return plan  # fingerprints are computed when the plan is stored (to_dict), not for a dry run

    # ---- options ----

    def check_options(self, options: Options, loc: tuple) -> None:
        if options.model:
            self.check_model(options.model, loc + ("model",))
        for index, name in enumerate(options.tools or []):
            known = known_tools()
            if name not in known:
                close = difflib.get_close_matches(name, known, n=1)
                hint = f"did you mean '{close[0]}'? " if close else ""
                self.problem(loc + ("tools", index), f"unknown tool '{name}'; {hint}tools: {', '.join(known)}")

    def check_model(self, name: str, loc: tuple) -> None:
        if name not in self.checked_models:
            self.checked_models[name] = self.model_problem(name)
        problem = self.checked_models[name]
        if problem:
            self.problem(loc, problem)

    def model_problem(self, name: str) -> Optional[str]:
        if name.startswith("scripted:"):
            path = self.resolve(name[len("scripted:"):])
            if not path.is_file():
                return f"scripted model file {path} not found; fix the path (relative to the tasks file)"
            return None
        if name.startswith("scripted@"):
            return None
        try:
            entries = load_model_entries()
        except ModelConfigError as exc:
            return str(exc)
        if name not in entries:
            close = difflib.get_close_matches(name, list(entries), n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            known = ", ".join(sorted(entries)) or "(none)"
            return (f"unknown model '{name}'; {hint}known: {known}, scripted:FILE, scripted@URL "
                    "(add models to ./models.yaml)")
        return None

    def model_name(self, name: Optional[str]) -> Optional[str]:
        if name and name.startswith("scripted:"):
            if name not in self.model_names:
                self.model_names[name] = "scripted:" + str(self.resolve(name[len("scripted:"):]))
            return self.model_names[name]
        return name

    def resolve(self, rel: str) -> Path:
        path = Path(rel).expanduser()
        return path if path.is_absolute() else self.base / path

    def merged(self, options: Options, loc: tuple) -> TaskOptions:
        self.check_options(options, loc)
        d = self.spec.defaults
        limits = options.limits or d.limits or Limits()
        return {
            "model": self.model_name(options.model or d.model),
            "max_turns": options.max_turns or d.max_turns,
            "timeout": options.timeout or d.timeout,
            "tools": options.tools if options.tools is not None else d.tools,
            "max_tokens": limits.max_tokens,
            "max_cost": limits.max_cost,
            "check": _check_dict(options.check or d.check),
            "truncate": bool(options.truncate if options.truncate is not None else d.truncate),
            "sandbox": self.sandbox(options.sandbox, d.sandbox),
        }

    def sandbox(self, own: Optional[SandboxOption], default: Optional[SandboxOption]) -> Optional[SandboxKeys]:
        merged: SandboxKeys = {}
        for option in (default, own):  # the task's own keys over its defaults'
            if option is None:
                continue
            if option.mode is not None:
                merged["mode"] = option.mode
            if option.network is not None:
                merged["network"] = list(option.network) if isinstance(option.network, list) else option.network
            if option.writable is not None:
                merged["writable"] = [str(self.resolve(p)) for p in option.writable]
        return merged or None

    def inputs(self, names: list[str], loc: tuple) -> list[str]:
        found, seen = [], set()
        for index, rel in enumerate(names):
            path = self.resolve(rel)
            here = loc + ("inputs", index)
            if not path.is_file():
                self.problem(here, f"input file {path} not found; fix the path (relative to the tasks file)")
                continue
            real = path.resolve()
            if not any(real == root or root in real.parents for root in [self.base, *self.allowed]):
                self.problem(here, f"input {rel!r} is {real}, outside the tasks file's directory {self.base}; move it "
                                   "there, or list it (or its directory) under 'allow_paths:'")
            elif path.name in seen:
                self.problem(here, f"two inputs named '{path.name}'; inputs are copied by base name, rename one")
            else:
                seen.add(path.name)
                found.append(str(path.parent.resolve() / path.name))  # a symlink keeps its own name
        return found

    def claim(self, task_id: str, loc: tuple) -> None:
        if task_id in self.ids:
            first = self.at(self.ids[task_id])
            self.problem(loc, f"duplicate task id '{task_id}' (first at {first}); ids must be unique")
        else:
            self.ids[task_id] = loc

    # ---- tasks ----

    def explicit(self, index: int, entry: TaskEntry) -> PlannedTask:
        loc = ("tasks", index)
        task_id = entry.id or self.generated(entry.prompt, entry.inputs)
        self.claim(task_id, loc + (("id",) if entry.id else ()))
        return PlannedTask(id=task_id, prompt=entry.prompt, inputs=self.inputs(entry.inputs, loc),
                           line=line_of(self.lines, loc) or 0, **self.merged(entry, loc))

    def generated(self, prompt: str, inputs: list[str]) -> str:
        digest = hashlib.sha1(json.dumps([prompt, inputs]).encode()).hexdigest()[:6]
        stem = slug(prompt, 24) or "task"
        task_id, n = f"{stem}-{digest}", 2
        while task_id in self.ids:  # the same prompt twice: stable as long as their order is
            task_id, n = f"{stem}-{digest}-{n}", n + 1
        return task_id

    def expand(self, matrix: Matrix, loc: tuple) -> list[PlannedTask]:
        items = self.items(matrix, loc)
        if items is None:
            return []
        options = self.merged(matrix, loc)
        line = line_of(self.lines, loc) or 0
        template_loc, id_loc = loc + ("template",), loc + ("id",)
        tasks = []
        for index, item in enumerate(items):  # once per item of 100,000: what is the same for all is made above
            values = {str(k): v for k, v in item.items()} if isinstance(item, dict) else {"item": item}
            values["index"] = index
            prompt = self.render(matrix.template, values, template_loc, index)
            rendered = [self.render(i, values, loc + ("inputs", n), index) for n, i in enumerate(matrix.inputs)]
            inputs = [i for i in rendered if i is not None]
            if prompt is None or len(inputs) < len(rendered):
                return tasks  # one report per template is enough
            if matrix.id:
                raw = self.render(matrix.id, values, id_loc, index)
                if raw is None:
                    return tasks
                task_id = slug(raw, 80)
                if not task_id:
                    self.problem(id_loc, f"item {index}: id template gives an empty id; use columns with letters or digits")
                    continue
            else:
                task_id = self.generated(prompt, inputs)
            self.claim(task_id, id_loc if matrix.id else template_loc)
            tasks.append(PlannedTask(id=task_id, prompt=prompt, inputs=self.inputs(inputs, loc) if inputs else [],
                                     line=line, **options))
        return tasks

    def items(self, matrix: Matrix, loc: tuple) -> Optional[Sequence[object]]:  # a .jsonl's rows: any JSON
        if (matrix.items is None) == (matrix.from_ is None):
            self.problem(loc, "a matrix needs exactly one of 'items' (inline) or 'from' (a .csv or .jsonl file)")
            return None
        if matrix.items is not None:
            return matrix.items
        path = self.resolve(matrix.from_ or "")
        floc = loc + ("from",)
        if not path.is_file():
            self.problem(floc, f"matrix file {path} not found; fix the path (relative to the tasks file)")
            return None
        text = self.read_text(path, floc)
        if text is None:
            return None
        if path.suffix.lower() == ".csv":
            try:
                rows = list(csv.DictReader(io.StringIO(text, newline="")))
            except csv.Error as exc:
                self.problem(floc, f"{path}: not a readable CSV ({exc}); one header line, then one row per task")
                return None
            if not rows:
                self.problem(floc, f"{path} has no rows; a CSV needs a header line and one row per task")
            return rows
        if path.suffix.lower() in (".jsonl", ".ndjson"):
            rows = []
            for number, line in enumerate(text.splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    self.problems.append(f"{path}:{number}: not valid JSON ({exc.msg}); one JSON object per line")
                    return None
            return rows
        self.problem(floc, f"matrix file {path.name}: use a .csv or .jsonl file")
        return None

    def read_text(self, path: Path, loc: tuple) -> Optional[str]:
        limit = current_limits().max_bytes
        with path.open("rb") as handle:
            raw = handle.read(limit + 1)
        if len(raw) > limit:
            self.problem(loc, f"matrix file {path} is larger than {limit:,} bytes (yaml.max_bytes); split it")
            return None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.problem(loc, f"matrix file {path} is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset "
                              f"{exc.start}); save it as UTF-8")
            return None

    def render(self, template: str, values: Mapping[str, object], loc: tuple, index: int) -> Optional[str]:
        text, names = _template_parts(template)
        missing = [name for name in names if name not in values]
        if missing:
            close = difflib.get_close_matches(missing[0], list(values), n=1)
            hint = f"did you mean '{{{{{close[0]}}}}}'? " if close else ""
            self.problem(loc, f"placeholder '{{{{{missing[0]}}}}}' is not a field of item {index}; {hint}"
                              f"fields: {', '.join(values)}")
            return None
        return text.format(*[str(values[name]) for name in names])


@functools.cache
def known_tools() -> tuple[str, ...]:
    """The names a task's `tools:` may list: worker.tools' REGISTRY, loaded only when a spec names tools (the tools
    import the sandbox and the web session: this module stays cheap for `ga --help`)."""
    from worker.tools import REGISTRY  # here: +15 modules at every `ga` start (tests/cli/test_lazy_imports.py)

    return tuple(REGISTRY)


@functools.lru_cache(maxsize=64)
def _template_parts(template: str) -> tuple[str, list[str]]:
    """The template as a str.format text with positional fields, and the names they stand for (parsed once
    per template, not once per item)."""
    parts = PLACEHOLDER.split(template)
    text = "".join(part.replace("{", "{{").replace("}", "}}") if n % 2 == 0 else f"{{{n // 2}}}"
                   for n, part in enumerate(parts))
    return text, parts[1::2]


def _check_dict(check: Optional[TaskCheck]) -> Optional[dict[str, object]]:
    return check.model_dump(exclude_none=True) if check is not None else None


_NOT_IN_SLUG = re.compile(r"[^A-Za-z0-9._-]+")
_SLUG = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


def slug(text: str, limit: int) -> str:
    if len(text) <= limit and _SLUG.fullmatch(text):
        return text  # already one (an id template's usual result)
    words = _NOT_IN_SLUG.sub("-", text.strip()).strip("-._")
    return words[:limit].rstrip("-._")


def _file_hash(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    except OSError:
        return "missing"


@contextlib.contextmanager
def collections_paused() -> Iterator[None]:
    """No cyclic garbage collection while a plan's tasks are made: they make no cycles, and the collector went over
    the growing heap again and again, a third of a 100,000-task dry run's CPU. Collections resume afterwards."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
