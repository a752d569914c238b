"""The commit log and recovery: what the log and the generations say the store's state is.

log.jsonl holds one JSON line per published generation, appended under the commit lock. Recovery reads it
with the generations: it derives HEAD, finishes or undoes what a crash left, and names the rest.

A generation is published when its record is a whole line of log.jsonl and its directory exists (gc and
repair note in events.jsonl the generations they took away). HEAD is only a pointer to the newest one:
missing, garbage, behind or ahead, it is recomputed and rewritten, never obeyed. A crashed commit can leave
at most one generation directory above the log (it died between renaming staging into place and appending
its record) and a torn last line: the line is cut (kept in quarantine/), and the generation, complete (its
tree was whole before the rename), gets its record back from its MANIFEST.record; an incomplete one goes to
quarantine/. Anything else where the log and the generations disagree is a problem: commits and pins refuse
until `ga memory repair` settles it.

events.jsonl is advice, never evidence: anything that can write the store can write a line there. An event
can only excuse data that is gone with nothing left to bring it back from: a missing generation whose
manifests/<n> is gone too (gc takes it along; repair, giving a generation up as lost, moves it to
quarantine/), a missing file whose content is nowhere in the store (verify.py). It never makes ga skip a
rebuild it could do, nor makes anything be deleted; a generation directory that exists is checked and kept
whatever an event line says. Of upgrade events the first hash per generation counts.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator, Optional

from . import events
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


# ---- recovery: derive HEAD from the log and the generations, decide what a crash left

REPAIR_HINT = "run `ga memory repair --dry-run` to see the fix, then `ga memory repair`"


@dataclass(frozen=True)
class Fix:
    kind: str          # "head", "cut_tail" or "record"
    generation: int
    message: str


@dataclass
class Assessment:
    head: int                                   # newest published generation, -1 before generation 0
    log: LogState
    dirs: set[int]
    gone: set[int]                              # removed by gc, or given up as lost by repair (manifests/<n> gone too)
    upgraded: dict[int, str]                    # manifest hashes recorded when an old store was upgraded
    dropped: set[tuple[int, str]]               # (generation, path) repair moved to quarantine: damaged, unrestorable
    head_text: Optional[bytes]
    fixes: list[Fix] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    strays: list[str] = field(default_factory=list)
    beyond: list[int] = field(default_factory=list)  # generation dirs above the log that are not a crash leftover

    @property
    def keys(self) -> dict[str, int]:
        return self.log.keys


def fingerprint(root: Path) -> tuple:
    """Changes whenever the log, the events, HEAD or the set of generation directories change.
    (Called several times per commit: plain os calls on string paths.)"""
    base = str(root)
    sigs = []
    for name in ("log.jsonl", events.NAME, "generations"):
        try:
            st = os.stat(f"{base}/{name}")
            sigs.append((st.st_ino, st.st_size, st.st_mtime_ns))
        except FileNotFoundError:
            sigs.append(None)
    try:
        fd = os.open(f"{base}/HEAD", os.O_RDONLY)
    except FileNotFoundError:
        head = None
    else:
        try:
            head = os.read(fd, 64)
        finally:
            os.close(fd)
    return sigs[0], sigs[1], head, sigs[2]


def assess(root: Path, previous: Optional[LogState] = None) -> Assessment:
    """What the store holds and what to do about it; `previous` (an earlier assessment's log) lets only the
    log's new lines be parsed and chained."""
    log_path, gens = root / "log.jsonl", root / "generations"
    log = read_state(log_path, previous)
    gone, upgraded, dropped = _from_events(root)
    if gone:  # an event excuses a missing generation only if nothing is left to rebuild it from
        kept = set(os.listdir(root / "manifests")) if (root / "manifests").is_dir() else set()
        gone = {g for g in gone if str(g) not in kept}
    dirs: set[int] = set()
    strays: list[str] = []
    if gens.is_dir():
        for entry in os.scandir(gens):
            (dirs.add(int(entry.name)) if entry.name.isdigit() else strays.append(entry.name))
    try:
        head_text: Optional[bytes] = (root / "HEAD").read_bytes()
    except FileNotFoundError:
        head_text = None
    found = Assessment(-1, log, dirs, gone, upgraded, dropped, head_text, strays=sorted(strays))
    problems = found.problems
    problems += log.bad
    problems += [f"{gens / name} is not a generation" for name in found.strays]

    _chain(log, log_path)
    problems += log.chain_problems
    last = log.chained - 1

    _leftovers(found, log_path, last)
    for generation in range(last + 1):  # gc never removes HEAD, whatever an event line says
        if generation not in dirs and (generation not in gone or generation == last):
            what = (f"HEAD points to generation {generation}, which does not exist" if generation == last
                    else f"generation {generation} does not exist")
            problems.append(f"{what}: its record is in {log_path} and gc did not remove it")
    found.head = last
    restoring = any(fix.kind == "record" for fix in found.fixes)  # HEAD is recomputed after it
    if last >= 0 and not restoring and head_text != f"{last}\n".encode():
        was = "missing" if head_text is None else repr(head_text.decode(errors="replace").strip()[:20])
        found.fixes.append(Fix("head", last, f"log/HEAD mismatch: HEAD was {was} but generation {last} is the "
                                             "newest published; HEAD recomputed"))
    return found


def _chain(log: LogState, log_path: Path) -> None:
    """Check the records not yet chained: numbered in order, each naming its parent and its parent's hash."""
    for index in range(log.chained, len(log.commits)):
        if log.broken:
            break
        commit, number = log.commits[index], log.numbers[index]
        expected_parent = index - 1 if index else None
        if commit.generation != index or commit.parent != expected_parent:
            log.chain_problems.append(f"{log_path}:{number}: record of generation {commit.generation} (parent "
                                      f"{commit.parent}) where generation {index} (parent {expected_parent}) belongs")
            log.broken = True
            break
        if commit.parent_hash is not None and commit.parent_hash != (log.hashes[index - 1] if index else None):
            log.chain_problems.append(f"{log_path}:{number}: the record of generation {index} does not chain "
                                      f"to the record of generation {index - 1} (the log was edited)")
        log.chained = index + 1


def _leftovers(found: Assessment, log_path: Path, last: int) -> None:
    """A torn last line and generation dirs above the log: a crashed commit's leftovers (undone), or lost
    records (a problem)."""
    head_text, log = found.head_text, found.log
    head_number = int(head_text) if head_text is not None and head_text.strip().isdigit() else None
    above = sorted(g for g in found.dirs if g > last)
    # HEAD is replaced only after the record is whole, so HEAD naming an existing generation above the log
    # proves records were lost from it. One generation next to the log is restored either way: its record
    # is proven by its tree (lostrecords.py); several are left to repair.
    evidence = head_number is not None and head_number > last and head_number in found.dirs
    if not log.torn and not above:
        return
    if above in ([], [last + 1]):
        if log.torn:
            found.fixes.append(Fix("cut_tail", last, f"{log_path} ends with a torn line (a commit died "
                                                      "while appending it); it is cut, the bytes kept in quarantine/"))
        if above:
            found.fixes.append(Fix("record", last + 1, f"generation {last + 1} is above HEAD {last} without a "
                                                         "record (a commit died before appending it, or the line "
                                                         "was lost): its record is restored if it is complete"))
        return
    found.beyond = above
    torn = " and ends with a torn line" if log.torn else ""
    said = f", HEAD says {head_number}" if evidence else ""
    found.problems.append(f"generation{'s' if len(above) > 1 else ''} {_span(above)} "
                          f"{'are' if len(above) > 1 else 'is'} above HEAD {last} without a record: "
                          f"{log_path} ends at generation {last}{torn}{said}; records were lost from the log")


_events_cache: dict[str, tuple[Optional[tuple], tuple]] = {}


def _from_events(root: Path) -> tuple[set[int], dict[int, str], set[tuple[int, str]]]:
    """What events.jsonl says: generations gone (gc, lost), manifest hashes of an upgrade, dropped files.
    Parsed again only when the file changed (it changes rarely; the log on every commit)."""
    path = root / events.NAME
    try:
        st = os.stat(path)
        sig: Optional[tuple] = (st.st_ino, st.st_size, st.st_mtime_ns)
    except FileNotFoundError:
        sig = None
    cached = _events_cache.get(str(path))
    if cached is not None and cached[0] == sig:
        gone, upgraded, dropped = cached[1]
        return set(gone), dict(upgraded), set(dropped)
    gone: set[int] = set()
    upgraded: dict[int, str] = {}
    dropped: set[tuple[int, str]] = set()
    for event in events.read(root):
        if event.get("event") == "gc":
            gone.update(int(g) for g in event.get("generations", []))
        elif event.get("event") == "lost":
            gone.add(int(event["generation"]))
        elif event.get("event") == "dropped":
            dropped.update((int(g), str(event["path"])) for g in event.get("generations", []))
        elif event.get("event") == "upgrade":
            for g, h in event.get("manifests", {}).items():
                upgraded.setdefault(int(g), h)  # a line appended later cannot replace the anchor
    _events_cache[str(path)] = (sig, (gone, upgraded, dropped))
    return set(gone), dict(upgraded), set(dropped)


def _span(generations: list[int]) -> str:
    if len(generations) == 1:
        return str(generations[0])
    if generations == list(range(generations[0], generations[-1] + 1)):
        return f"{generations[0]}..{generations[-1]}"
    return ", ".join(map(str, generations))
