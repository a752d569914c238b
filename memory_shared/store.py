"""The versioned memory store: immutable generations, a derived HEAD, snapshots, gc and checks.

Publication order of a commit (all under the flock on `lock`; the tree, its MANIFEST and MANIFEST.record
are built before, in staging):
  1. rename staging/<id> -> generations/<n>   (the tree is complete and fsynced before the rename)
  2. append the record of n to log.jsonl       (one write; fsync): n is now published
  3. replace HEAD with n                        (temp file, fsync, rename, fsync dir)
Recovery (recovery.py) runs at open and under the lock before every commit: HEAD is recomputed from the
log and the generations, a torn last line is cut (kept in quarantine/), a complete generation directory
above the log gets its record back (an incomplete one goes to quarantine/), and anything else is left for
`ga memory repair` (repair.py), with commits and pins refusing meanwhile. Nothing is deleted on the word of
events.jsonl; `verify` changes nothing; gc refuses on a store that does not verify.
"""
from __future__ import annotations

import os
import time
import weakref
from pathlib import Path
from typing import Any, NamedTuple, Optional

from . import commitlog, cow, events, faults, foldertables, layers, lostrecords, manifest, recovery
from .commitlog import Commit
from .errors import (
    GenerationDamaged,
    GenerationMissing,
    MemoryStoreError,
    StoreMissing,
    StoreNeedsRepair,
)
from .fsutil import atomic_replace, flocked, fsync_dir, remove_tree, unique
from .holds import Hold, abandoned_entries, create_dir, create_pin, live_pins
from .paths import POOL, resolve
from .transaction import Transaction

