"""A transaction: staged write/patch/delete on a base generation, published as one new generation.

The new tree is built in staging outside the commit lock, copy-on-write by folder (`Builder`, below:
new pooled folders only along the changed paths, every other folder shared). Under the lock, if HEAD moved past the
base, staging is brought up to HEAD path by path using the log lines of the generations in between
(O(changed paths), not O(files)); a path this transaction changed and someone else changed too is replayed
only if every change to it was a patch whose anchor is still unique in HEAD's text, otherwise
CommitConflict. Then the store publishes (see store.py).

Durability: new files are fsynced before publication (all written first, then each fsynced); the folders this commit made (about its depth of
them) and the hard links into them are not fsynced one by one: journaling file systems (ext4, xfs) commit
metadata in order, so once the fsynced log line and rename of HEAD are on disk, the entries made before
them are too. MANIFEST and
MANIFEST.stat are not fsynced at all: both can be rebuilt from the (fsynced) files, MANIFEST proven by the
hash in the record (see manifest.py). A SIGKILL needs none of this (the page cache survives).

Copy-on-write by folder (`Builder`): a new generation's tree built from its base, sharing every untouched folder.

generations/<n>/   a real directory: the generation's top-level files, MANIFEST, MANIFEST.stat, and one
                   symlink `../../dirs/<id>` per top-level folder
dirs/<id>/         a pooled directory, immutable once published: files (hard links shared with other
                   generations' folders) and symlinks `../../dirs/<id>` for its subfolders

A commit copies only the folders along its changed paths (a new pooled directory holding hard links to the
old one's entries, with the changed entry replaced), so it costs depth x folder size, not the whole tree.
A new pooled directory is named `<staging id>.<k>`: while its staging dir is live it belongs to that commit;
once the commit is published a generation links it; otherwise gc removes it (store.py `_sweep_pool`).
A base written before pooled folders (real directories) has them converted once, by its first commit.
"""
from __future__ import annotations

import os
import time
import weakref
from pathlib import Path
from types import TracebackType
from typing import Callable, Iterator, Optional

from . import commitlog, faults, fixes, layers, manifest
from .commitlog import Commit
from .core import StoreCore
from .errors import CommitConflict, MemoryStoreError, PathRefused
from .fsutil import READ_ONLY, flocked, fsync_dir, remove_tree, write_new
from .manifest import FOLDER_NAME, FOLDER_STAT, RESERVED, Staged
from .paths import POOL_LINK, check_rel, is_pool_link, pool_id, resolve

REWRITE_CONFLICT = "a write or delete is not replayed over someone else's change"
BULK_FILES = 64  # above this many changed files, one os.sync() replaces the per-file fsyncs


def occurrences(text: str, old: str, limit: int = 2) -> int:
    """How many times `old` occurs in `text` (overlaps included), counting up to `limit`."""
    count, start = 0, text.find(old)
    while start >= 0 and count < limit:
        count += 1
        start = text.find(old, start + 1)
    return count


