"""StoreCore: what the parts of one memory store share — its places, locks, pins and derived HEAD.

MemoryStore (store.py) composes one; a transaction, recovery's fixes, verify and repair receive it instead of
the MemoryStore, so every arrow points one way (store → transaction/fixes/verify/repair → core) and no part
reads another's private members. It decides nothing about commits or repair: it names the files, holds the
locks and pins, and caches the assessment of the log (commitlog.py) between changes.

Pins (files that keep a generation from gc) and the staging dirs of live commits are flock-held entries
(`Hold`): an entry is live while its creator holds an flock on it; the kernel drops the flock when the
creator dies, so a crashed process leaves only abandoned entries that the next scan removes. Entries are
created under a shared flock on `pins.lock` and scanned under an exclusive one, so a scan never sees an
entry between its creation and its flock.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Optional

from . import commitlog, faults, manifest
from .errors import GenerationDamaged, GenerationMissing, StoreMissing, StoreNeedsRepair
from .fsutil import atomic_replace, flocked, is_abandoned, lock_fd, remove_tree, unique
from .paths import POOL

# A pin check that passed (or a generation this handle just published) is trusted this long by the same
# handle, so back-to-back commits do not stat every file of their base each time; a task that pins, works
# for minutes and then commits is checked again at the commit.
CHECK_TRUST_S = 1.0


class StoreCore:
    def __init__(self, root: Path, l1_max_lines: int, l1_max_chars: int) -> None:
        self.root = root
        self.l1_max_lines = l1_max_lines
        self.l1_max_chars = l1_max_chars
        self.gens = root / "generations"
        self.pool = root / POOL
        self.staging = root / "staging"
        self.pins = root / "pins"
        self.manifests = root / "manifests"  # a second link to each MANIFEST, for repair
        self.log = root / "log.jsonl"
        self.lock = root / "lock"            # serializes publication
        self.pins_lock = root / "pins.lock"  # shared to create a pin or staging dir, exclusive to scan them
        self.recovered: list[str] = []  # what recovery fixed through this handle, one line each
        self._checked: dict[int, float] = {}  # generation -> when this handle last found its files intact
        self._folders_checked: dict[str, float] = {}  # pooled folder -> when this handle found it intact
        self._assessed: Optional[tuple[tuple, commitlog.Assessment]] = None

    def gen_path(self, generation: int) -> Path:
        return self.gens / str(generation)

    def generation_numbers(self) -> list[int]:
        if not self.gens.is_dir():
            return []
        return sorted(int(e.name) for e in os.scandir(self.gens) if e.name.isdigit())

    # ---- HEAD ---------------------------------------------------------------------------------

    def head(self) -> int:
        """The newest published generation (derived from the log and the generations, not read from HEAD)."""
        found = self.assess()
        if found.problems:  # read without the lock, a commit may have moved on mid-read: look again under it
            with flocked(self.lock):
                self._assessed = None
                found = self.assess()
        if found.problems:
            raise StoreNeedsRepair(self.root, found.problems[0])
        if found.head < 0:
            raise StoreMissing(self.root)
        return found.head

    def read_head(self) -> int:
        """The derived HEAD, or -1 before generation 0 is published (never raises, never locks)."""
        return self.assess().head

    def assess(self, full: bool = False) -> commitlog.Assessment:
        """The store's state, cached while nothing changed; between changes only new log lines are read,
        unless `full` (verify and repair read the whole log again)."""
        key = commitlog.fingerprint(self.root)
        if full or self._assessed is None or self._assessed[0] != key:
            previous = None if full or self._assessed is None else self._assessed[1].log
            self._assessed = (key, commitlog.assess(self.root, previous))
        return self._assessed[1]

    def write_head(self, generation: int, with_faults: bool = False) -> None:
        before = (lambda: faults.point("head")) if with_faults else None
        atomic_replace(self.root / "HEAD", f"{generation}\n".encode(), before_rename=before)

    # ---- what recovery and repair set aside ---------------------------------------------------

    def quarantine(self) -> Path:
        """A new folder under quarantine/ for what recovery or repair moves aside (never deleted)."""
        folder = self.root / "quarantine" / f"{time.strftime('%Y%m%dT%H%M%S')}-{unique()}"
        folder.mkdir(parents=True)
        return folder

    def cut_torn_tail(self) -> None:
        """Cut a torn last log line, keeping its bytes in quarantine/."""
        try:
            data = self.log.read_bytes()
        except FileNotFoundError:
            return
        torn = data[data.rfind(b"\n") + 1:]
        if not torn:
            return
        (self.quarantine() / "log.jsonl-torn-tail").write_bytes(torn)
        with open(self.log, "rb+") as fh:
            fh.truncate(len(data) - len(torn))
            os.fsync(fh.fileno())

    def link_manifest(self, generation: int) -> None:
        """Keep a second link to a generation's MANIFEST in manifests/, so repair can rebuild the generation."""
        source, target = self.gen_path(generation) / manifest.NAME, self.manifests / str(generation)
        try:
            os.link(source, target)
        except FileNotFoundError:
            self.manifests.mkdir(exist_ok=True)
            os.link(source, target)
        except FileExistsError:  # left by a commit that died before its record, or a MANIFEST rebuilt
            os.unlink(target)
            os.link(source, target)

    # ---- pins, staging and the pin check ------------------------------------------------------

    def pin_head(self, check: bool = True) -> tuple[int, Hold]:
        """Pin HEAD: (its generation, the pin). HEAD read a moment before the pin may have moved on and been
        collected by a gc in another process meanwhile; then the newer HEAD is pinned instead."""
        while True:
            head = self.head()
            try:
                return head, self.pin(head, check, head=head)
            except GenerationMissing:
                if self.head() == head:  # not a HEAD that moved on: really gone
                    raise

    def pin(self, generation: int, check: bool = True, head: Optional[int] = None) -> Hold:
        """Pin a published generation; with `check`, refuse it if its files changed since publication.
        Never called with `lock` held (head() may take it), and takes it before `pins.lock`, as gc does."""
        head = self.head() if head is None else head
        with flocked(self.pins_lock, shared=True):
            if generation > head or generation < 0:
                raise GenerationMissing(f"generation {generation} is not published (HEAD is {head})")
            pin = create_pin(self.pins, generation)
            if not self.gen_path(generation).is_dir():
                pin.release()
                raise GenerationMissing(
                    f"generation {generation} was removed by gc; open a new snapshot (HEAD is {head})")
        if check:
            try:
                self.check_intact(generation)  # after the lock: the pin keeps gc away
            except GenerationDamaged:
                pin.release()
                raise
        return pin

    def check_intact(self, generation: int) -> None:
        """The pin check of a pinned generation, unless this handle found it intact less than CHECK_TRUST_S
        ago: GenerationDamaged when its files changed since publication."""
        if time.monotonic() - self._checked.get(generation, -CHECK_TRUST_S) < CHECK_TRUST_S:
            return
        damage = self.stat_check(generation, trust=True)
        if damage:
            more = f" (+{len(damage) - 1} more)" if len(damage) > 1 else ""
            raise GenerationDamaged(
                f"generation {generation} of {self.root} is damaged: {damage[0]}{more} changed since it "
                "was published; run `ga memory verify`, then `ga memory repair`")
        self.trust(generation)

    def trust(self, generation: int) -> None:
        """This handle found `generation` intact (or just published it): pins skip the check for a while."""
        self._checked[generation] = time.monotonic()

    def forget_checks(self) -> None:
        """Check every generation again at its next pin (as a new process would)."""
        self._checked.clear()

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
        tree = self.gen_path(generation)
        recorded = manifest.load_table(tree, manifest.STAT)
        if recorded is None:
            return [f"{manifest.STAT} (missing)"]
        if recorded.get(manifest.NAME) is None:
            return [f"{manifest.STAT} (incomplete)"]
        try:
            return manifest.stat_changes(tree, recorded, trusted, checked)
        except (ValueError, IndexError):
            return [f"{manifest.STAT} (unreadable)"]

    def new_staging(self) -> Hold:
        with flocked(self.pins_lock, shared=True):
            return create_dir(self.staging)


