"""The run directory: normalized spec, ledger, results (exactly once per task), events, summary.

The reduce's steps are recorded whole in the ledger (`reduce_result`), so a resume of a finished run,
or of one killed after its reduce, reuses them: the model is not paid and memory not committed again.

Only the driver writes these files. Every ledger and result line is written and flushed to the kernel
before the run moves on, so a kill -9 loses at most the line being written, which is cut off on the
next open. Outside the map loop each line is also made durable before the run moves on. Inside it
(`RunDir.batched`) the loop asks after each pass for its lines to be durable within BATCH_WINDOW
without waiting (`RunDir.sync(wait=False)`, memory_shared.groupsync's `soon`): they ride along the
workers' history flushes, or a timer flushes them. The map's tasks do not depend on each other's lines;
what does (the reduce, the summary, the exit status, a parent reading a nested run) comes after the
loop, which ends by waiting for them. So a machine crash can lose the last BATCH_WINDOW of lines, and
a resume runs those tasks again; nothing was built on them. `results.jsonl` is the truth about what
finished: resume skips what it holds. The "queued" lines of a run's tasks go in batches of QUEUED_BATCH, one
write each, written by the map loop ahead of the tasks that start (100,000 of them written before the
first task kept it waiting): they only say what the run means to do, and a crash leaves tasks without one,
which a resume queues again. The "skipped" lines of a stopped run go in the same batches.

spec.jsonl is the plan as JSON lines: its fields on the first line (`tasks` there is the number of tasks that
follow), then one task a line. Dumping 100,000 tasks through PyYAML took minutes before the first task could start;
JSON lines take a second, and a reader of task ids (`ga runs show`) reads one line at a time. A run made by an older
ga has spec.yaml instead (YAML, or the same JSON as one document): `read_spec` reads both.
"""
from __future__ import annotations

import heapq
import json
import os
import secrets
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Optional, Union

from pydantic import BaseModel

from configs.idprefix import by_prefix
from memory_shared import groupsync
from memory_shared.fsutil import Folder, HeldElsewhere, Unsafe, atomic_write_text, hold, is_abandoned
from memory_shared.jsontypes import JSONObject
from memory_shared.yamlsource import YamlError, load_yaml
from orchestrator.records import LedgerEvent, RunSummary, TaskRecord, TaskResult

if TYPE_CHECKING:
    from _typeshed import SupportsRichComparison

QUEUED_BATCH = 1000  # "queued" (and "skipped") ledger lines per write
HISTORIES = "histories"  # the histories of finished tasks that left nothing else: histories/ID.jsonl (RunDir.pack)
PACK_ANSWER_MAX = 200  # a packed task's answer is whole in results.jsonl; --json never cuts one this short
BATCH_WINDOW = 1.0  # seconds within which the map loop's lines are durable (RunDir.sync(wait=False))
SPEC = "spec.jsonl"  # the plan that ran: its fields, then one task a line
OLD_SPEC = "spec.yaml"  # the plan of a run made by an older ga (read, never written)


def new_run_id(name: str) -> str:
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{name[:24]}-{secrets.token_hex(2)}"


class JsonlFile:
    """Append-only JSON lines, each made durable before append returns (or, with wait=False, by the next
    `make_durable`); a torn last line is cut off when opened."""

    def __init__(self, path: Path, sync: bool = True):
        self.path, self.sync = path, sync
        self.unsynced = False  # lines appended with wait=False and not yet durable
        _cut_torn_tail(path)
        self._handle = path.open("a", encoding="utf-8")

    def append(self, record: dict[str, object], wait: bool = True) -> None:
        self._handle.write(json.dumps(record, default=_plain, ensure_ascii=False) + "\n")
        self._handle.flush()  # in the kernel from here: a kill -9 of this process no longer loses it
        self.unsynced = self.sync
        if wait:
            self.make_durable()

    def make_durable(self) -> None:
        """Everything appended so far is on disk when this returns (a group commit shared with other writers)."""
        if self.unsynced:
            groupsync.durable(self.fileno())
            self.unsynced = False

    def fileno(self) -> int:
        return self._handle.fileno()

    def append_many(self, records: list[dict[str, object]], wait: bool = True) -> None:
        """Several lines in one write and one flush; a crash leaves whole lines and at most one torn one."""
        self._handle.write("".join(json.dumps(r, default=_plain, ensure_ascii=False) + "\n" for r in records))
        self._handle.flush()
        self.unsynced = self.sync
        if wait:
            self.make_durable()

    def close(self) -> None:
        self.make_durable()
        self._handle.close()