class Transaction:
    def __init__(self, core: StoreCore, message: str, author: str, base: Optional[int],
                 key: Optional[str] = None) -> None:
        if not isinstance(message, str) or not message.strip():
            raise ValueError("a memory commit needs a message saying what changed and its evidence")
        if not isinstance(author, str) or not author.strip():
            raise ValueError("a memory commit needs an author (e.g. the task id)")
        if key is not None and (not isinstance(key, str) or not key.strip()):
            raise ValueError("a memory commit key must be a non-empty string like run/task/attempt")
        self.message = message
        self.author = author
        self.key = key
        self.generation: Optional[int] = None
        # True when a commit with this key is in the log (seen at open, or at commit under the lock): this
        # transaction commits nothing and `generation` is that earlier commit's
        self.already_committed = False
        self._core = core
        if base is None:
            base, pin = core.pin_head()
        else:
            pin = core.pin(base) if base >= 0 else None
        self.base = base
        self._pin = pin
        self._release_pin = weakref.finalize(self, self._pin.release) if self._pin else (lambda: None)
        self._base_tree: Optional[Path] = core.gen_path(self.base) if self.base >= 0 else None
        self._final: dict[str, Optional[str]] = {}   # path -> new text, None for deleted
        self._patches: dict[str, list[tuple[str, str]]] = {}
        self._rewritten: set[str] = set()            # paths with a write or delete: never replayed
        self._folders: set[str] = set()              # folders of the paths this transaction wrote
        self._plain: set[str] = set()                # base folders known not to be symlinks
        self._done = False
        if key is not None:
            self._earlier(core.assess().keys)

    def _earlier(self, keys: dict[str, int]) -> Optional[int]:
        """The generation committed with this transaction's key according to `keys` (the log's), or None."""
        earlier = keys.get(self.key) if self.key is not None else None
        if earlier is not None:
            self.generation, self.already_committed = earlier, True
        return earlier

    # ---- staging changes ----------------------------------------------------------------------

    def read(self, rel: str) -> Optional[str]:
        """The text of `rel` as this transaction sees it (its own changes included), or None."""
        return self._current(self._resolve(rel))

    def write(self, rel: str, text: str) -> None:
        if not isinstance(text, str):
            raise TypeError(f"write {rel}: text must be str, got {type(text).__name__}")
        rel = self._resolve(rel)
        self._check_shape(rel)
        self._final[rel] = text
        self._rewritten.add(rel)
        parts = rel.split("/")
        self._folders.update("/".join(parts[:i]) for i in range(1, len(parts)))

    def patch(self, rel: str, old: str, new: str) -> None:
        """Replace `old` by `new`; `old` must occur exactly once in the current text."""
        rel = self._resolve(rel)
        current = self._current(rel)
        if current is None:
            raise ValueError(f"patch {rel}: no such file in the memory store; write it first")
        if not old:
            raise ValueError(f"patch {rel}: the old text is empty; give an anchor that occurs exactly once")
        found = occurrences(current, old)
        if found != 1:
            what = "0 matches" if found == 0 else "2 or more matches"
            raise ValueError(f"patch {rel}: old text has {what}, it must occur exactly once; "
                             f"{'re-read the file' if found == 0 else 'give a longer, unique anchor'}")
        self._final[rel] = current.replace(old, new, 1)
        self._patches.setdefault(rel, []).append((old, new))

    def delete(self, rel: str) -> None:
        rel = self._resolve(rel)
        if self._current(rel) is None:
            raise ValueError(f"delete {rel}: no such file in the memory store")
        self._final[rel] = None
        self._rewritten.add(rel)

    @property
    def staged(self) -> dict[str, Optional[str]]:
        """The staged changes: path -> new text, or None for a delete."""
        return dict(self._final)

    def _resolve(self, rel: str) -> str:
        if check_rel(rel) in manifest.RESERVED:
            raise PathRefused(f"memory path {rel!r} is reserved for the generation's manifest; use another name")
        if self._base_tree is None:
            return rel
        return resolve(self._base_tree, rel, self._plain)

    def _current(self, rel: str) -> Optional[str]:
        if rel in self._final:
            return self._final[rel]
        return self._base_text(rel)

    def _base_text(self, rel: str) -> Optional[str]:
        if self._base_tree is None:
            return None
        path = self._base_tree / rel
        return path.read_text(encoding="utf-8") if path.is_file() else None

    def _check_shape(self, rel: str) -> None:
        parts = rel.split("/")
        for i in range(1, len(parts)):
            prefix = "/".join(parts[:i])
            if self._current(prefix) is not None:
                raise ValueError(f"write {rel}: {prefix} is a file, not a folder")
        if self._base_tree is not None and (self._base_tree / rel).is_dir():
            raise ValueError(f"write {rel}: it is a folder; write a file inside it")
        if rel in self._folders:
            raise ValueError(f"write {rel}: this transaction already wrote files inside it as a folder")

    # ---- commit -------------------------------------------------------------------------------

    def __enter__(self) -> "Transaction":
        return self

    def __exit__(self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if exc_type is not None:
            self.abort()
        else:
            self.commit()

    def abort(self) -> None:
        self._done = True
        self._release_pin()

    def commit(self) -> Optional[int]:
        """Publish the staged changes as a new generation; None if there was nothing to commit."""
        if self._done:
            return self.generation
        self._done = True
        try:
            if self.already_committed or self._earlier(self._core.assess().keys) is not None:
                return self.generation
            changes = {p: t for p, t in self._final.items() if t is not None or self._base_text(p) is not None}
            if not changes:
                return None
            self._check_l1(changes)
            self.generation = self._publish(changes)
            return self.generation
        finally:
            self._release_pin()

    def _check_l1(self, changes: dict[str, Optional[str]]) -> None:
        text = changes.get(layers.L1_INDEX)
        if text is not None:
            layers.check_l1(text, self._core.l1_max_lines, self._core.l1_max_chars)

    def _precheck(self) -> None:
        """Fail fast, before building anything, on a sure conflict: a path this transaction rewrote that a
        published commit changed since the base. Best effort, without the lock; the locked check decides."""
        core = self._core
        found = core.assess()
        head = found.head
        if head == self.base or found.problems:
            return
        try:
            newer = [c for c in commitlog.entries_after(core.log, self.base) if c.generation <= head]
        except MemoryStoreError:  # a line being appended right now; the check under the lock will see it
            return
        for commit in reversed(newer):
            for rel in sorted(self._rewritten & set(commit.paths) & self._final.keys()):
                raise self._conflict(rel, commit, REWRITE_CONFLICT)

    def _publish(self, changes: dict[str, Optional[str]]) -> int:
        core = self._core
        self._precheck()
        staging = core.new_staging()
        builder: Optional[Builder] = None
        try:
            faults.point("staging")
            builder = Builder(staging.path, self._base_tree, core.pool, _midway("linking"))
            tables = Staged(self._base_tree)
            midway = _midway("writing")
            bulk = len(changes) > BULK_FILES
            for rel, text in sorted(changes.items()):
                _apply(builder, rel, text, tables, midway, sync=False)
                midway = None if text is not None else midway
            _flush(builder, bulk)
            with flocked(core.lock):
                return self._publish_locked(builder, changes, tables)
        finally:
            if builder is not None:
                builder.discard()  # what it made, unless published
            staging.release()

    def _publish_locked(self, builder: Builder, changes: dict[str, Optional[str]], tables: Staged) -> int:
        """Rebase onto HEAD if it moved, then publish (see store.py). Caller holds the commit lock."""
        core = self._core
        faults.point("locked")
        found = core.assess()  # nothing changes under this lock but by us
        if found.problems or found.fixes:
            fixes.recover_locked(core, full=False)  # raises when the store needs repair
            found = core.assess()
        head, hashes = found.head, found.log.hashes
        earlier = self._earlier(found.keys)
        if earlier is not None:
            return earlier
        if head != self.base:
            self._rebase(builder, changes, head, tables)
            _flush(builder, bulk=False)
            self._check_l1(changes)
        digest = tables.write(builder)  # not fsynced: see "Durability" above
        generation = head + 1
        parent_hash = hashes[head] if 0 <= head < len(hashes) else None  # the parent's line: the chain
        record = self._record_of(generation, changes, digest, parent_hash)
        write_new(os.path.join(builder.tree, manifest.RECORD), record.to_line(), sync=False)
        faults.point("rebased")
        target = core.gen_path(generation)
        builder.publish(target)
        try:
            fsync_dir(core.gens)
            core.link_manifest(generation)
            faults.point("published")
            commitlog.append(core.log, record, midway=_midway("logging"))
        except BaseException:  # alive and still holding the lock: take back what nobody may publish
            if commitlog.last_line(core.log) != record.to_line().rstrip(b"\n"):
                _unpublish(core, builder, target)
            raise
        faults.point("logged")
        core.write_head(generation, with_faults=True)
        faults.point("committed")
        core.trust(generation)  # its stat record was just taken from its files
        return generation

    def _record_of(self, generation: int, changes: dict[str, Optional[str]], digest: str,
                   parent_hash: Optional[str]) -> Commit:
        return Commit(
            generation=generation,
            parent=generation - 1 if generation > 0 else None,
            author=self.author,
            message=self.message,
            paths=sorted(changes),
            time=time.time(),
            deleted=sorted(p for p, t in changes.items() if t is None),
            manifest=digest,
            parent_hash=parent_hash,
            key=self.key,
        )

    def _rebase(self, builder: Builder, changes: dict[str, Optional[str]], head: int, tables: Staged) -> None:
        """Bring staging from the base to `head`, path by path. Caller holds the lock."""
        core = self._core
        newer = commitlog.entries_after(core.log, self.base)
        if not newer or newer[0].generation != self.base + 1 or newer[-1].generation != head:
            raise MemoryStoreError(f"{core.log} does not cover generations {self.base + 1}..{head}; "
                                   "run `ga memory verify`")
        latest: dict[str, Commit] = {}
        for commit in newer:
            for rel in commit.paths:
                latest[rel] = commit
        head_tree = core.gen_path(head)
        head_tables = Staged(head_tree)
        for rel, theirs in sorted(latest.items()):
            if rel in changes:
                changes[rel] = self._replay(rel, theirs, head_tree)
                _apply(builder, rel, changes[rel], tables, None)
                continue
            source = os.path.join(head_tree, rel)
            entry, stat = head_tables.get(rel)
            if os.path.lexists(source):
                builder.link(rel, source)
            else:
                builder.delete(rel)
            if entry is None or stat is None:
                tables.pop(rel)
            else:
                tables.set_raw(rel, entry, stat)

    def _replay(self, rel: str, theirs: Commit, head_tree: Path) -> str:
        if rel in self._rewritten or rel not in self._patches:
            raise self._conflict(rel, theirs, REWRITE_CONFLICT)
        path = head_tree / rel
        if not path.is_file():
            raise self._conflict(rel, theirs, "they deleted it, so the patch has nothing to apply to")
        text = path.read_text(encoding="utf-8")
        for old, new in self._patches[rel]:
            found = occurrences(text, old)
            if found != 1:
                raise self._conflict(rel, theirs, f"the patch anchor now has {'0' if not found else '2 or more'} matches")
            text = text.replace(old, new, 1)
        return text

    def _conflict(self, rel: str, theirs: Commit, why: str) -> CommitConflict:
        return CommitConflict(rel, self.author, theirs.author, self.base, theirs.generation, why)


def _unpublish(core: StoreCore, builder: Builder, target: Path) -> None:
    """Undo a publication that failed before its record was whole (an exception, not a crash): cut a half
    written line (kept in quarantine/) and move the tree back into staging, where its build is discarded.
    (A crash leaves the generation complete: recovery restores its record from MANIFEST.record.)"""
    core.cut_torn_tail()
    builder.unpublish(target)
    (core.manifests / target.name).unlink(missing_ok=True)


def _midway(point: str) -> Optional[Callable[[], None]]:
    return (lambda: faults.point(point)) if faults.hook is not None or faults.armed(point) else None


def _apply(builder: Builder, rel: str, text: Optional[str], tables: Staged,
           midway: Optional[Callable[[], None]], sync: bool = True) -> None:
    """Make `rel` in the staging tree hold `text` (a new file; never written through a link), or delete
    it, and update the staged manifest and stat tables."""
    if text is None:
        builder.delete(rel)
        tables.pop(rel)
        return
    data = text.encode("utf-8")
    path = builder.write(rel, data, midway, sync=sync)
    tables.set(rel, manifest.entry_of(data), manifest.stat_entry(os.lstat(path)))


def _flush(builder: Builder, bulk: bool) -> None:
    """New files reach the disk before publication: all at once with os.sync() in bulk, else each fsynced
    here, after all were written (on a journaling file system the first fsync's commit carries the others'
    data, so the rest cost little); the folders this build made need no fsync of their own (see
    "Durability")."""
    unsynced, builder.unsynced = builder.unsynced, []
    if bulk:
        os.sync()  # one flush instead of an fsync per file
        return
    for path in unsynced:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# ---- copy-on-write by folder: a new generation's tree built from its base

Midway = Optional[Callable[[], None]]


class Builder:
    """The staging tree `tree` (the future generations/<n>), starting as a copy of `base`'s root."""

    def __init__(self, tree: Path, base: Optional[Path], pool: Path, midway: Midway = None) -> None:
        self.tree = str(tree)
        self.pool = str(pool)
        self._count = 0
        self._midway = midway
        self.owned: dict[str, str] = {"": self.tree}  # logical folder -> physical dir this build made
        self.created: list[str] = []                  # new pooled dirs, while unpublished ours to remove
        self.unsynced: list[str] = []                 # files written, fsynced by the next _flush
        self._published: list[str] = []
        if base is not None:
            self._copy(str(base), self.tree, "")

    def exists(self, rel: str) -> bool:
        return os.path.lexists(os.path.join(self.tree, rel))

    def write(self, rel: str, data: bytes, midway: Midway = None, sync: bool = True) -> str:
        """Make `rel` a new read-only file holding `data`; return its physical path. Unless `sync`, it is
        fsynced by the next `_flush`."""
        target = self._fresh_entry(rel)
        write_new(target, data, READ_ONLY, midway, sync=sync)
        if not sync:
            self.unsynced.append(target)
        return target

    def link(self, rel: str, source: str) -> str:
        """Make `rel` a hard link to `source` (another generation's entry)."""
        target = self._fresh_entry(rel)
        os.link(source, target, follow_symlinks=False)
        return target

    def delete(self, rel: str) -> None:
        """Remove `rel` (if present), then the folders below the top level that it left empty."""
        folder_rel, _, name = rel.rpartition("/")
        if not self.exists(rel):
            return
        os.unlink(os.path.join(self.own(folder_rel), name))
        while "/" in folder_rel and not os.listdir(self.owned[folder_rel]):
            parent_rel, _, name = folder_rel.rpartition("/")
            os.unlink(os.path.join(self.own(parent_rel), name))
            emptied = self.owned.pop(folder_rel)
            os.rmdir(emptied)  # (its tables are written only at publication)
            self.created.remove(emptied)
            folder_rel = parent_rel

    def publish(self, target: Path) -> None:
        """Rename the tree into place; from then on its pooled dirs belong to that generation."""
        os.rename(self.tree, target)
        self._published, self.created = self.created, []

    def unpublish(self, target: Path) -> None:
        """Take a tree published by `publish` back into staging (its record never became whole)."""
        os.rename(target, self.tree)
        self.created = self._published

    def discard(self) -> None:
        """Remove the pooled dirs this unpublished build made (the staging dir goes with its hold)."""
        for path in reversed(self.created):
            remove_tree(path)
            for table in (path + FOLDER_NAME, path + FOLDER_STAT):
                if os.path.lexists(table):
                    os.unlink(table)
        self.created.clear()

    # ---- copy on write -------------------------------------------------------------------------

    def own(self, folder: str) -> str:
        """The physical dir of `folder` in this build, copied from the shared one (or created) first."""
        found = self.owned.get(folder)
        if found is not None:
            return found
        parent_rel, _, name = folder.rpartition("/")
        entry = os.path.join(self.own(parent_rel), name)
        new = self._new_dir()
        if os.path.lexists(entry):
            if not is_pool_link(entry):
                raise ValueError(f"{folder} is not a folder of the store")
            self._copy(entry, new, folder)
            os.unlink(entry)
        os.symlink(POOL_LINK + os.path.basename(new), entry)
        self.owned[folder] = new
        return new

    def _fresh_entry(self, rel: str) -> str:
        folder_rel, _, name = rel.rpartition("/")
        target = os.path.join(self.own(folder_rel), name)
        if is_pool_link(target):  # a folder of this tree: never dropped by a write over it
            raise IsADirectoryError(f"{rel} is a folder of the memory store, not a file")
        if os.path.lexists(target):
            os.unlink(target)
        return target

    def _new_dir(self) -> str:
        self._count += 1
        path = os.path.join(self.pool, f"{os.path.basename(self.tree)}.{self._count}")
        os.mkdir(path)
        self.created.append(path)
        return path

    def _copy(self, src: str, dst: str, folder: str) -> None:
        """Hard-link every entry of `src` (the folder `folder`) into `dst` (pooled links included: their
        text resolves the same from any dir two levels below the store); a real subfolder (the layout before
        pooled folders) becomes a pooled one that this build made."""
        flags = os.O_RDONLY | os.O_DIRECTORY
        src_fd, dst_fd = os.open(src, flags), os.open(dst, flags)
        try:
            for entry in os.scandir(src_fd):
                if not folder and entry.name in RESERVED:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    new = self._new_dir()
                    rel = f"{folder}/{entry.name}" if folder else entry.name
                    self._copy(os.path.join(src, entry.name), new, rel)
                    os.symlink(POOL_LINK + os.path.basename(new), entry.name, dir_fd=dst_fd)
                    self.owned[rel] = new
                    continue
                os.link(entry.name, entry.name, src_dir_fd=src_fd, dst_dir_fd=dst_fd, follow_symlinks=False)
                if self._midway is not None:
                    midway, self._midway = self._midway, None
                    midway()
        finally:
            os.close(src_fd)
            os.close(dst_fd)


def reachable(roots: list[Path], pool: Path) -> set[str]:
    """Ids of the pooled dirs linked, directly or through other pooled dirs, from the given trees."""
    seen: set[str] = set()
    stack = [str(root) for root in roots]
    while stack:
        for _name, target in _links(stack.pop()):
            found = pool_id(target)
            if found is not None and found not in seen:
                seen.add(found)
                stack.append(os.path.join(pool, found))
    return seen


def _links(folder: str) -> Iterator[tuple[str, str]]:
    """(name, text) of the symlinks of a folder, and of its real subfolders (a generation of the old layout
    or rebuilt by repair holds no pooled links, but walking it is cheap next to gc's other work)."""
    try:
        found = list(os.scandir(folder))
    except OSError:
        return
    for entry in found:
        if entry.is_symlink():
            try:
                yield entry.name, os.readlink(entry.path)
            except OSError:
                continue
        elif entry.is_dir(follow_symlinks=False):
            yield from _links(entry.path)