# ---- flock-held entries: pins and staging dirs ------------------------------------------------

class Hold:
    """An flock'd file or directory; release() removes it and drops the flock."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: Optional[int] = fd
        self._owner = os.getpid()  # a forked child must not remove its parent's entry

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            if os.getpid() != self._owner:
                pass
            elif self.path.is_dir() and not self.path.is_symlink():
                remove_tree(self.path)
            else:
                self.path.unlink(missing_ok=True)
        finally:
            os.close(self._fd)
            self._fd = None


def create_pin(pins_dir: Path, generation: int) -> Hold:
    path = pins_dir / f"{generation}-{unique()}"
    return Hold(path, lock_fd(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL))


def create_dir(parent: Path, suffix: str = "") -> Hold:
    path = parent / unique(suffix)
    os.mkdir(path)
    return Hold(path, lock_fd(path, os.O_RDONLY | os.O_DIRECTORY))


def live_pins(pins_dir: Path, remove_stale: bool) -> set[int]:
    """Generations pinned by a live holder; stale pin files are deleted when `remove_stale`."""
    pinned: set[int] = set()
    if not pins_dir.is_dir():
        return pinned
    for entry in os.scandir(pins_dir):
        generation = entry.name.split("-", 1)[0]
        if is_abandoned(entry.path):
            if remove_stale:
                Path(entry.path).unlink(missing_ok=True)
        elif generation.isdigit():
            pinned.add(int(generation))
    return pinned


def abandoned_entries(parent: Path) -> list[Path]:
    if not parent.is_dir():
        return []
    return [Path(e.path) for e in os.scandir(parent) if is_abandoned(e.path)]