def spec_lines(spec: dict[str, object]) -> str:
    """The spec as JSON lines: its fields on the first line (`tasks`: how many follow), then one task a line."""
    tasks = spec.get("tasks") or []
    if not isinstance(tasks, list):
        raise TypeError(f"a spec's tasks are a list (Plan.to_dict), not {type(tasks).__name__}")
    head = {**{k: v for k, v in spec.items() if k != "tasks"}, "tasks": len(tasks)}
    return "".join(json.dumps(line, ensure_ascii=False, default=str) + "\n" for line in [head, *tasks])


def driver_holds(path: Path) -> bool:
    """Whether a driver holds the run's lock (the run is in progress)."""
    lock = path / ".lock"
    return lock.is_file() and not is_abandoned(lock)


def spec_path(run_path: Path) -> Path:
    """The run's plan file: spec.jsonl, or spec.yaml in a run made by an older ga."""
    path = Path(run_path) / SPEC
    return path if path.is_file() or not (Path(run_path) / OLD_SPEC).is_file() else Path(run_path) / OLD_SPEC


def has_spec(run_path: Path) -> bool:
    """A run directory: its plan file is there."""
    return (Path(run_path) / SPEC).is_file() or (Path(run_path) / OLD_SPEC).is_file()


def read_spec(path: Path) -> JSONObject:
    """The plan in a spec.jsonl (or an older ga's spec.yaml); ValueError, one line with the line number, when it
    is damaged."""
    if path.name == OLD_SPEC:
        text = path.read_text(encoding="utf-8")
        try:  # the older form: JSON as one document, or (older still, and small) YAML
            data = json.loads(text) if text.startswith("{") else load_yaml(path)[0]
        except (ValueError, YamlError) as exc:
            raise ValueError(f"not JSON or YAML ({' '.join(str(exc).split())[:160]})") from None
        if not isinstance(data, dict):
            raise ValueError(f"expected a mapping, found {type(data).__name__}")
        return data
    with path.open(encoding="utf-8") as handle:
        head = _spec_line(handle.readline(), 1)
        tasks = [_spec_line(line, number) for number, line in enumerate(handle, 2)]
    if head.get("tasks") != len(tasks):
        raise ValueError(f"line 1 says {head.get('tasks')!r} tasks follow, {len(tasks)} do")
    return {**head, "tasks": tasks}


def spec_task_ids(path: Path) -> Iterator[str]:
    """The task ids of a spec.jsonl in order, read a line at a time (an older spec.yaml is read whole)."""
    if path.name == OLD_SPEC:
        yield from (str(task["id"]) for task in read_spec(path).get("tasks") or [])
        return
    with path.open(encoding="utf-8") as handle:
        handle.readline()
        for number, line in enumerate(handle, 2):
            yield str(_spec_line(line, number)["id"])


def _spec_line(line: str, number: int) -> JSONObject:
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"line {number}: not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(value, dict):
        raise ValueError(f"line {number}: expected an object, found {type(value).__name__}")
    return value


def _plain(value: object) -> object:
    """JSON for what json does not know: a record as its JSON object, anything else as its text."""
    return value.model_dump(mode="json", exclude_none=True) if isinstance(value, BaseModel) else str(value)


