"""Per-generation manifests: what every file of a generation must contain, and a cheap stat record.

generations/<n>/MANIFEST       one line per entry of the generation's root, `"name"<TAB>sha256<TAB>size`,
                               sorted; its sha256 is in the commit record. A shared (pooled) folder is one
                               line `"name/"<TAB>sha256 of the folder's manifest<TAB>its size`: a Merkle tree,
                               so a commit rewrites the manifests of the folders on its path only. A real
                               folder (a store written before pooled folders) lists its files by path.
generations/<n>/MANIFEST.stat  `"name"<TAB>inode<TAB>size<TAB>mtime_ns` (a folder line: its link's lstat): a
                               cache for the pin check, not hashed
generations/<n>/MANIFEST.record  the commit's log line, written before the generation is renamed into place:
                               if the line is lost from log.jsonl (a crash between the rename and the
                               append, or a damaged log), recovery restores it exactly once it proves it (its
                               manifest hash, generation and parent hash must fit); not hashed
dirs/<id>.m, dirs/<id>.s       the same two tables for the pooled folder dirs/<id>
manifests/<n>                  a hard link to the MANIFEST, so a generation removed by hand can be rebuilt

Both are written in staging before the generation is published. A new generation's tables are its base's
with the changed paths spliced in (sorted lines, found by bisection), so a commit hashes only what it
wrote and does no per-file work for the files it did not touch.

Folder by folder (the second half of this module): `Staged` holds the tables a commit changes: read from the base on first use, written for the folders the
commit made (children before parents, each parent's line naming its child's manifest hash), so a commit
costs depth x folder size here too. `tables_of` computes every table from the files (repair, checks).
"""
from __future__ import annotations

import bisect
import hashlib
import json
import os
from pathlib import Path
from typing import Iterator, Optional, Protocol, Union

from .errors import PathRefused
from .fsutil import READ_ONLY, atomic_replace
from .paths import POOL, is_pool_link, pool_id, resolve, walk_tree

NAME = "MANIFEST"
STAT = "MANIFEST.stat"
RECORD = "MANIFEST.record"
RESERVED = frozenset({NAME, STAT, RECORD})
FOLDER_NAME, FOLDER_STAT = ".m", ".s"  # suffixes of a pooled folder's tables, next to it in dirs/

Manifest = dict[str, list]  # path -> [sha256, size]
Stats = dict[str, list]     # path -> [inode, size, mtime_ns]


class Table:
    """Sorted lines `"path"<TAB>field<TAB>...`; get/set/pop of one path cost O(log n), no per-line work."""

    def __init__(self, lines: Optional[list[bytes]] = None) -> None:
        self.lines = lines or []

    @classmethod
    def parse(cls, data: bytes) -> "Table":
        return cls(data.split(b"\n")[:-1] if data else [])

    @classmethod
    def of(cls, entries: dict[str, list]) -> "Table":
        return cls(sorted(_key(rel) + b"\t".join(str(f).encode() for f in fields) for rel, fields in entries.items()))

    def _find(self, rel: str) -> tuple[int, bytes, bool]:
        key = _key(rel)
        i = bisect.bisect_left(self.lines, key)
        return i, key, i < len(self.lines) and self.lines[i].startswith(key)

    def get(self, rel: str) -> Optional[bytes]:
        i, key, found = self._find(rel)
        return self.lines[i][len(key):] if found else None

    def set(self, rel: str, fields: list) -> None:
        self.set_raw(rel, b"\t".join(str(f).encode() for f in fields))

    def set_raw(self, rel: str, value: bytes) -> None:
        i, key, found = self._find(rel)
        if found:
            self.lines[i] = key + value
        else:
            self.lines.insert(i, key + value)

    def pop(self, rel: str) -> None:
        i, _, found = self._find(rel)
        if found:
            del self.lines[i]

    def to_bytes(self) -> bytes:
        return b"\n".join(self.lines) + b"\n" if self.lines else b""

    def rows(self):
        """(path, [fields as bytes]) of every line."""
        for line in self.lines:
            end = line.index(b'"\t', 1) + 1 if b"\\" not in line else _quoted_end(line)
            quoted = line[:end]
            rel = quoted[1:-1].decode() if b"\\" not in quoted else json.loads(quoted)
            yield rel, line[end + 1:].split(b"\t")

    def __len__(self) -> int:
        return len(self.lines)


