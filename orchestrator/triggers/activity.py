"""Activity records under GA_HOME, and the idle test built on them.

    activity/commands/<command>.json   the last start of each `ga` command (pid, time)
    activity/jobs/<kind>-<pid>-<hex>.lock
                                       one per running user job; its process holds an flock on it for its
                                       whole life (the kernel drops it if the process dies) and touches its
                                       mtime as a heartbeat, which dates the end of a crashed job
    activity/ended/<kind>.json         the latest end of a job of that kind

    with user_job(settings.home_dir, "fanout"):   # around a long user job
        ...
    is_idle(home, timedelta(minutes=30))          # no user job runs now and none ended within the window
"""
from __future__ import annotations

import json
import os
import secrets
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Optional, Union

import structlog

from memory_shared.fsutil import atomic_replace, flocked, is_abandoned, is_held, lock_fd
from orchestrator.triggers.durations import format_duration, parse_duration
from orchestrator.triggers.pyfile import PyFileError, load_python_file

if TYPE_CHECKING:
    from configs import Settings

log = structlog.get_logger("ga.activity")
Clock = Callable[[], datetime]
USER_JOB_KINDS = ("run", "fanout")
HEARTBEAT_SECONDS = 30.0


def local_now() -> datetime:
    return datetime.now().astimezone()


@dataclass(frozen=True)
class JobRecord:
    kind: str
    pid: int
    started: datetime
    heartbeat: datetime
    path: Path


@dataclass(frozen=True)
class IdleStatus:
    idle: bool
    reason: str
    last_active: Optional[datetime] = None


def activity_dir(home: Union[Path, str]) -> Path:
    return Path(home).expanduser() / "activity"


def record_activity(home: Union[Path, str], command: Optional[str], *, now: Optional[Clock] = None) -> None:
    """Note that `ga COMMAND` started now. Never fails the command: a problem is logged and ignored."""
    if not command:
        return
    clock = now or local_now
    folder = activity_dir(home) / "commands"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        body = {"command": command, "pid": os.getpid(), "time": clock().isoformat()}
        atomic_replace(folder / f"{_safe(command)}.json", json.dumps(body).encode())
    except OSError as exc:
        log.debug("activity_not_recorded", command=command, error=str(exc))


@contextmanager
def user_job(home: Union[Path, str], kind: str, *, now: Optional[Clock] = None,
             heartbeat: float = HEARTBEAT_SECONDS) -> Iterator[JobRecord]:
    """Mark a user job as running for the length of the block (and as ended when it leaves)."""
    clock = now or local_now
    jobs = activity_dir(home) / "jobs"
    jobs.mkdir(parents=True, exist_ok=True)
    started = clock()
    name = f"{_safe(kind)}-{os.getpid()}-{secrets.token_hex(4)}"
    temp, path = jobs / f".{name}.tmp", jobs / f"{name}.lock"
    fd = lock_fd(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL)
    os.write(fd, json.dumps({"kind": kind, "pid": os.getpid(), "started": started.isoformat()}).encode())
    _touch(temp, started)
    os.rename(temp, path)  # only ever visible while locked: a checker never mistakes it for a crashed job
    stop = threading.Event()
    beat = threading.Thread(target=_heartbeat, args=(path, clock, heartbeat, stop), daemon=True,
                            name=f"ga-heartbeat-{kind}")
    beat.start()
    record = JobRecord(kind, os.getpid(), started, started, path)
    try:
        yield record
    finally:
        stop.set()
        beat.join()
        try:
            _note_end(home, kind, clock(), crashed=False, started=started)
        except OSError as exc:  # the job's own outcome (a run's JSON) matters more than this note of its end
            log.warning("user_job_end_not_recorded", kind=kind, problem=str(exc))
        finally:  # the end is on disk before the lock goes: no moment without either
            path.unlink(missing_ok=True)
            os.close(fd)


def running_jobs(home: Union[Path, str], kinds: Optional[Iterable[str]] = None) -> list[JobRecord]:
    """User jobs running now. A lock nobody holds belongs to a crashed job: it is dated and removed."""
    wanted = set(kinds) if kinds is not None else None
    jobs = activity_dir(home) / "jobs"
    found: list[JobRecord] = []
    for path in sorted(jobs.glob("*.lock")) if jobs.is_dir() else []:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue  # ended meanwhile
        try:
            record = _read_job(path, fd)
            held = is_held(fd)
            if held and (wanted is None or (record and record.kind in wanted)):
                found.append(record or JobRecord("?", 0, _mtime(path), _mtime(path), path))
            elif not held:
                _reap(home, path, record)
        finally:
            os.close(fd)
    for temp in jobs.glob(".*.tmp") if jobs.is_dir() else []:  # a job that died while starting
        if _stale(temp) and is_abandoned(temp):
            temp.unlink(missing_ok=True)
    return found