def read_jsonl(path: Path, end: Optional[int] = None,
               file_id: Optional[tuple[int, int]] = None) -> Iterator[JSONObject]:
    """The objects of a JSON-lines file one at a time, in order, none kept; a missing file has none. A line without
    its newline (the one a crash cut off) or that is not JSON is left out. Its name is opened as fsutil's readers
    open a name hostile code could have replaced: a symbolic link or anything but a regular file there (a FIFO
    would block the read) is refused (fsutil.Unsafe, one line).

    `end`: only the lines within the first `end` bytes (those there when it was measured: an appender may have
    added more since). `file_id`: the (st_dev, st_ino) of the file measured; if the name leads to another file now
    (a resume with --retry-failed rewrites results.jsonl), FileNotFoundError."""
    if end == 0:
        return
    try:
        with closing(Folder(path.parent)) as folder:
            fd = folder.open(path.name)
    except (FileNotFoundError, NotADirectoryError):
        return
    except Unsafe as exc:  # named by the file's name alone: the run or task it is in named too
        raise Unsafe(f"{path.parent}{os.sep}{exc}") from None
    with os.fdopen(fd, "rb") as handle:
        found = os.fstat(fd)
        if file_id is not None and (found.st_dev, found.st_ino) != file_id:
            raise FileNotFoundError(f"{path} was rewritten since its lines were counted (a resume with "
                                    "--retry-failed); read the records of that later run instead")
        left = end
        for line in handle:
            if left is not None:
                left -= len(line)
                if left < 0:
                    return
            if line.endswith(b"\n"):
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    continue


def _cut_torn_tail(path: Path) -> None:
    if not path.is_file() or path.stat().st_size == 0:
        return
    with path.open("rb+") as handle:
        data = handle.read()
        if data.endswith(b"\n"):
            return
        handle.truncate(data.rfind(b"\n") + 1)
        handle.flush()
        os.fsync(handle.fileno())


class StoredResults:
    """The task records of a finished run as `fanout()` returns them (TaskResult), read from its directory when
    asked for and never kept here: a run of 10,000 tasks held every record, 31 MB, to return them, while the exit
    status, --json and the digest need one at a time or a few. Only the lines there when the run ended are read
    (`end`, in bytes): a resume of the run appends its own after them. `count`: how many records those lines hold
    (the driver counted them for the summary)."""

    def __init__(self, run_path: Path, count: int):
        self.path, self.count = Path(run_path) / "results.jsonl", count
        found = os.stat(self.path) if self.path.is_file() else None
        self.end, self.file_id = (found.st_size, (found.st_dev, found.st_ino)) if found else (0, None)

    def __len__(self) -> int:
        return self.count

    def each(self) -> Iterator[TaskRecord]:
        """In the order they finished."""
        return (TaskResult.model_validate(line) for line in read_jsonl(self.path, self.end, self.file_id))

    def all(self) -> list[TaskRecord]:
        """Every one, in the order of the plan (spec.jsonl)."""
        found = {record.task_id: record for record in self.each()}
        return [found[task_id] for task_id in spec_task_ids(spec_path(self.path.parent)) if task_id in found]

    def first(self, limit: int, where: Optional[Callable[[TaskRecord], bool]] = None,
              key: Optional[Callable[[TaskRecord], SupportsRichComparison]] = None) -> list[TaskRecord]:
        """The first `limit` of those `where` accepts, ordered by `key`, then by the plan: at most `limit` records
        held at once (what sorting the plan-ordered list and cutting it gave)."""
        place = {task_id: index for index, task_id in enumerate(spec_task_ids(spec_path(self.path.parent)))}
        kept = (record for record in self.each() if where is None or where(record))
        return heapq.nsmallest(limit, kept, key=lambda record: (key(record) if key else 0,
                                                                 place.get(record.task_id, len(place))))