def _key(rel: str) -> bytes:
    return json.dumps(rel, ensure_ascii=False).encode() + b"\t"


def _quoted_end(line: bytes) -> int:
    i = 1
    while line[i:i + 1] != b'"':
        i += 2 if line[i:i + 1] == b"\\" else 1
    return i + 1


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def entry_of(data: bytes) -> list:
    return [digest(data), len(data)]


def loads(data: bytes) -> Manifest:
    return {rel: [f[0].decode(), int(f[1])] for rel, f in Table.parse(data).rows()}


def load_table(tree: Path, name: str = NAME) -> Optional[Table]:
    try:
        return Table.parse((tree / name).read_bytes())
    except FileNotFoundError:
        return None


def load(tree: Path) -> Optional[Manifest]:
    """Every file of a generation, shared folders included: path -> [sha256, size]."""
    try:
        return flatten(tree, (tree / NAME).read_bytes())
    except FileNotFoundError:
        return None


def pooled(folder: str, name: str) -> Optional[str]:
    """The pooled dir that the link `name` of the physical dir `folder` names, or None for anything else.
    (A generation's root and a pooled dir both sit two levels below the store's root, next to dirs/.)"""
    try:
        found = pool_id(os.readlink(os.path.join(folder, name)))
    except OSError:
        return None
    store = os.path.dirname(os.path.dirname(os.path.realpath(folder)))  # `folder` may be reached by links
    return None if found is None else os.path.join(store, POOL, found)


def flatten(tree: Optional[Path], data: bytes, problems: Optional[list[str]] = None,
            by_hash: Optional[dict[str, str]] = None) -> Manifest:
    """path -> [sha256, size] of every file under a MANIFEST, through the folder manifests its folder lines
    name (found through the tree's links, or by their hash in `by_hash`); a folder manifest missing or not
    matching its line is named in `problems` and its files left out."""
    found: Manifest = {}
    stack = [("", None if tree is None else str(tree), Table.parse(data))]
    while stack:
        prefix, folder, table = stack.pop()
        for name, fields in table.rows():
            sha = fields[0].decode()
            if not name.endswith("/"):
                found[prefix + name] = [sha, int(fields[1])]
                continue
            source = by_hash.get(sha) if by_hash is not None else pooled(folder, name[:-1]) if folder else None
            try:
                sub = Path(source + FOLDER_NAME).read_bytes() if source else None
            except FileNotFoundError:
                sub = None
            if sub is None or digest(sub) != sha:
                if problems is not None:
                    why = "is missing" if sub is None else "does not match the line in its parent's (it was edited)"
                    problems.append(f"the manifest of folder {prefix}{name[:-1]} {why}")
                continue
            stack.append((prefix + name, source, Table.parse(sub)))
    return found


def hash_file(path: str) -> list:
    """[sha256, size] of a file (a symlink hashes its target text)."""
    if os.path.islink(path):
        return entry_of(("symlink:" + os.readlink(path)).encode())
    sha = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            sha.update(chunk)
            size += len(chunk)
    return [sha.hexdigest(), size]


def entries(tree: Path) -> Iterator[tuple[str, os.DirEntry]]:
    """Every non-directory entry of a generation (manifest files excluded), by relative path; the pooled
    folders it shares with other generations are walked as its own."""
    for rel, entry in walk_tree(tree):
        if rel not in RESERVED:
            yield rel, entry


def tree_inodes(tree: Path, problems: Optional[list[str]] = None) -> dict[str, int]:
    """Every non-directory entry of a tree by relative path, with its inode; checks modes and symlinks."""
    found: dict[str, int] = {}
    for rel, entry in entries(tree):
        found[rel] = entry.inode()
        if problems is None:
            continue
        if entry.is_symlink():
            try:
                resolve(tree, rel)
            except PathRefused:
                problems.append(f"{entry.path} is a symlink leading outside its generation")
        elif entry.stat(follow_symlinks=False).st_mode & 0o222:
            problems.append(f"{entry.path} is writable; files of a generation must be read-only")
    return found


