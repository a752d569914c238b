"""`ga schedule` jobs files: the schema, and loading with one-line file:line errors.

```yaml
jobs:
  - name: compress-archive        # letters, digits, - _ . ; unique
    builtin: archive_compress     # or  task: "a task for a worker"
    args: {older_than_days: 7}    # builtin arguments (archive_compress: older_than_days)
    at: "03:30"                   # a time of day (local), or  every: 30m
    repeat: daily                 # at-jobs: daily (default) | weekdays | once
    days: [mon, wed, fri]         # optional: only on these days (at- and every-jobs)
    cooldown: 10m                 # optional: at least this long between two runs (default 0)
    max_delay: 1h                 # a missed run is caught up once, only within this (default 1h)
    model: null                   # optional: model name for a task (default: worker.model)
    workdir: null                 # optional: the task's working directory (default: where ga runs)
    enabled: true
```
"""
from __future__ import annotations

import re
from datetime import time, timedelta
from pathlib import Path
from typing import Annotated, Literal, Optional

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails

from memory_shared.usererrors import FieldError, field_errors
from memory_shared.yamlsource import YamlError, line_of, load_mapping
from orchestrator.triggers.durations import format_duration, parse_duration

EXAMPLE = "configs/examples/jobs.yaml"
DAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
REPEAT_DAYS = {"daily": frozenset(range(7)), "weekdays": frozenset(range(5)), "once": frozenset(range(7))}


class JobsError(ValueError):
    """A bad jobs file; str() is one line naming the file, the line and the fix."""


Duration = Annotated[timedelta, BeforeValidator(parse_duration)]


class ArchiveCompressArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    older_than_days: int = Field(7, ge=0)


BUILTIN_ARGS: dict[str, type[BaseModel]] = {"archive_compress": ArchiveCompressArgs}


class Job(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    task: Optional[str] = None
    builtin: Optional[Literal["archive_compress"]] = None
    args: dict[str, object] = {}  # the built-in's, checked by its BUILTIN_ARGS model
    at: Optional[time] = None
    every: Optional[Duration] = None
    repeat: Optional[Literal["daily", "weekdays", "once"]] = None
    days: Optional[list[Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]]] = Field(default=None, min_length=1)
    cooldown: Duration = timedelta(0)
    max_delay: Duration = timedelta(hours=1)
    model: Optional[str] = None
    workdir: Optional[Path] = None
    enabled: bool = True

    @field_validator("at", mode="before")
    @classmethod
    def _time_of_day(cls, value: object) -> object:
        if isinstance(value, int) and not isinstance(value, bool):  # YAML 1.1 reads 03:30 as 210 (base 60)
            value = f"{value // 60:02d}:{value % 60:02d}"
        if isinstance(value, str):
            match = re.fullmatch(r"(\d{1,2}):(\d{2})", value.strip())
            if not match or int(match[1]) > 23 or int(match[2]) > 59:
                raise ValueError(f"{value!r} is not a time of day; write \"HH:MM\", e.g. \"03:30\"")
            return time(int(match[1]), int(match[2]))
        return value

    @model_validator(mode="after")
    def _consistent(self) -> "Job":
        if (self.task is None) == (self.builtin is None):
            raise ValueError("give exactly one of 'task' (a task for a worker) or 'builtin' (archive_compress)")
        if self.task is not None and not self.task.strip():
            raise ValueError("'task' is empty; write what the worker should do")
        if (self.at is None) == (self.every is None):
            raise ValueError("give exactly one of 'at' (a time of day, \"HH:MM\") or 'every' (an interval, e.g. 30m)")
        if self.every is not None and self.every <= timedelta(0):
            raise ValueError("'every' must be longer than 0s")
        if self.every is not None and self.repeat is not None:
            raise ValueError("'repeat' applies to 'at' jobs only; an 'every' job repeats by itself (use 'days' to limit it)")
        if self.days is not None and self.repeat not in (None, "daily"):
            raise ValueError(f"'days' and 'repeat: {self.repeat}' conflict; keep one of them")
        if self.builtin is None and self.args:
            raise ValueError("'args' is for builtin jobs only")
        if self.builtin is not None:
            try:
                BUILTIN_ARGS[self.builtin].model_validate(self.args)
            except ValidationError as exc:
                first = field_errors(exc)[0]
                allowed = ", ".join(BUILTIN_ARGS[self.builtin].model_fields)
                raise ValueError(f"'args.{first.key()}' of {self.builtin}: {first.message}{first.got}; "
                                 f"allowed args: {allowed}") from None
        return self

    @property
    def allowed_days(self) -> frozenset[int]:
        """Weekday numbers (Monday = 0) on which the job may run."""
        if self.days is not None:
            return frozenset(DAY_NAMES.index(day) for day in self.days)
        return REPEAT_DAYS[self.repeat or "daily"]

    @property
    def once(self) -> bool:
        return self.repeat == "once"

    def describe(self) -> str:
        """When the job runs, in a few words: 'daily at 03:30', 'every 30m on mon, fri'."""
        when = f"every {format_duration(self.every)}" if self.every else f"{self.repeat or 'daily'} at {self.at:%H:%M}"
        return when + (f" on {', '.join(self.days)}" if self.days else "")


class JobsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    jobs: list[Job] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> "JobsFile":
        seen: set[str] = set()
        for job in self.jobs:
            if job.name in seen:
                raise ValueError(f"two jobs are named {job.name!r}; give each job its own name")
            seen.add(job.name)
        return self


def load_jobs(path: Path) -> list[Job]:
    """Read and validate a jobs file; JobsError (one line with file:line) on any problem."""
    path = Path(path)
    try:
        data, lines = load_mapping(path, missing=f"no such jobs file; see {EXAMPLE}",
                                   shape=f"expected a mapping with a 'jobs:' list; see {EXAMPLE}")
    except YamlError as exc:
        raise JobsError(str(exc)) from None
    try:
        return JobsFile.model_validate(data).jobs
    except ValidationError as exc:
        raise JobsError(_describe(exc.errors()[0], path, lines, data)) from None


def _describe(error: ErrorDetails, path: Path, lines: dict, data: dict) -> str:
    problem = FieldError.of(error)
    loc = problem.loc
    where = f"{path}:{line_of(lines, loc) or 1}"
    job = _job_label(loc, data)
    in_a_job = len(loc) > 2  # ("jobs", index, key, ...)
    key, last = (loc[2] if in_a_job else None), (loc[-1] if loc else None)
    if error["type"] == "extra_forbidden":
        allowed = ", ".join(Job.model_fields) if in_a_job else "jobs"
        return f"{where}: {job}unknown key {last!r}; allowed: {allowed}"
    if error["type"] == "missing":
        return f"{where}: {job}{last!r} is required; see {EXAMPLE}"
    subject = f"{key!r}: " if key is not None else ""
    return f"{where}: {job}{subject}{problem.message}; see {EXAMPLE}"


def _job_label(loc: tuple, data: dict) -> str:
    if len(loc) < 2 or loc[0] != "jobs" or not isinstance(loc[1], int):
        return ""
    try:
        name = data["jobs"][loc[1]].get("name")
    except (AttributeError, IndexError, KeyError, TypeError):
        name = None
    return f"job {name!r}: " if name else f"job #{loc[1] + 1}: "