def last_active(home: Union[Path, str], kinds: Iterable[str] = USER_JOB_KINDS) -> Optional[datetime]:
    """The latest end of a job of these kinds, or the latest start of a `ga <kind>` command."""
    folder = activity_dir(home)
    times: list[datetime] = []
    for kind in kinds:
        ended = _read_json(folder / "ended" / f"{_safe(kind)}.json")
        started = _read_json(folder / "commands" / f"{_safe(kind)}.json")
        for data, key in ((ended, "ended"), (started, "time")):
            moment = _parse_time(data.get(key)) if data else None
            if moment is not None:
                times.append(moment)
    return max(times) if times else None


def is_idle(home: Union[Path, str], window: Union[timedelta, str], now: Optional[Clock] = None,
            kinds: Iterable[str] = USER_JOB_KINDS) -> bool:
    """True only when no user job runs now and none was active within `window`."""
    return idle_status(home, window, now=now, kinds=kinds).idle


def idle_status(home: Union[Path, str], window: Union[timedelta, str], *, now: Optional[Clock] = None,
                kinds: Iterable[str] = USER_JOB_KINDS, trigger: Optional[Path] = None) -> IdleStatus:
    """The idle test with its reason. A trigger file (`check() -> bool`) replaces the window rule, but a
    running user job always means busy. A failing trigger means busy (logged)."""
    kinds = tuple(kinds)
    running = running_jobs(home, kinds)
    if running:
        job = running[0]
        return IdleStatus(False, f"`ga {job.kind}` is running (pid {job.pid}, since {job.started:%H:%M:%S})",
                          job.heartbeat)
    last = last_active(home, kinds)
    if trigger is not None:
        return _trigger_status(Path(trigger), last)
    window = parse_duration(window)
    current = (now or local_now)()
    if last is not None and current - last < window:
        return IdleStatus(False, f"last user job active at {last:%Y-%m-%d %H:%M:%S}, within the "
                                 f"{format_duration(window)} window", last)
    return IdleStatus(True, "no user job within the window" if last else "no user job recorded", last)


def idle_now(settings: "Settings", *, now: Optional[Clock] = None) -> IdleStatus:
    """The idle test as configured: explore.idle_window, or explore.idle_trigger when set."""
    explore = settings.explore
    return idle_status(settings.home_dir, explore.idle_window, now=now, trigger=explore.idle_trigger)


def _trigger_status(path: Path, last: Optional[datetime]) -> IdleStatus:
    try:
        module = load_python_file(path, "idle trigger", required={"check": "def check() -> bool"})
        verdict = module.check()
    except PyFileError as exc:
        log.error("idle_trigger_bad", error=str(exc))
        return IdleStatus(False, str(exc), last)
    except Exception as exc:  # the user's code: any failure counts as "not idle"
        log.error("idle_trigger_failed", trigger=str(path), error=f"{type(exc).__name__}: {exc}")
        return IdleStatus(False, f"{path}: check() raised {type(exc).__name__}: {exc}", last)
    return IdleStatus(bool(verdict), f"{path}: check() returned {verdict!r}", last)


def _heartbeat(path: Path, clock: Clock, every: float, stop: threading.Event) -> None:
    while not stop.wait(every):
        try:
            _touch(path, clock())
        except OSError:
            return


def _note_end(home: Union[Path, str], kind: str, ended: datetime, *, crashed: bool,
              started: Optional[datetime]) -> None:
    folder = activity_dir(home) / "ended"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{_safe(kind)}.json"
    with flocked(folder / ".lock"):
        previous = _parse_time((_read_json(target) or {}).get("ended"))
        if previous is not None and previous >= ended:
            return
        body = {"kind": kind, "ended": ended.isoformat(), "crashed": crashed,
                "started": started.isoformat() if started else None}
        atomic_replace(target, json.dumps(body).encode())


def _reap(home: Union[Path, str], path: Path, record: Optional[JobRecord]) -> None:
    if record is not None:
        log.warning("user_job_crashed", kind=record.kind, pid=record.pid, last_heartbeat=record.heartbeat.isoformat())
        _note_end(home, record.kind, record.heartbeat, crashed=True, started=record.started)
    path.unlink(missing_ok=True)


def _read_job(path: Path, fd: int) -> Optional[JobRecord]:
    try:
        data = json.loads(os.read(fd, 4096) or b"{}")
        started = _parse_time(data.get("started"))
        beat = _mtime(path)
        return JobRecord(str(data["kind"]), int(data["pid"]), started or beat, max(beat, started or beat), path)
    except (ValueError, KeyError, TypeError, OSError):
        return None


def _stale(path: Path, seconds: float = 60.0) -> bool:
    try:
        return time.time() - path.stat().st_ctime > seconds  # real time: the lock is not yet taken when young
    except FileNotFoundError:
        return False




def _touch(path: Path, when: datetime) -> None:
    os.utime(path, (when.timestamp(), when.timestamp()))


def _mtime(path: Path) -> datetime:
    try:
        return datetime.fromtimestamp(path.stat().st_mtime).astimezone()
    except FileNotFoundError:
        return local_now()


def _read_json(path: Path) -> Optional[dict]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _parse_time(value: object) -> Optional[datetime]:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.astimezone()


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name) or "_"