def walk(tree: Path) -> dict[str, os.stat_result]:
    """Every non-directory entry of a generation (manifest files excluded) with its lstat."""
    return {rel: entry.stat(follow_symlinks=False) for rel, entry in entries(tree)}


def stat_entry(st: os.stat_result) -> list:
    return [st.st_ino, st.st_size, st.st_mtime_ns]


def write(tree: Path, entries: Manifest | Table, stats: Stats | Table) -> str:
    """Write MANIFEST and MANIFEST.stat into a tree, replacing any; return the manifest's sha256.

    Neither is fsynced (an fsync under the commit lock costs every committer): the files they describe
    are, and the record holds MANIFEST's hash, so a MANIFEST lost to a power cut is rebuilt from the files
    by `ga memory repair` and proven by that hash; MANIFEST.stat is a cache (pins refuse until repair
    refreshes it)."""
    data = (entries if isinstance(entries, Table) else Table.of(entries)).to_bytes()
    atomic_replace(tree / NAME, data, mode=READ_ONLY, sync=False)
    atomic_replace(tree / STAT, stat_bytes(tree, stats), mode=READ_ONLY, sync=False)
    return digest(data)


def stat_bytes(tree: Path, stats: Stats | Table) -> bytes:
    """The stat table with a row for MANIFEST itself, so the pin check sees MANIFEST replaced or removed
    (and a stat table without that row, e.g. emptied, is refused rather than checking nothing)."""
    table = stats if isinstance(stats, Table) else Table.of(stats)
    table.set(NAME, stat_entry(os.lstat(tree / NAME)))
    return table.to_bytes()


def stat_changes(tree: Path, recorded: Table, trusted: frozenset[str] | set[str] = frozenset(),
                 checked: Optional[dict[str, Optional[str]]] = None) -> list[str]:
    """Paths whose inode, size or mtime differ from the record, or that are missing: the cheap check
    run when a generation is pinned (one stat per file, no reading), shared folders included, except the
    pooled folders in `trusted` (checked moments ago). `checked` receives each pooled folder looked at,
    checked or trusted, with the pooled folder containing it (None at the top)."""
    changed: list[str] = []
    stack = [("", str(tree), recorded)]
    while stack:
        prefix, folder, table = stack.pop()
        changed += [prefix + rel for rel in _stat_changes(folder, table)]
        for name, _ in table.rows():
            if not name.endswith("/") or prefix + name in changed:
                continue
            source = pooled(folder, name[:-1])
            if checked is not None and source is not None:
                checked[source] = folder if prefix else None
            if source in trusted:
                continue
            try:
                sub = Table.parse(Path(source + FOLDER_STAT).read_bytes()) if source else None
            except FileNotFoundError:
                sub = None
            if sub is None or source is None:  # no source, no table: sub is None then too
                changed.append(f"{prefix}{name} (its stat record is missing)")
            else:
                stack.append((prefix + name, source, sub))
    return changed


def _stat_changes(tree: str, recorded: Table) -> list[str]:
    changed = []
    fds: dict[str, int] = {}
    root = os.open(tree, os.O_RDONLY | os.O_DIRECTORY)
    fds[""] = root
    try:
        for rel, fields in recorded.rows():
            folder, _, name = rel.rstrip("/").rpartition("/")
            fd = fds.get(folder)
            try:
                if fd is None:
                    fd = fds[folder] = os.open(folder, os.O_RDONLY | os.O_DIRECTORY, dir_fd=root)
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                changed.append(rel)
                continue
            if st.st_ino != int(fields[0]) or st.st_size != int(fields[1]) or st.st_mtime_ns != int(fields[2]):
                changed.append(rel)
    finally:
        for fd in fds.values():
            os.close(fd)
    return changed


# ---- a generation's manifest and stat tables, folder by folder

Tables = tuple[Table, Table]  # (manifest, stat)


