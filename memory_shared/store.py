"""The versioned memory store: immutable generations, an atomic HEAD, snapshots, gc and checks.

Publication order of a commit (all under the flock on `lock`; the tree is built before, in staging):
  1. rename staging/<id> -> generations/<n>   (the tree is complete and fsynced before the rename)
  2. append the log line for n                  (one write; fsync)
  3. replace HEAD with n                        (temp file, fsync, rename, fsync dir)
Recovery (`_recover_locked`, run at open and at the start of every commit, under the same lock):
  - cut a torn last log line;
  - if the last log line is HEAD+1 and generations/HEAD+1 exists, the commit died between 2 and 3:
    finish it by publishing HEAD = HEAD+1;
  - any log line above HEAD is dropped, any generation dir above HEAD is garbage (died between 1 and 2)
    and is removed; abandoned staging dirs and HEAD temp files are removed at open.
So a crash at any point leaves HEAD on a generation whose tree was complete before it became visible,
and the log holds exactly generations 0..HEAD.
"""
from __future__ import annotations

import os
import weakref
from pathlib import Path
from typing import Any, NamedTuple, Optional

from . import commitlog, faults, layers
from .commitlog import Commit
from .errors import CommitConflict, L1TooLarge, PathRefused  # noqa: F401  (re-exported for importers of .store)
from .errors import GenerationMissing, MemoryStoreError, StoreMissing
from .fsutil import atomic_replace, flocked, fsync_dir, remove_tree
from .holds import Hold, abandoned_entries, create_dir, create_pin, live_pins
from .paths import resolve
from .transaction import Transaction


class Change(NamedTuple):
    path: str
    kind: str  # "added", "modified" or "deleted"


class Snapshot:
    """A pinned, read-only generation. gc keeps it until release() (or the end of a `with` block)."""

    def __init__(self, generation: int, path: Path, pin: Hold) -> None:
        self.generation = generation
        self.path = path
        self._pin = pin
        self._finalizer = weakref.finalize(self, pin.release)

    def read(self, rel: str) -> Optional[str]:
        """The text of a file of this generation, or None if it does not exist."""
        target = self.path / resolve(self.path, rel)
        return target.read_text(encoding="utf-8") if target.is_file() else None

    def files(self) -> list[str]:
        return sorted(_tree_inodes(self.path))

    def release(self) -> None:
        self._finalizer()

    def __enter__(self) -> "Snapshot":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"Snapshot(generation={self.generation}, path={str(self.path)!r})"


class _InitDescriptor:
    """`MemoryStore.init(root, ...)` creates a store; `store.init()` initializes this one (both idempotent)."""

    def __get__(self, obj: Optional["MemoryStore"], cls: type["MemoryStore"]) -> Any:
        if obj is None:
            return lambda root, **options: cls(root, create=True, **options)
        return obj._init


