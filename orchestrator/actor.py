"""The worker actor: reused across tasks; each task gets a fresh `worker.Worker`. On Ray it is one process
(orchestrator/pool.py wraps this class with `ray.remote`); with the in-process executor (orchestrator/local.py)
it is a plain object in the `ga fanout` process and its tasks are threads there.

The driver sends a `Job` (see `Driver.job`); the actor answers with the `TaskRecord` its Worker returned
(worker/record.py), its own part added: attempt, times, how it was stopped, where it ran.
One process runs up to `slots` tasks at once (threads: the work is waiting on the model), which
keeps Ray's per-process cost (start-up, ~130 MB, background CPU) per slot low: by default a pool has no more
processes than the cluster has CPUs (orchestrator/pool.py, slots_for); `fanout.slots_per_actor` = 1 gives
every task a process of its own.
"""
from __future__ import annotations

import functools
import heapq
import itertools
import os
import shutil
import socket
import sys
import threading
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Optional, TypedDict, TypeVar, Union

import structlog

from configs.logs import in_context, setup_logging
from memory_shared import MemoryStore, StoreHandle, fsutil
from orchestrator.executor import TaskProgress
from orchestrator.governor import FailoverModel, task_model
from orchestrator.inputfiles import copy_input
from orchestrator.reaper import alive
from orchestrator.records import ActorInfo, Job, Lease, NestedUsage, TaskRecord
from worker.agent import Worker
from worker.model import Model
from worker.record import Failure, Stop
from worker.taskcheck import TaskCheck
from worker.taskspec import Runtime, TaskSpec
from worker.types import Status
from worker.usage import Usage

if TYPE_CHECKING:
    from configs import Settings

CANCEL_GRACE = 10.0  # seconds a cancelled Worker gets to return before the actor gives up on it
CONTROL_CALLS = 4  # concurrent calls beyond the task slots: progress, cancel, info, renew
WATCH_EVERY = 0.1  # seconds between checks that the drivers of the running tasks are alive
LEASE_LOST = "driver gone"  # the start of the reason of a Stop.lease_lost (the driver, if alive after all, requeues)
STOPPED = "stopped by the person"  # the start of the reason of a Stop.stopped (`ga runs stop`)
WORKER_THREAD = "ga-worker-"  # the name of the thread a task's Worker runs in starts with this
TASK_FILE_CAP = 64 << 20  # bytes read of a file in a task directory: history, answer, a nested run's summary
log = structlog.get_logger("ga.actor")
_OPENING_STORES = threading.Lock()  # held while a process's first MemoryStore for a root is built


Steering = dict[str, Union[str, float]]  # a note told to a running task: {"event": "told", "at", "text"}


@dataclass
class TaskState:
    """One task running in this actor: its Worker (None until it is built), how it was stopped, its progress."""

    job: Job
    progress: TaskProgress
    worker: Optional[Worker] = None
    cancel: str = ""  # the reason it was stopped ("" while it was not)
    stop: Optional[Stop] = None
    steering: list[Steering] = field(default_factory=list)  # the notes it was told


class Outcome(TypedDict, total=False):
    """How a task's Worker ended: its record, or the error it crashed with; abandoned: it outlived its cancel."""

    result: TaskRecord
    error: str
    abandoned: bool


class ActorInfoReply(TypedDict):
    uid: str
    pid: int
    node_id: Optional[str]
    host: str
    tainted: bool
    slots: int


