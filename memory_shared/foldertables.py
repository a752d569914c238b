"""A generation's manifest and stat tables folder by folder (the Merkle layout manifest.py describes).

`Staged` holds the tables a commit changes: read from the base on first use, written for the folders the
commit made (children before parents, each parent's line naming its child's manifest hash), so a commit
costs depth x folder size here too. `tables_of` computes every table from the files (repair, checks).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Union

from . import manifest
from .fsutil import READ_ONLY, atomic_replace
from .manifest import FOLDER_NAME, FOLDER_STAT, NAME, STAT, Table
from .paths import is_pool_link

if TYPE_CHECKING:
    from .cow import Builder

Tables = tuple[Table, Table]  # (manifest, stat)


class Staged:
    def __init__(self, base: Optional[Path]) -> None:
        self.base = None if base is None else str(base)
        self.tables: dict[str, Tables] = {}
        entries, stats = self._read("")
        if any("/" in rel.rstrip("/") for rel, _ in entries.rows()):
            entries, stats = self._split(entries, stats)  # a base written before pooled folders
        self.tables[""] = (entries, stats)

    def get(self, rel: str) -> tuple[Optional[bytes], Optional[bytes]]:
        folder, name = _row(rel)
        entries, stats = self._tables(folder)
        return entries.get(name), stats.get(name)

    def set(self, rel: str, entry: list, stat: list) -> None:
        folder, name = _row(rel)
        entries, stats = self._tables(folder)
        entries.set(name, entry)
        stats.set(name, stat)

    def set_raw(self, rel: str, entry: bytes, stat: bytes) -> None:
        folder, name = _row(rel)
        entries, stats = self._tables(folder)
        entries.set_raw(name, entry)
        stats.set_raw(name, stat)

    def pop(self, rel: str) -> None:
        folder, name = _row(rel)
        entries, stats = self._tables(folder)
        entries.pop(name)
        stats.pop(name)

    def write(self, builder: "Builder") -> str:
        """Write the tables of every folder the build made, deepest first, then the root's; return the
        root MANIFEST's sha256."""
        folders = set(self.tables) | set(builder.owned)
        for folder in list(folders):
            while folder:
                folder = folder.rpartition("/")[0]
                folders.add(folder)
        for folder in sorted(folders, key=lambda f: f.count("/") if f else -1, reverse=True):
            if not folder:
                continue
            parent, _, name = folder.rpartition("/")
            made = builder.owned.get(folder)
            if made is None:
                if not builder.exists(folder) and parent in builder.owned:  # pruned by a delete
                    self.pop(folder + "/")
                continue
            entries, stats = self._tables(folder)
            data = entries.to_bytes()
            _replace(made + FOLDER_NAME, data)
            _replace(made + FOLDER_STAT, stats.to_bytes())
            link = os.lstat(os.path.join(builder.owned[parent], name))
            self.set(folder + "/", [manifest.digest(data), len(data)], manifest.stat_entry(link))
        entries, stats = self._tables("")
        return manifest.write(Path(builder.tree), entries, stats)

    def _tables(self, folder: str) -> Tables:
        found = self.tables.get(folder)
        if found is None:
            found = self.tables[folder] = self._read(folder)
        return found

    def _read(self, folder: str) -> Tables:
        if self.base is None:
            return Table(), Table()
        if not folder:
            entries, stats = manifest.load_table(Path(self.base)), manifest.load_table(Path(self.base), STAT)
            if entries is None or stats is None:  # a base written before manifests, not yet upgraded
                return tables_of(Path(self.base)).root
            return present(entries, stats), stats
        parent, _, name = folder.rpartition("/")
        source = manifest.pooled(os.path.join(self.base, parent) if parent else self.base, name)
        if source is None:
            return Table(), Table()
        entries, stats = _load(source + FOLDER_NAME), _load(source + FOLDER_STAT)
        return present(entries, stats), stats

    def _split(self, entries: Table, stats: Table) -> Tables:
        """Spread a flat root table (paths with folders) into one table per folder; return the root's."""
        top: list[Table] = [Table(), Table()]
        for kind, table in enumerate((entries, stats)):
            for line, (rel, _) in zip(table.lines, table.rows(), strict=True):
                folder, _, name = rel.rpartition("/")
                target = self.tables.setdefault(folder, (Table(), Table()))[kind] if folder else top[kind]
                target.set_raw(name, line[len(manifest._key(rel)):])
        return top[0], top[1]


def _row(rel: str) -> tuple[str, str]:
    """(folder, name) of a file's line, or of a folder's ("L3/x/" -> ("L3", "x/"))."""
    folder, _, name = rel.rstrip("/").rpartition("/")
    return folder, name + ("/" if rel.endswith("/") else "")


def present(entries: Table, stats: Table) -> Table:
    """Manifest lines of files still in the tree: repair takes an unrestorable damaged file out of its
    generations and out of their stat records, so a commit on top must not list it."""
    if len(entries) + (stats.get(NAME) is not None) == len(stats):
        return entries
    kept = {rel for rel, _ in stats.rows()}
    return Table([line for (rel, _), line in zip(entries.rows(), entries.lines, strict=True) if rel in kept])