class BuiltTree(Protocol):
    """What `Staged.write` reads of a staged tree (transaction.py's copy-on-write `Builder`)."""
    tree: str
    owned: dict[str, str]  # logical folder -> the physical dir the build made for it

    def exists(self, rel: str) -> bool: ...


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

    def write(self, builder: BuiltTree) -> str:
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
            self.set(folder + "/", [digest(data), len(data)], stat_entry(link))
        entries, stats = self._tables("")
        return write(Path(builder.tree), entries, stats)

    def _tables(self, folder: str) -> Tables:
        found = self.tables.get(folder)
        if found is None:
            found = self.tables[folder] = self._read(folder)
        return found

    def _read(self, folder: str) -> Tables:
        if self.base is None:
            return Table(), Table()
        if not folder:
            entries, stats = load_table(Path(self.base)), load_table(Path(self.base), STAT)
            if entries is None or stats is None:  # a base written before manifests, not yet upgraded
                return tables_of(Path(self.base)).root
            return present(entries, stats), stats
        parent, _, name = folder.rpartition("/")
        source = pooled(os.path.join(self.base, parent) if parent else self.base, name)
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
                target.set_raw(name, line[len(_key(rel)):])
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
        self.digest = digest(root[0].to_bytes())

    def write(self) -> None:
        for source, (entries, stats) in self.folders:
            for path, data in ((source + FOLDER_NAME, entries.to_bytes()), (source + FOLDER_STAT, stats.to_bytes())):
                if _read(path) != data:
                    _replace(path, data)
        write(self.tree, *self.root)


def tables_of(tree: Path, cache: Optional[dict] = None) -> Built:
    """Hash every file of a tree (each inode once, through `cache`) into its tables."""
    cache = {} if cache is None else cache
    folders: list[tuple[str, Tables]] = []

    def visit(path: str, top: bool) -> tuple[dict[str, list], dict[str, list]]:
        entries: dict[str, list] = {}
        stats: dict[str, list] = {}
        for entry in os.scandir(path):
            name, st = entry.name, entry.stat(follow_symlinks=False)
            if top and name in RESERVED:
                continue
            if entry.is_symlink() and is_pool_link(entry.path):
                sub = visit(entry.path, False)
                tables = (Table.of(sub[0]), Table.of(sub[1]))
                folders.append((os.path.realpath(entry.path), tables))
                data = tables[0].to_bytes()
                entries[name + "/"], stats[name + "/"] = [digest(data), len(data)], stat_entry(st)
            elif entry.is_dir(follow_symlinks=False):  # a real folder (the layout before pooled ones)
                sub = visit(entry.path, False)
                entries.update({f"{name}/{rel}": value for rel, value in sub[0].items()})
                stats.update({f"{name}/{rel}": value for rel, value in sub[1].items()})
            else:
                key = (st.st_dev, st.st_ino)
                if key not in cache:
                    cache[key] = hash_file(entry.path)
                entries[name], stats[name] = cache[key], stat_entry(st)
        return entries, stats

    root = visit(str(tree), True)
    return Built(tree, (Table.of(root[0]), Table.of(root[1])), folders)


def refresh_stats(tree: Path) -> None:
    """Rewrite the stat tables of a generation (its shared folders' included) from its files now, keeping
    a line for each file of its manifests that is still there. A table already right is left as it is (a
    shared folder's is the same for every generation that links it)."""
    stack = [(str(tree), load_table(tree) or Table(), True)]
    while stack:
        folder, entries, top = stack.pop()
        stats = Table()
        for name, _ in entries.rows():
            try:
                stats.set(name, stat_entry(os.lstat(os.path.join(folder, name.rstrip("/")))))
            except OSError:  # gone (repair dropped it)
                pass
            source = pooled(folder, name[:-1]) if name.endswith("/") else None
            if source is not None:
                stack.append((source, _load(source + FOLDER_NAME), False))
        path, data = (str(tree / STAT), stat_bytes(tree, stats)) if top else \
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
                found.setdefault(digest(data), entry.path[:-len(FOLDER_NAME)])
    return found


def folder_digest(folder: Union[str, Path]) -> Optional[str]:
    """sha256 of a pooled folder's manifest (dirs/<id>.m), or None without one."""
    data = _read(str(folder) + FOLDER_NAME)
    return None if data is None else digest(data)


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
    return named - {digest(data) for data in tables if data is not None}


def _load(path: str) -> Table:
    return Table.parse(_read(path) or b"")


def _read(path: str) -> Optional[bytes]:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def _replace(path: str, data: bytes) -> None:
    """A folder's table, not fsynced (see write: the record's hash chain proves a rebuilt one)."""
    atomic_replace(Path(path), data, mode=READ_ONLY, sync=False)