class WorkerActor:
    """Created with max_concurrency = slots + CONTROL_CALLS: up to `slots` tasks at once, each in its own
    thread with its own Worker, plus room for progress() and cancel() while they run.

    in_process: it lives in the driver's own process (no driver to watch, the driver's logging kept)."""

    def __init__(self, uid: str, slots: int = 1, in_process: bool = False):
        self.uid, self.slots = uid, slots
        self.tasks: dict[str, TaskState] = {}  # task id -> what runs here
        self.stores: dict[str, StoreHandle] = {}  # one per memory root (or service)
        self.tainted = False  # a Worker thread outlived its cancel: the driver must not reuse this process
        self.leases: dict[str, float] = {}  # lessee -> monotonic time its driver's lease runs out
        self._lock = threading.Lock()
        self.in_process = in_process
        if not in_process:
            threading.Thread(target=self._watch_drivers, daemon=True).start()

    def info(self) -> ActorInfoReply:
        return {"uid": self.uid, "pid": os.getpid(), "node_id": _node_id(),
                "host": socket.gethostname(), "tainted": self.tainted, "slots": self.slots}

    def progress(self) -> dict[str, TaskProgress]:
        """task id -> {turn, tool, tokens, started, ...} for every task running here."""
        with self._lock:
            return {task_id: TaskProgress(**state.progress) for task_id, state in self.tasks.items()}

    def renew(self, lessee: str, ttl: float) -> None:
        """The driver of `lessee` is alive: its tasks here may run `ttl` seconds more without hearing from it."""
        with self._lock:
            self._extend(lessee, ttl)

    def _extend(self, lessee: str, ttl: float) -> None:  # the caller holds the lock
        self.leases[lessee] = max(self.leases.get(lessee, 0.0), time.monotonic() + ttl)

    def _watch_drivers(self) -> None:
        """Cancel the tasks of a driver that died (kill -9 runs no cleanup): checked directly when it runs in this
        machine's pid namespace, else by its lease running out."""
        while True:
            time.sleep(WATCH_EVERY)
            now = time.monotonic()
            with self._lock:
                running = [(task_id, state.job.lease) for task_id, state in self.tasks.items()
                           if state.job.lease and not state.cancel]
                expiries = dict(self.leases)
            verdicts: dict[str, str] = {}  # one check per driver, not per task: an actor runs many of one run's
            for task_id, lease in running:
                lessee = lease["lessee"]
                if lessee not in verdicts:
                    verdicts[lessee] = _driver_lost(lease, expiries.get(lessee, 0.0), now)
                if verdicts[lessee]:
                    self.cancel(task_id, f"{LEASE_LOST}: {verdicts[lessee]}", Stop.lease_lost)

    def tell(self, task_id: str, text: str) -> bool:
        """Deliver a person's note into the task's next request; False when the task is not running here."""
        with self._lock:
            state = self.tasks.get(task_id)
            if state is None or state.cancel or state.worker is None:  # not here, not started, being stopped
                return False
            worker = state.worker
            state.steering.append({"event": "told", "at": round(time.time(), 3), "text": text[:500]})
        worker.tell(text)
        return True

    def stop_task(self, task_id: str, text: str) -> bool:
        """A person stops the task (`ga runs stop`): it ends unfinished, and --resume runs it again."""
        return self.cancel(task_id, f"{STOPPED}: {text}", Stop.stopped) > 0

    def cancel(self, task_id: Optional[str] = None, reason: str = "cancelled", stop: Stop = Stop.cancelled) -> int:
        """Stop one task (or all): its Worker stops at the next step and its processes are killed. The record
        says `stop` with `reason` (one that timed out already stays timed out)."""
        with self._lock:
            targets = [s for t, s in self.tasks.items() if task_id is None or t == task_id]
            for state in targets:
                if state.stop != Stop.timeout:
                    state.cancel, state.stop = reason, stop
        for state in targets:
            if state.worker is not None:
                state.worker.cancel()
        return len(targets)

    def run_task(self, job: Job) -> TaskRecord:
        started = time.time()
        task_id, lease = job.task_id, job.lease
        with self._lock:
            self.tasks[task_id] = TaskState(job, TaskProgress(
                task_id=task_id, turn=0, tool="", since=started, tokens=0, started=started, attempt=job.attempt,
                pid=os.getpid()))
            if lease:  # the job just came from a live driver
                self._extend(lease["lessee"], lease["ttl"])
        try:
            record = self._run(job, started)
        except Exception as exc:  # a setup problem in this process: report it, the driver decides
            record = _record(job, "failed", started, reason=f"worker setup failed: {type(exc).__name__}: {exc}")
            record.error = Failure.setup
        finally:
            with self._lock:
                self.tasks.pop(task_id, None)
                in_use = {state.job.lease["lessee"] for state in self.tasks.values() if state.job.lease}
                for lessee in [k for k in self.leases if k not in in_use and self.leases[k] < time.monotonic()]:
                    del self.leases[lessee]
        record.actor = ActorInfo(uid=self.uid, pid=os.getpid(), node_id=_node_id(), tainted=self.tainted)
        return record

    # ---- one task ----

    def task_model(self, job: Job, client_id: str) -> Model:
        """The task's model client (`ga replay` puts a recording in its place: orchestrator/replay.py)."""
        return task_model(job, client_id)

    def _run(self, job: Job, started: float) -> TaskRecord:
        task_dir = Path(job.task_dir)
        workdir = _prepare_workdir(job, task_dir)
        settings = job.settings
        self._configure_logging(settings.log.level)
        for name, value in job.secrets.items():
            os.environ.setdefault(name, value)
        task_id = job.task_id
        model = self.task_model(job, f"{self.uid}:{task_id}")
        spec = TaskSpec(job.prompt, task_id=task_id, workdir=workdir, settings=settings,
                        history_path=task_dir / "history.jsonl", tools=tuple(job.tools) if job.tools is not None else None,
                        check=TaskCheck.model_validate(job.check) if job.check else None, commit_key=job.commit_key,
                        budget_tokens=job.budget_tokens, budget_cost=job.budget_cost)
        runtime = Runtime(model=model, store=self._store(job, settings), env=job.env,
                          on_turn=lambda event: self._on_turn(task_id, event),
                          on_tool_start=lambda event: self._on_tool_start(task_id, event))
        worker = Worker(spec, runtime)
        outcome: Outcome = {}
        try:
            return self._finish(job, started, worker, model, task_dir, outcome)
        finally:
            if not outcome.get("abandoned"):  # at once: a finished task holds no descriptor (a Worker sits in cycles)
                worker.history.close()

    def _finish(self, job: Job, started: float, worker: Worker, model: Model, task_dir: Path,
                outcome: Outcome) -> TaskRecord:
        """Run the Worker to its end (`outcome`: its result, or "abandoned" when its thread outlived the cancel)
        and make its record."""
        with self._lock:
            state = self.tasks[job.task_id]
            state.worker = worker
            cancelled_early = state.cancel
        if cancelled_early:
            worker.cancel()
        self._wait(worker, state, job, outcome)
        with self._lock:
            stopped = state.cancel, state.stop
        record = _outcome_record(job, started, worker, stopped, outcome)
        record.steering = state.steering or None
        if isinstance(model, FailoverModel) and model.switches:
            record.failovers, record.usage_by_model = model.switches, model.usage
        if getattr(model, "circuit_open", False):
            record.stop = Stop.paused
        account = worker.account  # nested runs were run by this process (the gateway): its own count
        record.nested_usage = NestedUsage.model_validate({**account.nested.model_dump(), "runs": account.runs})
        record.history_path, record.task_dir = str(task_dir / "history.jsonl"), str(task_dir)
        worker.history.write_beside("answer.md", record.answer + "\n")
        if job.return_files:  # the driver cannot see this node's disk: send what it must keep
            record.files = _read_files(worker.history.folder, ["history.jsonl", "answer.md"])
        return record

    def _wait(self, worker: Worker, state: TaskState, job: Job, outcome: Outcome) -> Outcome:
        """Run the Worker in its own thread; past the job's timeout cancel it (a thread that outlives that taints
        the actor)."""
        timeout = job.timeout
        if self.in_process:
            return self._run_here(worker, state, timeout, outcome)
        thread = threading.Thread(target=in_context(_run_worker), args=(worker, outcome), daemon=True,
                                  name=f"{WORKER_THREAD}{job.task_id}"[:60])
        thread.start()
        thread.join(timeout)
        if thread.is_alive():
            with self._lock:
                state.cancel, state.stop = f"timeout after {timeout:g}s", Stop.timeout
            worker.cancel()
            thread.join(CANCEL_GRACE)
            if thread.is_alive():
                self.tainted = True
                outcome["abandoned"] = True  # it may still write its history: its files stay open
        return outcome

    def _run_here(self, worker: Worker, state: TaskState, timeout: Optional[float],
                  outcome: Outcome) -> Outcome:
        """In the driver's process the Worker runs in the task's own thread; one shared thread cancels it at its
        timeout. One that still does not stop is the driver's to abandon (the map loop's kill past KILL_MARGIN)."""
        def time_out() -> None:
            with self._lock:
                state.cancel, state.stop = f"timeout after {timeout:g}s", Stop.timeout
            worker.cancel()

        deadline = DEADLINES.add(timeout, time_out) if timeout else None
        try:
            _run_worker(worker, outcome)
        finally:
            if deadline is not None:
                DEADLINES.cancel(deadline)
        return outcome

    def _configure_logging(self, level: str) -> None:
        """Once per process: the run's level (Ray starts workers with structlog's debug-everything default)."""
        if not self.in_process and getattr(self, "_log_level", None) != level:
            setup_logging(level)
            self._log_level = level

    def _store(self, job: Job, settings: Settings) -> Optional[StoreHandle]:
        if job.memory == "none":
            return None
        if job.memory == "service":
            from orchestrator.memory_service import NAMESPACE, ReplicaStore  # Ray: only a Ray run has a service

            if job.memory_service is None:
                raise ValueError("the job is in memory service mode but names no service (Driver.job sets it)")
            key = f"service:{job.memory_service}"
            with _OPENING_STORES:
                if key not in self.stores:
                    import ray  # Ray: the in-process executor runs this class without it

                    service = ray.get_actor(job.memory_service, namespace=NAMESPACE)
                    replica: StoreHandle = ReplicaStore(Path(str(job.memory_replica)), service)
                    self.stores[key] = replica
            return self.stores[key]
        root = str(settings.memory_root)
        store = self.stores.get(root)
        if store is None:
            with _OPENING_STORES:  # once: the first tasks of a run all start at once (188 stores were built for W=256)
                store = self.stores.get(root)
                if store is None:
                    store = self.stores[root] = MemoryStore(settings.memory_root, create=True,
                                                            l1_max_lines=settings.memory.l1_max_lines,
                                                            l1_max_chars=settings.memory.l1_max_chars)
        return store

    def _on_turn(self, task_id: str, event: Mapping[str, object]) -> None:
        """A tool call ended: the worker waits for the model next (tool "" since now)."""
        with self._lock:
            state = self.tasks.get(task_id)
            if state is not None:
                state.progress.update(turn=_field(event, "turn", 0), tool="", since=time.time(),
                                      tokens=_field(event, "tokens", 0))

    def _on_tool_start(self, task_id: str, event: Mapping[str, object]) -> None:
        """A tool call started: the live view shows it with the seconds it has run."""
        with self._lock:
            state = self.tasks.get(task_id)
            if state is not None:
                state.progress.update(turn=_field(event, "turn", 0), tool=_field(event, "tool", ""), since=time.time())
                worker = state.worker  # what it spent so far: the live view's count, as the turn line's
                if worker is not None:
                    state.progress["tokens"] = worker.account.spent().total