class RunDir:
    """One run's directory (docs/design.md §5). Open it with `create` or `open`; close() when done."""

    def __init__(self, path: Path):
        self.path = path.resolve()
        self.run_id = self.path.name
        self._ledger: Optional[JsonlFile] = None
        self._results: Optional[JsonlFile] = None
        self._events: Optional[JsonlFile] = None
        self.batched = False  # set by the map loop: appends do not wait, `sync` makes them durable
        self._pending: Optional[groupsync.Pending] = None  # the last sync(wait=False)
        self._finished: set[str] = set()  # ids in results.jsonl: the records themselves stay on disk (a run's memory
        # must not grow with its tasks), read back by results()
        self._lock_fd: Optional[int] = None  # held by lock()
        self._spec_writer: Optional[threading.Thread] = None  # writing spec.jsonl (create)
        self._spec_error: Optional[BaseException] = None

    @classmethod
    def create(cls, runs_dir: Path, run_id: str,
               spec: Union[dict[str, object], Callable[[], dict[str, object]]]) -> "RunDir":
        """A new run directory. `spec` as a function: spec.jsonl is made and written by a thread of its own while the
        run starts (100,000 tasks take a second of CPU), and is in place before the first result line."""
        path = Path(runs_dir) / run_id
        path.mkdir(parents=True, exist_ok=False)
        (path / "tasks").mkdir()
        (path / "reduce").mkdir()
        run = cls(path)
        if callable(spec):
            run._spec_writer = threading.Thread(target=run._write_spec, args=(spec,), daemon=True, name="ga-spec")
            run._spec_writer.start()
        else:
            atomic_write_text(path / SPEC, spec_lines(spec))
        run.lock()
        return run.open_files()

    def _write_spec(self, make: Callable[[], dict[str, object]]) -> None:
        try:
            atomic_write_text(self.path / SPEC, spec_lines(make()))
        except BaseException as exc:  # noqa: BLE001  (raised where the run waits for it: _spec_written)
            self._spec_error = exc

    def _spec_written(self) -> None:
        """spec.jsonl is in place (results, the summary and a resume are built on it); its writer's error if not."""
        if self._spec_writer is not None:
            self._spec_writer.join()
            self._spec_writer = None
        if self._spec_error is not None:
            error, self._spec_error = self._spec_error, None
            raise error

    def planned(self) -> bool:
        """Its plan file is in place, once its writer is done (whose error, if any, was raised where the run waited)."""
        if self._spec_writer is not None:
            self._spec_writer.join()
        return has_spec(self.path)

    @classmethod
    def existing(cls, runs_dir: Path, run_id: str) -> "RunDir":
        """A finished or interrupted run, found by id, by a unique prefix of its id, or by path. No such run, or
        a prefix several runs share: FileNotFoundError, one line (naming the candidates)."""
        path = Path(run_id) if Path(run_id).is_dir() and has_spec(Path(run_id)) else Path(runs_dir) / run_id
        if not has_spec(path) and "/" not in run_id:
            try:
                found = by_prefix(run_id, _run_names(Path(runs_dir)), "run id")
            except ValueError as exc:
                raise FileNotFoundError(str(exc)) from None
            path = Path(runs_dir) / found if found else path
        if not has_spec(path):
            raise FileNotFoundError(f"no run '{run_id}' in {runs_dir}; list runs with `ga runs list`")
        return cls(path)

    def lock(self) -> bool:
        """Hold the run for this process (released when it exits, even on kill -9); False if another holds it."""
        try:
            self._lock_fd = hold(self.path / ".lock")
        except HeldElsewhere:
            return False
        return True

    def holder(self) -> str:
        try:
            return (self.path / ".lock").read_text().strip() or "?"
        except OSError:
            return "?"

    def open_files(self) -> "RunDir":
        self._finished = {record.task_id for record in self.each_result()}  # first: refused if not a plain file
        self._ledger = JsonlFile(self.path / "ledger.jsonl")
        self._results = JsonlFile(self.path / "results.jsonl")
        self._events = JsonlFile(self.path / "events.jsonl", sync=False)
        return self

    def close(self) -> None:
        try:
            self._spec_written()
        finally:
            self._close()

    def _close(self) -> None:
        self.sync()
        for handle in (self._ledger, self._results, self._events):
            if handle:
                handle.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    # ---- reading ----

    def spec(self) -> JSONObject:
        """The plan the run started with; ValueError (one line) when its file is damaged."""
        self._spec_written()
        return read_spec(self.spec_path)

    @property
    def spec_path(self) -> Path:
        """spec.jsonl, or spec.yaml in a run made by an older ga."""
        return spec_path(self.path)

    def results(self) -> dict[str, TaskRecord]:
        """Every finished task's record, read from results.jsonl (whose lines are in the kernel once appended)."""
        return {record.task_id: record for record in self.each_result()}

    def each_result(self) -> Iterator[TaskRecord]:
        """Every finished task's record, one at a time (in the order they finished), none kept."""
        return (TaskRecord.model_validate(line) for line in read_jsonl(self.path / "results.jsonl"))

    def ledger_records(self) -> list[LedgerEvent]:
        return [LedgerEvent.model_validate(line) for line in read_jsonl(self.path / "ledger.jsonl")]

    def reduce_results(self) -> dict[str, TaskRecord]:
        """Reduce steps that finished, by key (step id and input digest): a resume reuses them instead of paying
        the model again. `--retry-failed` drops the failed ones (a `requeued` line with step=reduce)."""
        found: dict[str, TaskRecord] = {}
        for event in self.ledger_records():
            if event.event == "reduce_result" and event.key and event.record:
                found[event.key] = event.record
            elif event.event == "requeued" and event.step == "reduce":
                found = {k: v for k, v in found.items() if v.task_id != event.task_id}
        return found

    def summary(self) -> Optional[RunSummary]:
        path = self.path / "summary.json"
        return RunSummary.model_validate_json(path.read_bytes()) if path.is_file() else None

    def task_dir(self, task_id: str) -> Path:
        return self.path / "tasks" / task_id

    def packed_history(self, task_id: str) -> Path:
        return self.path / HISTORIES / f"{task_id}.jsonl"

    def history(self, task_id: str) -> Path:
        """A task's history.jsonl: in its folder, or, once it finished leaving nothing else there, packed (see pack;
        a retry with --retry-failed then starts a folder again, and the packed history is its first attempt)."""
        own = self.task_dir(task_id) / "history.jsonl"
        packed = self.packed_history(task_id)
        return packed if not os.path.lexists(own) and packed.is_file() else own

    def pack(self, record: TaskRecord) -> None:
        """A task that answered (succeeded or unverified) and left in its folder nothing but its history, its
        answer (short: whole in its results line, never cut by --json) and an empty workdir: the history moves to
        histories/ID.jsonl and the folder goes, whose 4 KB directory block was most of a trivial task's bytes.
        Any other entry, or one that is not a plain file (a task's code may have planted a symlink), keeps the
        folder as it is. Updates the record's paths; an empty workdir is removed in any case."""
        if not record.task_dir:
            return
        folder = Path(record.task_dir)
        try:
            os.rmdir(folder / "workdir")  # only when empty; never follows a symlink
        except OSError:
            pass
        packed = self.packed_history(record.task_id)
        if record.status not in ("succeeded", "unverified") or len(record.answer or "") > PACK_ANSWER_MAX \
                or folder != self.task_dir(record.task_id) or os.path.lexists(packed):
            return  # a reduce step's folder stays where the viewers look; a packed earlier attempt is kept
        try:
            with os.scandir(folder) as found:
                entries = {entry.name: entry.is_file(follow_symlinks=False) for entry in found}
            if entries != {"history.jsonl": True, "answer.md": True}:
                return
            packed.parent.mkdir(exist_ok=True)
            os.rename(folder / "history.jsonl", packed)
        except OSError:
            return
        record.history_path, record.task_dir = str(packed), None
        try:
            os.unlink(folder / "answer.md")
            os.rmdir(folder)
        except OSError:
            pass

    # ---- writing ----

    def ledger(self, event: str, task_id: Optional[str] = None, **fields: object) -> None:
        assert self._ledger is not None
        record = {"time": round(time.time(), 3), "event": event, **({"task_id": task_id} if task_id else {}), **fields}
        self._ledger.append(record, wait=not self.batched)

    def sync(self, wait: bool = True) -> None:
        """The ledger and result lines appended so far are durable when this returns (both files in one batch);
        with wait=False, within BATCH_WINDOW from now (a later sync() waits for them)."""
        waiting = [h for h in (self._results, self._ledger) if h and h.unsynced]
        if waiting and not wait:
            self._pending = groupsync.soon(*(h.fileno() for h in waiting), within=BATCH_WINDOW)
        elif waiting:
            groupsync.durable(*(h.fileno() for h in waiting))
        for handle in waiting:
            handle.unsynced = False
        if wait and self._pending is not None:
            self._pending.wait()
            self._pending = None

    def ledger_many(self, event: str, task_ids: list[str], **fields: object) -> None:
        """The same ledger line for each task, QUEUED_BATCH lines to a write, made durable like `ledger` lines (a
        Ctrl-C of a run of 100,000 tasks writes a "skipped" line for each that did not start: one flush per line took
        half a minute)."""
        assert self._ledger is not None
        for start in range(0, len(task_ids), QUEUED_BATCH):
            now = round(time.time(), 3)
            self._ledger.append_many([{"time": now, "event": event, "task_id": task_id, **fields}
                                      for task_id in task_ids[start:start + QUEUED_BATCH]], wait=not self.batched)

    def event(self, name: str, **fields: object) -> None:
        assert self._events is not None
        self._events.append({"time": round(time.time(), 3), "event": name, **fields})

    def add_result(self, record: TaskRecord) -> bool:
        """Append a finished task's result unless it is already there; then its final ledger line."""
        assert self._results is not None
        self._spec_written()
        if record.task_id in self._finished:
            return False
        self._results.append(record.line(), wait=not self.batched)
        self._finished.add(record.task_id)
        self.ledger(record.status, record.task_id, attempt=record.attempt, reason=record.reason)
        return True

    def add_reduce_result(self, key: str, record: TaskRecord) -> None:
        """A finished reduce step, whole (answer, usage, memory generation), before anything else is done with it."""
        self._spec_written()
        self.ledger("reduce_result", record.task_id, key=key, record=record.line())

    def forget_failed(self) -> list[str]:
        """--retry-failed: failed results are moved aside so those tasks run again."""
        assert self._results is not None
        finished = self.results()
        keep = {k: v for k, v in finished.items() if v.status == "succeeded"}
        dropped = sorted(set(finished) - set(keep))
        if dropped:
            self._results.close()
            path = self.path / "results.jsonl"
            with (self.path / "results.retried.jsonl").open("a", encoding="utf-8") as old:
                for task_id in dropped:
                    old.write(json.dumps(finished[task_id].line()) + "\n")
            atomic_write_text(path, "".join(json.dumps(r.line()) + "\n" for r in keep.values()))
            self._results = JsonlFile(path)
            self._finished = set(keep)
            for task_id in dropped:
                self.ledger("requeued", task_id, reason="--retry-failed")
        for task_id in sorted({r.task_id for r in self.reduce_results().values() if r.status != "succeeded"}):
            self.ledger("requeued", task_id, step="reduce", reason="--retry-failed")
        return dropped

    def write_summary(self, summary: RunSummary) -> None:
        self._spec_written()
        atomic_write_text(self.path / "summary.json", summary.text())


def _run_names(runs_dir: Path) -> list[str]:
    return [p.name for p in runs_dir.iterdir() if has_spec(p)] if runs_dir.is_dir() else []
