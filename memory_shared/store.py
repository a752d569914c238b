"""The versioned memory store: immutable generations, a derived HEAD, snapshots, gc and checks.

Publication order of a commit (all under the flock on `lock`; the tree, its MANIFEST and MANIFEST.record
are built before, in staging):
  1. rename staging/<id> -> generations/<n>   (the tree is complete and fsynced before the rename)
  2. append the record of n to log.jsonl       (one write; fsync): n is now published
  3. replace HEAD with n                        (temp file, fsync, rename, fsync dir)
Recovery (commitlog.py decides, fixes.py acts) runs at open and under the lock before every commit: HEAD is
recomputed from the log and the generations, a torn last line is cut (kept in quarantine/), a complete
generation directory above the log gets its record back (an incomplete one goes to quarantine/), and
anything else is left for `ga memory repair` (repair.py), with commits and pins refusing meanwhile. Nothing is deleted on the word of
events.jsonl; `verify` changes nothing; gc refuses on a store that does not verify.

The parts (transaction.py, fixes.py, verify.py, repair.py) receive the store's StoreCore (core.py), never
the MemoryStore: arrows point one way, store -> parts -> core.
"""
from __future__ import annotations

import os
import weakref
from pathlib import Path
from typing import Callable, NamedTuple, Optional

from . import commitlog, events, faults, fixes, layers, manifest, transaction
from .commitlog import Commit
from .core import Hold, StoreCore, abandoned_entries, create_dir, live_pins
from .errors import MemoryStoreError, StoreMissing, StoreNeedsRepair
from .fsutil import flocked, fsync_dir, remove_tree
from .paths import resolve
from .repair import repair
from .shared import SharedPins, SharedSnapshot
from .transaction import Transaction
from .verify import verify, verify_locked


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
        return sorted(manifest.tree_inodes(self.path))

    def release(self) -> None:
        self._finalizer()

    def __enter__(self) -> "Snapshot":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"Snapshot(generation={self.generation}, path={str(self.path)!r})"


class _InitDescriptor:
    """`MemoryStore.init(root, ...)` creates a store; `store.init()` initializes this one (both idempotent)."""

    def __get__(self, obj: Optional["MemoryStore"], cls: type["MemoryStore"]) -> Callable[..., "MemoryStore"]:
        if obj is None:
            return lambda root, **options: cls(root, create=True, **options)
        return obj._init


