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
"""
from __future__ import annotations

import bisect
import hashlib
import json
import os
from pathlib import Path
from typing import Iterator, Optional

from .errors import PathRefused
from .fsutil import READ_ONLY, atomic_replace
from .paths import POOL, pool_id, resolve, walk_tree

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