FieldT = TypeVar("FieldT")


def _field(event: Mapping[str, object], key: str, default: FieldT) -> FieldT:
    """A field of the Worker's hook event, of the default's type (the Worker's own, so never another)."""
    value = event.get(key, default)
    return value if isinstance(value, type(default)) else default


def _node_id() -> Optional[str]:
    """The Ray node this actor runs on; None in the driver's own process without Ray."""
    ray = sys.modules.get("ray")
    return ray.get_runtime_context().get_node_id() if ray is not None and ray.is_initialized() else None


def _driver_lost(lease: Lease, expires: float, now: float) -> str:
    """Why the driver that sent this task is taken for dead ("" while it is alive)."""
    started, namespace = lease.get("pid_started"), lease.get("namespace")
    if started is not None and namespace and namespace == process_namespace():
        return "" if alive(lease["pid"], started) else f"its process {lease['pid']} ended"
    return f"its lease was not renewed for {lease['ttl']:g}s" if now > expires else ""


@functools.lru_cache(maxsize=1)
def process_namespace() -> str:
    """This machine's boot and pid namespace: a pid seen here means the same process everywhere it is equal."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}:{os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return ""


def _run_worker(worker: Worker, outcome: Outcome) -> None:
    try:
        outcome["result"] = worker.run()
    except BaseException as exc:  # noqa: BLE001  (reported to the driver as the task's failure)
        outcome["error"] = f"worker crashed: {type(exc).__name__}: {exc}"


def _record(job: Job, status: Status, started: float, reason: str = "", usage: Optional[Usage] = None) -> TaskRecord:
    return TaskRecord(task_id=job.task_id, status=status, attempt=job.attempt, reason=reason, usage=usage or Usage(),
                      started=started, finished=time.time(), seconds=round(time.time() - started, 3))


def _outcome_record(job: Job, started: float, worker: Worker, stopped: tuple[str, Optional[Stop]],
                    outcome: Outcome) -> TaskRecord:
    """The record of how the Worker ended: stopped (timeout, lease lost, cancelled: the reason and the Stop the
    actor was given), crashed, or its result."""
    reason, stop = stopped
    if reason:
        record = _record(job, "failed", started, reason=reason, usage=worker.usage)
        record.stop = stop
        return record
    if "error" in outcome:
        record = _record(job, "failed", started, reason=outcome["error"], usage=worker.usage)
        record.error = Failure.crash
        return record
    record = outcome.get("result")  # the Worker's own record: the actor adds its part
    assert record is not None, "a Worker that neither crashed nor was stopped returned its record"
    record.attempt, record.started = job.attempt, started
    record.finished = time.time()
    record.seconds = round(record.finished - started, 3)
    if record.check is not None and not record.check["passed"]:
        record.error = Failure.check  # the map loop retries it like a lost worker
    return record


def _prepare_workdir(job: Job, task_dir: Path) -> Path:
    """A clean task directory with the task's inputs in its workdir (sent along when there is no shared disk)."""
    _fresh_task_dir(task_dir, job.attempt)
    workdir = task_dir / "workdir"
    os.mkdir(workdir)
    if job.inputs:
        with closing(fsutil.Folder("/")) as root:
            for source in job.inputs:
                if source in job.input_files:
                    (workdir / Path(source).name).write_bytes(job.input_files[source])
                else:
                    copy_input(root, source, workdir / Path(source).name, follow_link=job.input_links)
    return workdir