class MemoryStore:
    """One store: snapshots, transactions, history and maintenance. Its places, locks, pins and derived HEAD
    are its `core` (core.py), which its parts (transaction, recovery's fixes, verify, repair) receive."""

    init = _InitDescriptor()

    def __init__(
        self, root: Path | str, *, l1_max_lines: int = 30, l1_max_chars: int = 2000, create: bool = False,
        recover: bool = True,
    ) -> None:
        """`recover=False` opens the store as it is, changing nothing (for `verify` and `repair --dry-run`):
        what recovery would fix is then reported by verify, not done."""
        self.root = Path(root).expanduser().absolute()
        self.core = StoreCore(self.root, l1_max_lines, l1_max_chars)
        self.shared = SharedPins(self.core)  # the pins this handle's readers share (shared.py)
        if self.exists(self.root) and recover:
            fixes.recover(self.core)  # may finish an interrupted init, or undo one that never published
        if self.core.read_head() < 0 and not self.core.assess().problems:
            if not create or not recover:
                raise StoreMissing(self.root)
            self._init()

    def __repr__(self) -> str:
        return f"MemoryStore({str(self.root)!r})"

    @property
    def l1_max_lines(self) -> int:
        return self.core.l1_max_lines

    @property
    def l1_max_chars(self) -> int:
        return self.core.l1_max_chars

    @property
    def recovered(self) -> list[str]:
        """What recovery fixed through this handle, one line each."""
        return self.core.recovered

    @staticmethod
    def exists(root: Path | str) -> bool:
        root = Path(root).expanduser()
        return (root / "HEAD").is_file() or (root / "log.jsonl").is_file()

    def head(self) -> int:
        """The newest published generation (derived from the log and the generations, not read from HEAD)."""
        return self.core.head()

    def _init(self) -> "MemoryStore":
        core = self.core
        for folder in (core.root, core.gens, core.pool, core.staging, core.pins):
            folder.mkdir(parents=True, exist_ok=True)
        with flocked(core.lock), flocked(core.pins_lock):
            fixes.recover_locked(core, full=True)
        if core.read_head() >= 0:
            return self
        txn = Transaction(core, "init: shipped defaults", "ga", base=-1)
        for rel, text in layers.default_files().items():
            txn.write(rel, text)
        try:
            txn.commit()
        except MemoryStoreError:
            if core.read_head() < 0:  # lost a race with another init: fine once generation 0 exists
                raise
        return self

    # ---- snapshots and transactions -----------------------------------------------------------

    def snapshot(self, generation: Optional[int] = None) -> Snapshot:
        """Pin a generation (HEAD by default) and return its read-only tree."""
        if generation is None:
            generation, pin = self.core.pin_head()
        else:
            pin = self.core.pin(generation)
        return Snapshot(generation, self.core.gen_path(generation), pin)

    def shared_snapshot(self) -> SharedSnapshot:
        """HEAD, pinned once for every reader of this handle that starts while it is HEAD (shared.py): a task's
        snapshot. release() drops this reader's reference; the pin goes with the last one."""
        return self.shared.acquire()

    def stat_check(self, generation: int) -> list[str]:
        """The cheap check of a pin: paths whose inode, size or mtime differ from the record."""
        return self.core.stat_check(generation)

    def transaction(self, message: str, author: str, base: Optional[int] = None,
                    key: Optional[str] = None) -> Transaction:
        """A context manager: stage write/patch/delete, commit on normal exit, drop on an exception.
        With `key` (e.g. "run/task/attempt"), a commit whose key is already in the log is a no-op that
        returns the earlier generation."""
        return Transaction(self.core, message, author, base, key=key)

    # ---- history ------------------------------------------------------------------------------

    def log(self) -> list[Commit]:
        commits, _ = commitlog.read_all(self.core.log)
        return commits

    def diff(self, a: int, b: int) -> list[Change]:
        """What changed from generation a to generation b, by path."""
        left_pin, right_pin = self.core.pin(a, check=False), self.core.pin(b, check=False)
        try:
            left, right = self.core.gen_path(a), self.core.gen_path(b)
            old, new = manifest.load(left), manifest.load(right)
            if old is not None and new is not None:  # by recorded content: right even if a file was tampered with
                return [Change(rel, "deleted" if rel not in new else "added" if rel not in old else "modified")
                        for rel in sorted(old.keys() | new.keys()) if old.get(rel) != new.get(rel)]
            before, after = manifest.tree_inodes(left), manifest.tree_inodes(right)
            changes = []
            for rel in sorted(before.keys() | after.keys()):
                if rel not in after:
                    changes.append(Change(rel, "deleted"))
                elif rel not in before:
                    changes.append(Change(rel, "added"))
                elif before[rel] != after[rel] and _differs(left / rel, right / rel):
                    changes.append(Change(rel, "modified"))
            return changes
        finally:
            left_pin.release()
            right_pin.release()

    # ---- maintenance --------------------------------------------------------------------------

    def gc(self, keep: int) -> list[int]:
        """Remove generations except the newest `keep`, HEAD and pinned ones; return those removed."""
        if keep < 1:
            raise ValueError(f"gc keep must be at least 1, got {keep}")
        core = self.core
        with flocked(core.lock), flocked(core.pins_lock):
            fixes.recover_locked(core, full=False)  # raises when the store needs repair
            for entry in abandoned_entries(core.staging):
                remove_tree(entry)
            problems = verify_locked(core)  # nothing is deleted on a store whose references are in doubt
            if problems:
                more = f" (+{len(problems) - 1} more: `ga memory verify`)" if len(problems) > 1 else ""
                raise StoreNeedsRepair(self.root, f"gc refused: {problems[0]}{more}")
            head = core.read_head()  # (head() may take `lock`, which this process holds here)
            published = [g for g in core.generation_numbers() if g <= head]
            kept = set(published[-keep:]) | {head} | live_pins(core.pins, remove_stale=True)
            doomed = [g for g in published if g not in kept]
            trash = create_dir(core.staging, "gc-")
            if doomed:
                events.append(self.root, "gc", generations=doomed)
                for generation in doomed:  # its kept manifest first: a generation missing with it kept was not gc's
                    kept_manifest = core.manifests / str(generation)
                    if os.path.lexists(kept_manifest):
                        os.rename(kept_manifest, trash.path / f"{generation}.{manifest.NAME}")
                    os.rename(core.gen_path(generation), trash.path / str(generation))
                fsync_dir(core.gens)
            self._sweep_pool(trash.path)
            if doomed:
                faults.point("gc")
        trash.release()
        return doomed

    def _sweep_pool(self, trash: Path) -> None:
        """Move into `trash` the pooled dirs that no generation (nor anything in quarantine/) links and no
        live commit is building: those of generations just collected, or of commits that died. Caller holds
        both locks (so no staging dir appears meanwhile)."""
        core = self.core
        if not core.pool.is_dir():
            return
        quarantined = self.root / "quarantine"
        roots = [core.gens / name for name in os.listdir(core.gens)]
        if quarantined.is_dir():
            roots += [Path(e.path) for q in os.scandir(quarantined) if q.is_dir() for e in os.scandir(q.path)
                      if e.is_dir(follow_symlinks=False)]
        linked = transaction.reachable(roots, core.pool)
        building = set(os.listdir(core.staging))
        unlinked: dict[str, list[os.DirEntry]] = {}
        for entry in os.scandir(core.pool):
            folder = ".".join(entry.name.split(".")[:2])  # <staging id>.<k>, then .m / .s for its tables
            if folder not in linked and folder.rsplit(".", 1)[0] not in building:
                unlinked.setdefault(folder, []).append(entry)
        unmet = manifest.unmet_folders(roots, [core.pool / f for f in linked]) if unlinked else set()
        for folder, entries in unlinked.items():
            if manifest.folder_digest(core.pool / folder) in unmet:
                continue  # a manifest still names it (a link to it was swapped): repair relinks it
            for entry in entries:
                os.rename(entry.path, trash / f"pool-{entry.name}")

    def verify(self, quick: bool = False) -> list[str]:
        """Check the store, every generation's contents against its manifest included (HEAD only when
        `quick`); return one line per problem found (empty when healthy)."""
        return verify(self.core, quick)

    def repair(self, dry_run: bool = False) -> tuple[list[str], list[str]]:
        """Settle what recovery would not decide alone: (what was done or would be, what is left unsolved).
        Whatever it removes goes to quarantine/."""
        return repair(self.core, dry_run)


def _differs(a: Path, b: Path) -> bool:
    return a.read_bytes() != b.read_bytes()