class MemoryStore:
    init = _InitDescriptor()

    def __init__(
        self, root: Path | str, *, l1_max_lines: int = 30, l1_max_chars: int = 2000, create: bool = False
    ) -> None:
        self.root = Path(root).expanduser().absolute()
        self.l1_max_lines = l1_max_lines
        self.l1_max_chars = l1_max_chars
        if self.exists(self.root):
            self._recover()  # may finish an interrupted init, or undo one that never published
        if self._read_head() < 0:
            if not create:
                raise StoreMissing(self.root)
            self._init()

    def __repr__(self) -> str:
        return f"MemoryStore({str(self.root)!r})"

    # ---- layout -------------------------------------------------------------------------------

    @staticmethod
    def exists(root: Path | str) -> bool:
        root = Path(root).expanduser()
        return (root / "HEAD").is_file() or (root / "log.jsonl").is_file()

    @property
    def _gens(self) -> Path:
        return self.root / "generations"

    @property
    def _staging(self) -> Path:
        return self.root / "staging"

    @property
    def _pins(self) -> Path:
        return self.root / "pins"

    @property
    def _log(self) -> Path:
        return self.root / "log.jsonl"

    @property
    def _lock(self) -> Path:
        return self.root / "lock"

    @property
    def _pins_lock(self) -> Path:
        return self.root / "pins.lock"

    def _gen_path(self, generation: int) -> Path:
        return self._gens / str(generation)

    def _generation_numbers(self) -> list[int]:
        if not self._gens.is_dir():
            return []
        return sorted(int(e.name) for e in os.scandir(self._gens) if e.name.isdigit())

    # ---- HEAD ---------------------------------------------------------------------------------

    def head(self) -> int:
        head = self._read_head()
        if head < 0:
            raise StoreMissing(self.root)
        return head

    def _read_head(self) -> int:
        """HEAD, or -1 before generation 0 is published."""
        try:
            text = (self.root / "HEAD").read_text()
        except FileNotFoundError:
            return -1
        if not text.strip().isdigit():
            raise MemoryStoreError(f"{self.root / 'HEAD'} is corrupt ({text[:20]!r}); run `ga memory verify`")
        return int(text)

    def _write_head(self, generation: int, with_faults: bool = False) -> None:
        before = (lambda: faults.point("head")) if with_faults else None
        atomic_replace(self.root / "HEAD", f"{generation}\n".encode(), before_rename=before)

    # ---- init and recovery --------------------------------------------------------------------

    def _init(self) -> "MemoryStore":
        for folder in (self.root, self._gens, self._staging, self._pins):
            folder.mkdir(parents=True, exist_ok=True)
        with flocked(self._lock), flocked(self._pins_lock):
            self._recover_locked(full=True)
        if self._read_head() >= 0:
            return self
        txn = Transaction(self, "init: shipped defaults", "ga", base=-1)
        for rel, text in layers.default_files().items():
            txn.write(rel, text)
        try:
            txn.commit()
        except MemoryStoreError:
            if self._read_head() < 0:  # lost a race with another init: fine once generation 0 exists
                raise
        return self

    def _recover(self) -> None:
        for folder in (self._gens, self._staging, self._pins):
            folder.mkdir(exist_ok=True)
        with flocked(self._lock), flocked(self._pins_lock):
            self._recover_locked(full=True)

    def _recover_locked(self, full: bool) -> None:
        """Bring the store to a clean state after a crashed committer. Caller holds `lock` (and
        `pins.lock` exclusively when `full`)."""
        commitlog.repair_tail(self._log)
        head = self._read_head()
        last = commitlog.last_entry(self._log)
        if last is not None and last.generation == head + 1 and self._gen_path(head + 1).is_dir():
            self._write_head(head + 1)
            head += 1
        if last is not None and last.generation > head:
            commitlog.truncate_after(self._log, head)
        garbage = [g for g in self._generation_numbers() if g > head] if full else (
            [head + 1] if self._gen_path(head + 1).exists() else [])
        for generation in garbage:  # renamed first, so a crash mid-removal leaves no partial generation
            target = self._staging / f"garbage-{generation}-{os.getpid()}"
            os.rename(self._gen_path(generation), target)
            remove_tree(target)
        if full:
            for entry in abandoned_entries(self._staging):
                remove_tree(entry)
            for tmp in self.root.glob(".HEAD.tmp-*"):
                tmp.unlink(missing_ok=True)

    # ---- snapshots and transactions -----------------------------------------------------------

    def snapshot(self, generation: Optional[int] = None) -> Snapshot:
        """Pin a generation (HEAD by default) and return its read-only tree."""
        target = self.head() if generation is None else generation
        pin = self._pin(target)
        return Snapshot(target, self._gen_path(target), pin)

    def _pin(self, generation: int) -> Hold:
        with flocked(self._pins_lock, shared=True):
            head = self._read_head()
            if generation > head or generation < 0:
                raise GenerationMissing(f"generation {generation} is not published (HEAD is {head})")
            pin = create_pin(self._pins, generation)
            if not self._gen_path(generation).is_dir():
                pin.release()
                raise GenerationMissing(
                    f"generation {generation} was removed by gc; open a new snapshot (HEAD is {head})")
            return pin

    def _new_staging(self) -> Hold:
        with flocked(self._pins_lock, shared=True):
            return create_dir(self._staging)

    def transaction(self, message: str, author: str, base: Optional[int] = None) -> Transaction:
        """A context manager: stage write/patch/delete, commit on normal exit, drop on an exception."""
        return Transaction(self, message, author, base)

    # ---- history ------------------------------------------------------------------------------

    def log(self) -> list[Commit]:
        commits, _ = commitlog.read_all(self._log)
        return commits

    def diff(self, a: int, b: int) -> list[Change]:
        """What changed from generation a to generation b, by path."""
        with self.snapshot(a) as left, self.snapshot(b) as right:
            before, after = _tree_inodes(left.path), _tree_inodes(right.path)
            changes = []
            for rel in sorted(before.keys() | after.keys()):
                if rel not in after:
                    changes.append(Change(rel, "deleted"))
                elif rel not in before:
                    changes.append(Change(rel, "added"))
                elif before[rel] != after[rel] and _differs(left.path / rel, right.path / rel):
                    changes.append(Change(rel, "modified"))
            return changes

    # ---- maintenance --------------------------------------------------------------------------

    def gc(self, keep: int) -> list[int]:
        """Remove generations except the newest `keep`, HEAD and pinned ones; return those removed."""
        if keep < 1:
            raise ValueError(f"gc keep must be at least 1, got {keep}")
        trash: Optional[Hold] = None
        with flocked(self._lock), flocked(self._pins_lock):
            head = self._read_head()
            published = [g for g in self._generation_numbers() if g <= head]
            kept = set(published[-keep:]) | {head} | live_pins(self._pins, remove_stale=True)
            doomed = [g for g in published if g not in kept]
            if doomed:
                trash = create_dir(self._staging, "gc-")
                for generation in doomed:
                    os.rename(self._gen_path(generation), trash.path / str(generation))
                fsync_dir(self._gens)
                faults.point("gc")
        if trash is not None:
            trash.release()
        return doomed

    def verify(self) -> list[str]:
        """Check the store; return one line per problem found (empty when healthy)."""
        problems: list[str] = []
        with flocked(self._lock):
            try:
                head = self._read_head()
            except MemoryStoreError as exc:
                return [str(exc)]
            if head < 0:
                problems.append(f"{self.root / 'HEAD'} is missing")
            generations = self._generation_numbers()
            if self._gens.is_dir():
                problems += [f"{self._gens / e.name} is not a generation" for e in os.scandir(self._gens)
                             if not e.name.isdigit()]
            if head >= 0 and head not in generations:
                problems.append(f"HEAD points to generation {head}, which does not exist")
            problems += [f"generation {g} is above HEAD {head}: leftover of a crashed commit (reopen the store)"
                         for g in generations if g > head]
            problems += self._verify_log(head)
            problems += self._verify_trees([g for g in generations if g <= head])
            with flocked(self._pins_lock):  # briefly: it holds back snapshots and new staging dirs
                problems += [f"leftover staging {p} (reopen the store to remove it)"
                             for p in abandoned_entries(self._staging)]
            problems += [f"leftover HEAD temp file {p}" for p in self.root.glob(".HEAD.tmp-*")]
        return problems

    def _verify_log(self, head: int) -> list[str]:
        problems: list[str] = []
        if self._log.exists() and self._log.stat().st_size and not _ends_with_newline(self._log):
            problems.append(f"{self._log} ends with a torn line")
        commits, bad = commitlog.read_all(self._log)
        problems += bad
        for index, commit in enumerate(commits):
            parent = index - 1 if index else None
            if commit.generation != index or commit.parent != parent:
                problems.append(f"{self._log}: line {index + 1} is generation {commit.generation} "
                                f"(parent {commit.parent}), expected {index} (parent {parent})")
                break
        last = commits[-1].generation if commits else -1
        if last != head:
            problems.append(f"log/HEAD mismatch: {self._log} ends at generation {last} but HEAD is {head}")
        return problems

    def _verify_trees(self, generations: list[int]) -> list[str]:
        problems: list[str] = []
        by_generation = {c.generation: c for c in self.log()}
        previous: Optional[tuple[int, dict[str, int]]] = None
        for generation in generations:
            tree = self._gen_path(generation)
            inodes = _tree_inodes(tree, problems)
            commit = by_generation.get(generation)
            if commit is None:
                problems.append(f"generation {generation} has no log line")
            else:
                for rel in commit.paths:
                    deleted, present = rel in commit.deleted, rel in inodes
                    if deleted and present:
                        problems.append(f"generation {generation} still has {rel}, which its log line says was deleted")
                    elif not deleted and not present:
                        problems.append(f"generation {generation} lacks {rel}, which its log line says was written")
                if previous is not None and previous[0] == generation - 1:
                    changed = {rel for rel in previous[1].keys() | inodes.keys()
                               if previous[1].get(rel) != inodes.get(rel)}
                    for rel in sorted(changed - set(commit.paths)):
                        problems.append(f"generation {generation} changes {rel} but its log line does not say so")
            previous = (generation, inodes)
        return problems


def _tree_inodes(tree: Path, problems: Optional[list[str]] = None) -> dict[str, int]:
    """Every non-directory entry of a tree by relative path, with its inode; checks modes and symlinks."""
    found: dict[str, int] = {}
    real_tree = os.path.realpath(tree)
    stack = [(str(tree), "")]
    while stack:
        folder, prefix = stack.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                rel = prefix + entry.name
                if entry.is_dir(follow_symlinks=False):
                    stack.append((entry.path, rel + "/"))
                    continue
                found[rel] = entry.inode()
                if problems is None:
                    continue
                if entry.is_symlink():
                    real = os.path.realpath(entry.path)
                    if not real.startswith(real_tree + os.sep):
                        problems.append(f"{entry.path} is a symlink leading outside its generation")
                elif entry.stat(follow_symlinks=False).st_mode & 0o222:
                    problems.append(f"{entry.path} is writable; files of a generation must be read-only")
    return found


def _differs(a: Path, b: Path) -> bool:
    return a.read_bytes() != b.read_bytes()


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"
