"""Copy-on-write by folder: a new generation's tree built from its base, sharing every untouched folder.

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
from pathlib import Path
from typing import Callable, Iterator, Optional

from .fsutil import READ_ONLY, remove_tree, write_new
from .manifest import FOLDER_NAME, FOLDER_STAT, RESERVED
from .paths import POOL_LINK, is_pool_link, pool_id

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
        self._published: list[str] = []
        if base is not None:
            self._copy(str(base), self.tree, "")

    def exists(self, rel: str) -> bool:
        return os.path.lexists(os.path.join(self.tree, rel))

    def write(self, rel: str, data: bytes, midway: Midway = None, sync: bool = True) -> str:
        """Make `rel` a new read-only file holding `data`; return its physical path."""
        target = self._fresh_entry(rel)
        write_new(target, data, READ_ONLY, midway, sync=sync)
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
