"""log.jsonl: one JSON line per published generation, appended under the commit lock."""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator, Optional

from .errors import MemoryStoreError

_CHUNK = 16384


@dataclass(frozen=True)
class Commit:
    generation: int
    parent: Optional[int]
    author: str
    message: str
    paths: list[str]
    time: float  # unix seconds
    deleted: list[str] = field(default_factory=list)  # the subset of `paths` that the commit removed
    manifest: Optional[str] = None     # sha256 of the generation's MANIFEST (None: written before manifests)
    parent_hash: Optional[str] = None  # sha256 of the parent's log line, chaining the records
    key: Optional[str] = None          # idempotency key: a second commit with it is a no-op

    @property
    def when(self) -> datetime:
        return datetime.fromtimestamp(self.time, tz=timezone.utc)

    def to_line(self) -> bytes:
        data = {k: v for k, v in asdict(self).items() if v is not None or k not in _OPTIONAL}
        return (json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n").encode()

    @classmethod
    def from_line(cls, line: bytes | str) -> "Commit":
        data = json.loads(line)
        return cls(
            generation=int(data["generation"]),
            parent=None if data.get("parent") is None else int(data["parent"]),
            author=str(data["author"]),
            message=str(data["message"]),
            paths=list(data["paths"]),
            time=float(data["time"]),
            deleted=list(data.get("deleted", [])),
            manifest=data.get("manifest"),
            parent_hash=data.get("parent_hash"),
            key=data.get("key"),
        )


_OPTIONAL = ("manifest", "parent_hash", "key")


def line_hash(line: bytes) -> str:
    return hashlib.sha256(line.rstrip(b"\n")).hexdigest()


@dataclass
class LogState:
    """The log as read for recovery: whole records in order, unreadable whole lines, and a torn tail.
    Read again with `previous`, only the bytes appended since are parsed (the last line read is compared
    first, so a log cut or replaced is read whole)."""
    commits: list[Commit] = field(default_factory=list)
    hashes: list[str] = field(default_factory=list)    # line_hash of each commit's line
    numbers: list[int] = field(default_factory=list)   # line number of each commit
    bad: list[str] = field(default_factory=list)       # one problem per unreadable whole line
    torn: bytes = b""                                  # bytes after the last newline (a line cut short)
    keys: dict[str, int] = field(default_factory=dict)  # idempotency key -> generation
    ino: int = -1
    size: int = 0                                      # bytes of whole lines read
    lines: int = 0                                     # whole lines read
    last_line: bytes = b""
    chained: int = 0                                   # records found contiguous and chained (by recovery)
    chain_problems: list[str] = field(default_factory=list)
    broken: bool = False                               # a record out of sequence: nothing after it counts

    def extended(self) -> "LogState":
        return LogState(list(self.commits), list(self.hashes), list(self.numbers), list(self.bad), b"",
                        dict(self.keys), self.ino, self.size, self.lines, self.last_line, self.chained,
                        list(self.chain_problems), self.broken)


def read_state(path: Path, previous: Optional[LogState] = None) -> LogState:
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        return LogState()
    with fh:
        st = os.fstat(fh.fileno())
        state, start = LogState(ino=st.st_ino), 0
        if previous is not None and previous.ino == st.st_ino and previous.size and st.st_size >= previous.size:
            tail = previous.last_line + b"\n"
            fh.seek(previous.size - len(tail))
            if fh.read(len(tail)) == tail:
                state, start = previous.extended(), previous.size
        fh.seek(start)
        data = fh.read()
    body, newline, state.torn = data.rpartition(b"\n")
    if not newline:
        return state
    lines = body.split(b"\n")
    for number, line in enumerate(lines, state.lines + 1):
        if not line.strip():
            continue
        try:
            commit = Commit.from_line(line)
        except (ValueError, KeyError, TypeError) as exc:
            state.bad.append(f"{path}:{number}: unreadable log line ({exc.__class__.__name__})")
            continue
        state.commits.append(commit)
        state.hashes.append(line_hash(line))
        state.numbers.append(number)
        if commit.key is not None:
            state.keys.setdefault(commit.key, commit.generation)
    state.size, state.lines, state.last_line = start + len(body) + 1, state.lines + len(lines), lines[-1]
    return state


def last_line(path: Path) -> Optional[bytes]:
    """The newest whole line, read from the end of the file."""
    if not path.exists():
        return None
    return next((line for line, ended in _lines_from_end(path) if ended and line.strip()), None)


def append(path: Path, commit: Commit, midway: Optional[Callable[[], None]] = None) -> None:
    """Append one line with a single write (all or nothing under SIGKILL), then fsync."""
    line = commit.to_line()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        if midway is not None:
            os.write(fd, line[: len(line) // 2])
            midway()
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_all(path: Path) -> tuple[list[Commit], list[str]]:
    """Every commit in order, and a problem per unreadable line."""
    commits: list[Commit] = []
    problems: list[str] = []
    if not path.exists():
        return commits, problems
    with open(path, "rb") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                commits.append(Commit.from_line(line))
            except (ValueError, KeyError, TypeError) as exc:
                problems.append(f"{path}:{number}: unreadable log line ({exc.__class__.__name__})")
    return commits, problems


def entries_after(path: Path, generation: int) -> list[Commit]:
    """Commits with a generation above `generation`, oldest first, reading the file from its end."""
    newer: list[Commit] = []
    if not path.exists():
        return newer
    for line, _ in _lines_from_end(path):
        if not line.strip():
            continue
        commit = _parse(path, line)
        if commit.generation <= generation:
            break
        newer.append(commit)
    return newer[::-1]


def _lines_from_end(path: Path) -> Iterator[tuple[bytes, bool]]:
    """The file's lines from the newest to the oldest, read in chunks from its end, each with whether a
    newline ends it (only the first one yielded, the tail after the last newline, may lack it)."""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        pos = fh.tell()
        pending, tail = b"", True
        while pos > 0:
            step = min(_CHUNK, pos)
            pos -= step
            fh.seek(pos)
            lines = (fh.read(step) + pending).split(b"\n")
            pending = lines.pop(0) if pos > 0 else b""
            for line in reversed(lines):
                yield line, not tail
                tail = False


def _parse(path: Path, line: bytes) -> Commit:
    try:
        return Commit.from_line(line)
    except (ValueError, KeyError, TypeError) as exc:
        raise MemoryStoreError(f"{path}: unreadable log line ({exc}); run `ga memory verify`") from exc