# A pin check that passed (or a generation this handle just published) is trusted this long by the same
# handle, so back-to-back commits do not stat every file of their base each time; a task that pins, works
# for minutes and then commits is checked again at the commit.
CHECK_TRUST_S = 1.0


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
        self, root: Path | str, *, l1_max_lines: int = 30, l1_max_chars: int = 2000, create: bool = False,
        recover: bool = True,
    ) -> None:
        """`recover=False` opens the store as it is, changing nothing (for `verify` and `repair --dry-run`):
        what recovery would fix is then reported by verify, not done."""
        self.root = Path(root).expanduser().absolute()
        self.l1_max_lines = l1_max_lines
        self.l1_max_chars = l1_max_chars
        self.recovered: list[str] = []  # what recovery fixed through this handle, one line each
        self._checked: dict[int, float] = {}  # generation -> when this handle last found its files intact
        self._folders_checked: dict[str, float] = {}  # pooled folder -> when this handle found it intact
        self._assessed: Optional[tuple[tuple, recovery.Assessment]] = None
        if self.exists(self.root) and recover:
            self._recover()  # may finish an interrupted init, or undo one that never published
        if self._read_head() < 0 and not self._assess().problems:
            if not create or not recover:
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
    def _pool(self) -> Path:
        return self.root / POOL

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
        """The newest published generation (derived from the log and the generations, not read from HEAD)."""
        found = self._assess()
        if found.problems:  # read without the lock, a commit may have moved on mid-read: look again under it
            with flocked(self._lock):
                self._assessed = None
                found = self._assess()
        if found.problems:
            raise StoreNeedsRepair(self.root, found.problems[0])
        if found.head < 0:
            raise StoreMissing(self.root)
        return found.head

    def _read_head(self) -> int:
        """The derived HEAD, or -1 before generation 0 is published."""
        return self._assess().head

    def _assess(self, full: bool = False) -> recovery.Assessment:
        """The store's state, cached while nothing changed; between changes only new log lines are read,
        unless `full` (verify reads the whole log again)."""
        key = recovery.fingerprint(self.root)
        if full or self._assessed is None or self._assessed[0] != key:
            previous = None if full or self._assessed is None else self._assessed[1].log
            self._assessed = (key, recovery.assess(self.root, previous))
        return self._assessed[1]

    def _write_head(self, generation: int, with_faults: bool = False) -> None:
        before = (lambda: faults.point("head")) if with_faults else None
        atomic_replace(self.root / "HEAD", f"{generation}\n".encode(), before_rename=before)

    # ---- init and recovery --------------------------------------------------------------------

    def _init(self) -> "MemoryStore":
        for folder in (self.root, self._gens, self._pool, self._staging, self._pins):
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
        for folder in (self._gens, self._pool, self._staging, self._pins):
            folder.mkdir(exist_ok=True)
        with flocked(self._lock), flocked(self._pins_lock):
            self._recover_locked(full=True)

    def _recover_locked(self, full: bool) -> None:
        """Apply the fixes recovery is sure of. Caller holds `lock` (and `pins.lock` exclusively when `full`).
        When the store needs repair, a commit (`full` False) refuses; opening it does not, so that verify
        and repair can run."""
        found = self._assess()
        if found.problems:
            if not full:
                raise StoreNeedsRepair(self.root, found.problems[0])
        else:
            self.apply_fixes(found.fixes)
        if full:
            for entry in abandoned_entries(self._staging):
                remove_tree(entry)
            for tmp in self.root.glob(".HEAD.tmp-*"):
                tmp.unlink(missing_ok=True)
            if not found.problems:
                self._upgrade(self._assess())

    def apply_fixes(self, fixes: list[recovery.Fix]) -> None:
        """Carry out recovery fixes (caller holds `lock`), logging each in events.jsonl."""
        restored = False
        for fix in fixes:
            message = fix.message
            if fix.kind == "cut_tail":
                self.cut_torn_tail()
            elif fix.kind == "record":
                message, restored = self._restore_record(fix.generation), True
            elif fix.kind == "head":
                self._write_head(fix.generation)
            events.append(self.root, "recovered", fix=fix.kind, generation=fix.generation, message=message)
            self.recovered.append(message)
        if restored:
            self.apply_fixes([fix for fix in self._assess().fixes if fix.kind == "head"])

    def _restore_record(self, generation: int) -> str:
        """A generation above the log without a record: complete, its record is appended; else quarantined."""
        if lostrecords.complete(self, generation):
            original = lostrecords.append_record(self, generation)
            how = "from its MANIFEST.record" if original else "rebuilt from its MANIFEST"
            return (f"generation {generation} was complete but had no record in {self._log} (a commit died before "
                    f"appending it, or the line was lost): its record was restored {how}")
        folder = self.quarantine()
        os.rename(self._gen_path(generation), folder / str(generation))
        kept = self.root / "manifests" / str(generation)
        if os.path.lexists(kept):
            os.rename(kept, folder / f"{generation}.{manifest.NAME}")
        return (f"generation {generation} had no record in {self._log} and is incomplete (no MANIFEST, or files "
                f"not matching it): moved to {folder}")

    def cut_torn_tail(self) -> None:
        """Cut a torn last log line, keeping its bytes in quarantine/."""
        try:
            data = self._log.read_bytes()
        except FileNotFoundError:
            return
        torn = data[data.rfind(b"\n") + 1:]
        if not torn:
            return
        (self.quarantine() / "log.jsonl-torn-tail").write_bytes(torn)
        with open(self._log, "rb+") as fh:
            fh.truncate(len(data) - len(torn))
            os.fsync(fh.fileno())

    def quarantine(self) -> Path:
        """A new folder under quarantine/ for what recovery or repair moves aside (never deleted)."""
        folder = self.root / "quarantine" / f"{time.strftime('%Y%m%dT%H%M%S')}-{unique()}"
        folder.mkdir(parents=True)
        return folder

    def _upgrade(self, found: recovery.Assessment) -> None:
        """A store written before manifests: compute each published generation's MANIFEST once, from the
        files as they are now, and record the hashes in events.jsonl (the anchor of those manifests)."""
        hashes: dict[str, str] = {}
        cache: dict[tuple[int, int], list] = {}
        for commit in found.log.commits:
            tree = self._gen_path(commit.generation)
            if commit.manifest is None and commit.generation not in found.upgraded and tree.is_dir() \
                    and not (tree / manifest.NAME).exists():
                built = foldertables.tables_of(tree, cache)
                built.write()
                hashes[str(commit.generation)] = built.digest
                self.link_manifest(commit.generation)
        if hashes:
            events.append(self.root, "upgrade", manifests=hashes,
                          message=f"manifests computed for {len(hashes)} generation(s) written before manifests")
            self.recovered.append(f"upgraded: manifests computed for {len(hashes)} generation(s)")

    def link_manifest(self, generation: int) -> None:
        """Keep a second link to a generation's MANIFEST in manifests/, so repair can rebuild the generation."""
        source, target = self._gen_path(generation) / manifest.NAME, self.root / "manifests" / str(generation)
        try:
            os.link(source, target)
        except FileNotFoundError:
            (self.root / "manifests").mkdir(exist_ok=True)
            os.link(source, target)
        except FileExistsError:  # left by a commit that died before its record, or a MANIFEST rebuilt
            os.unlink(target)
            os.link(source, target)

    # ---- snapshots and transactions -----------------------------------------------------------

    def snapshot(self, generation: Optional[int] = None) -> Snapshot:
        """Pin a generation (HEAD by default) and return its read-only tree."""
        head = self.head()
        target = head if generation is None else generation
        pin = self._pin(target, head=head)
        return Snapshot(target, self._gen_path(target), pin)

    def _pin(self, generation: int, check: bool = True, head: Optional[int] = None) -> Hold:
        """Pin a published generation; with `check`, refuse it if its files changed since publication.
        Never called with `lock` held (head() may take it), and takes it before `pins.lock`, as gc does."""
        head = self.head() if head is None else head
        with flocked(self._pins_lock, shared=True):
            if generation > head or generation < 0:
                raise GenerationMissing(f"generation {generation} is not published (HEAD is {head})")
            pin = create_pin(self._pins, generation)
            if not self._gen_path(generation).is_dir():
                pin.release()
                raise GenerationMissing(
                    f"generation {generation} was removed by gc; open a new snapshot (HEAD is {head})")
        if check and time.monotonic() - self._checked.get(generation, -CHECK_TRUST_S) >= CHECK_TRUST_S:
            damage = self.stat_check(generation, trust=True)  # after the lock: the pin keeps gc away
            if not damage:
                self._checked[generation] = time.monotonic()
            else:
                pin.release()
                more = f" (+{len(damage) - 1} more)" if len(damage) > 1 else ""
                raise GenerationDamaged(
                    f"generation {generation} of {self.root} is damaged: {damage[0]}{more} changed since it "
                    "was published; run `ga memory verify`, then `ga memory repair`")
        return pin

    def stat_check(self, generation: int, trust: bool = False) -> list[str]:
        """The cheap check of a pin: paths whose inode, size or mtime differ from the record. With `trust`,
        a shared folder this handle found intact less than CHECK_TRUST_S ago is not stat'ed again (so
        pinning each new HEAD costs the folders it changed, not the whole tree)."""
        now = time.monotonic()
        trusted = {f: t for f, t in self._folders_checked.items() if now - t < CHECK_TRUST_S} if trust else {}
        parents: dict[str, Optional[str]] = {}
        damage = self._stat_changes(generation, set(trusted), parents)
        if not damage:  # a folder counts as checked when the oldest check of anything under it was made
            found = {folder: now for folder in parents if folder not in trusted}
            for folder in trusted.keys() & parents.keys():
                up = parents[folder]
                while up is not None and up in found:
                    found[up] = min(found[up], trusted[folder])
                    up = parents[up]
            self._folders_checked = {**trusted, **found}
        return damage

    def _stat_changes(self, generation: int, trusted: set[str], checked: dict[str, Optional[str]]) -> list[str]:
        tree = self._gen_path(generation)
        recorded = manifest.load_table(tree, manifest.STAT)
        if recorded is None:
            return [f"{manifest.STAT} (missing)"]
        if recorded.get(manifest.NAME) is None:
            return [f"{manifest.STAT} (incomplete)"]
        try:
            return manifest.stat_changes(tree, recorded, trusted, checked)
        except (ValueError, IndexError):
            return [f"{manifest.STAT} (unreadable)"]

    def _new_staging(self) -> Hold:
        with flocked(self._pins_lock, shared=True):
            return create_dir(self._staging)

    def transaction(self, message: str, author: str, base: Optional[int] = None,
                    key: Optional[str] = None) -> Transaction:
        """A context manager: stage write/patch/delete, commit on normal exit, drop on an exception.
        With `key` (e.g. "run/task/attempt"), a commit whose key is already in the log is a no-op that
        returns the earlier generation."""
        return Transaction(self, message, author, base, key=key)

    # ---- history ------------------------------------------------------------------------------

    def log(self) -> list[Commit]:
        commits, _ = commitlog.read_all(self._log)
        return commits

    def diff(self, a: int, b: int) -> list[Change]:
        """What changed from generation a to generation b, by path."""
        left_pin, right_pin = self._pin(a, check=False), self._pin(b, check=False)
        try:
            left, right = self._gen_path(a), self._gen_path(b)
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
        from .verify import verify_locked

        with flocked(self._lock), flocked(self._pins_lock):
            self._recover_locked(full=False)  # raises when the store needs repair
            for entry in abandoned_entries(self._staging):
                remove_tree(entry)
            problems = verify_locked(self)  # nothing is deleted on a store whose references are in doubt
            if problems:
                more = f" (+{len(problems) - 1} more: `ga memory verify`)" if len(problems) > 1 else ""
                raise StoreNeedsRepair(self.root, f"gc refused: {problems[0]}{more}")
            head = self._read_head()  # (head() may take `lock`, which this process holds here)
            published = [g for g in self._generation_numbers() if g <= head]
            kept = set(published[-keep:]) | {head} | live_pins(self._pins, remove_stale=True)
            doomed = [g for g in published if g not in kept]
            trash = create_dir(self._staging, "gc-")
            if doomed:
                events.append(self.root, "gc", generations=doomed)
                for generation in doomed:  # its kept manifest first: a generation missing with it kept was not gc's
                    kept_manifest = self.root / "manifests" / str(generation)
                    if os.path.lexists(kept_manifest):
                        os.rename(kept_manifest, trash.path / f"{generation}.{manifest.NAME}")
                    os.rename(self._gen_path(generation), trash.path / str(generation))
                fsync_dir(self._gens)
            self._sweep_pool(trash.path)
            if doomed:
                faults.point("gc")
        trash.release()
        return doomed

    def _sweep_pool(self, trash: Path) -> None:
        """Move into `trash` the pooled dirs that no generation (nor anything in quarantine/) links and no
        live commit is building: those of generations just collected, or of commits that died. Caller holds
        both locks (so no staging dir appears meanwhile)."""
        if not self._pool.is_dir():
            return
        quarantined = self.root / "quarantine"
        roots = [self._gens / name for name in os.listdir(self._gens)]
        if quarantined.is_dir():
            roots += [Path(e.path) for q in os.scandir(quarantined) if q.is_dir() for e in os.scandir(q.path)
                      if e.is_dir(follow_symlinks=False)]
        linked = cow.reachable(roots, self._pool)
        building = set(os.listdir(self._staging))
        unlinked: dict[str, list[os.DirEntry]] = {}
        for entry in os.scandir(self._pool):
            folder = ".".join(entry.name.split(".")[:2])  # <staging id>.<k>, then .m / .s for its tables
            if folder not in linked and folder.rsplit(".", 1)[0] not in building:
                unlinked.setdefault(folder, []).append(entry)
        unmet = foldertables.unmet_folders(roots, [self._pool / f for f in linked]) if unlinked else set()
        for folder, entries in unlinked.items():
            if foldertables.folder_digest(self._pool / folder) in unmet:
                continue  # a manifest still names it (a link to it was swapped): repair relinks it
            for entry in entries:
                os.rename(entry.path, trash / f"pool-{entry.name}")

    def verify(self, quick: bool = False) -> list[str]:
        """Check the store, every generation's contents against its manifest included (HEAD only when
        `quick`); return one line per problem found (empty when healthy)."""
        from .verify import verify

        return verify(self, quick)

    def repair(self, dry_run: bool = False) -> tuple[list[str], list[str]]:
        """Settle what recovery would not decide alone: (what was done or would be, what is left unsolved).
        Whatever it removes goes to quarantine/."""
        from .repair import repair

        return repair(self, dry_run)


def _differs(a: Path, b: Path) -> bool:
    return a.read_bytes() != b.read_bytes()