def _fresh_task_dir(task_dir: Path, attempt: int) -> None:
    """An empty task directory: a retry starts clean, what the earlier attempt left kept aside for inspection. The
    usual first attempt costs one mkdir."""
    try:
        os.mkdir(task_dir)
        return
    except FileNotFoundError:
        task_dir.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        if any(task_dir.iterdir()):
            aside = task_dir.parent / f".{task_dir.name}.attempt-{attempt - 1}"
            if aside.exists():
                shutil.rmtree(aside, ignore_errors=True)
            task_dir.rename(aside)
    task_dir.mkdir(parents=True, exist_ok=True)


def _read_files(folder: fsutil.Folder, names: list[str]) -> dict[str, str]:
    """The task directory's files the driver keeps, each up to a cap; one that is not a regular file is left out."""
    files = {}
    for name in names:
        try:
            files[name] = folder.read(name, TASK_FILE_CAP).decode("utf-8", errors="replace")
        except FileNotFoundError:
            continue
        except fsutil.Unsafe as exc:
            log.warning("task_file_refused", problem=str(exc))
    return files


# ---- one thread that runs each registered callback once its deadline passes: the in-process executor's task
# timeouts, without a waiting thread per task

class Deadline:
    def __init__(self, when: float, action: Callable[[], None]):
        self.when = when
        self.action: Optional[Callable[[], None]] = action  # None once it ran or was cancelled