class Built:
    """Every table of a generation as its files are now (see `tables_of`)."""

    def __init__(self, tree: Path, root: Tables, folders: list[tuple[str, Tables]]) -> None:
        self.tree, self.root, self.folders = tree, root, folders
        self.digest = manifest.digest(root[0].to_bytes())

    def write(self) -> None:
        for source, (entries, stats) in self.folders:
            for path, data in ((source + FOLDER_NAME, entries.to_bytes()), (source + FOLDER_STAT, stats.to_bytes())):
                if _read(path) != data:
                    _replace(path, data)
        manifest.write(self.tree, *self.root)


def tables_of(tree: Path, cache: Optional[dict] = None) -> Built:
    """Hash every file of a tree (each inode once, through `cache`) into its tables."""
    cache = {} if cache is None else cache
    folders: list[tuple[str, Tables]] = []

    def visit(path: str, top: bool) -> tuple[dict[str, list], dict[str, list]]:
        entries: dict[str, list] = {}
        stats: dict[str, list] = {}
        for entry in os.scandir(path):
            name, st = entry.name, entry.stat(follow_symlinks=False)
            if top and name in manifest.RESERVED:
                continue
            if entry.is_symlink() and is_pool_link(entry.path):
                sub = visit(entry.path, False)
                tables = (Table.of(sub[0]), Table.of(sub[1]))
                folders.append((os.path.realpath(entry.path), tables))
                data = tables[0].to_bytes()
                entries[name + "/"], stats[name + "/"] = [manifest.digest(data), len(data)], manifest.stat_entry(st)
            elif entry.is_dir(follow_symlinks=False):  # a real folder (the layout before pooled ones)
                sub = visit(entry.path, False)
                entries.update({f"{name}/{rel}": value for rel, value in sub[0].items()})
                stats.update({f"{name}/{rel}": value for rel, value in sub[1].items()})
            else:
                key = (st.st_dev, st.st_ino)
                if key not in cache:
                    cache[key] = manifest.hash_file(entry.path)
                entries[name], stats[name] = cache[key], manifest.stat_entry(st)
        return entries, stats

    root = visit(str(tree), True)
    return Built(tree, (Table.of(root[0]), Table.of(root[1])), folders)


def refresh_stats(tree: Path) -> None:
    """Rewrite the stat tables of a generation (its shared folders' included) from its files now, keeping
    a line for each file of its manifests that is still there. A table already right is left as it is (a
    shared folder's is the same for every generation that links it)."""
    stack = [(str(tree), manifest.load_table(tree) or Table(), True)]
    while stack:
        folder, entries, top = stack.pop()
        stats = Table()
        for name, _ in entries.rows():
            try:
                stats.set(name, manifest.stat_entry(os.lstat(os.path.join(folder, name.rstrip("/")))))
            except OSError:  # gone (repair dropped it)
                pass
            source = manifest.pooled(folder, name[:-1]) if name.endswith("/") else None
            if source is not None:
                stack.append((source, _load(source + FOLDER_NAME), False))
        path, data = (str(tree / STAT), manifest.stat_bytes(tree, stats)) if top else \
            (folder + FOLDER_STAT, stats.to_bytes())
        if _read(path) != data:
            atomic_replace(Path(path), data, mode=READ_ONLY)


def pool_index(pool: Path) -> dict[str, str]:
    """sha256 of each pooled folder's manifest -> the folder (to rebuild a generation from its MANIFEST)."""
    found: dict[str, str] = {}
    for entry in os.scandir(pool) if pool.is_dir() else []:
        if entry.name.endswith(FOLDER_NAME):
            data = _read(entry.path)
            if data is not None:
                found.setdefault(manifest.digest(data), entry.path[:-len(FOLDER_NAME)])
    return found


def folder_digest(folder: Union[str, Path]) -> Optional[str]:
    """sha256 of a pooled folder's manifest (dirs/<id>.m), or None without one."""
    data = _read(str(folder) + FOLDER_NAME)
    return None if data is None else manifest.digest(data)


def unmet_folders(trees: list[Path], linked: list[Path]) -> set[str]:
    """The manifest hashes that folder lines name, in the MANIFESTs of `trees` and the tables of the `linked`
    pooled folders, that no linked folder has: a pooled folder with one of them is still referenced (a link
    to it was swapped), linked or not."""
    named: set[str] = set()
    tables = [_read(str(f) + FOLDER_NAME) for f in linked]
    for data in [_read(str(tree / NAME)) for tree in trees] + tables:
        for name, fields in Table.parse(data or b"").rows():
            if name.endswith("/"):
                named.add(fields[0].decode())
    return named - {manifest.digest(data) for data in tables if data is not None}


def _load(path: str) -> Table:
    return Table.parse(_read(path) or b"")


def _read(path: str) -> Optional[bytes]:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def _replace(path: str, data: bytes) -> None:
    """A folder's table, not fsynced (see manifest.write: the record's hash chain proves a rebuilt one)."""
    atomic_replace(Path(path), data, mode=READ_ONLY, sync=False)