class Deadlines:
    """A heap of deadlines. A cancelled one lets go of its action at once (the action's closure holds a task's
    Worker: its history's files, its messages); its small entry leaves the heap when the cancelled outnumber the
    live, so a run of short tasks with long timeouts keeps the heap as small as what is running."""

    COMPACT_FROM = 64  # cancelled entries below which the heap is not rebuilt

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Deadline]] = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        self._thread: Optional[threading.Thread] = None
        self._cancelled = 0  # entries in the heap whose deadline was cancelled

    def add(self, seconds: float, action: Callable[[], None]) -> Deadline:
        """Run `action` (in the deadline thread) `seconds` from now, unless `cancel` comes first."""
        deadline = Deadline(time.monotonic() + seconds, action)
        with self._wake:
            heapq.heappush(self._heap, (deadline.when, next(self._order), deadline))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, daemon=True, name="ga-deadlines")
                self._thread.start()
            self._wake.notify()
        return deadline

    def cancel(self, deadline: Deadline) -> None:
        with self._wake:
            if deadline.action is None:
                return  # ran or cancelled already
            deadline.action = None
            self._cancelled += 1
            if self._cancelled >= self.COMPACT_FROM and 2 * self._cancelled > len(self._heap):
                self._heap = [entry for entry in self._heap if entry[2].action is not None]
                heapq.heapify(self._heap)
                self._cancelled = 0

    def __len__(self) -> int:
        """Entries in the heap, cancelled ones not yet dropped included."""
        return len(self._heap)

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._heap or self._heap[0][0] > time.monotonic():
                    self._wake.wait(self._heap[0][0] - time.monotonic() if self._heap else None)
                _, _, deadline = heapq.heappop(self._heap)
                action, deadline.action = deadline.action, None
                if action is None:
                    self._cancelled -= 1
            if action is not None:
                try:
                    action()
                except Exception:  # noqa: BLE001  (one failing action must not stop the others' timeouts)
                    pass


DEADLINES = Deadlines()
