"""Per-generation manifests: what every file of a generation must contain, and a cheap stat record.

generations/<n>/MANIFEST       {"path": [sha256, size], ...} (sorted JSON); its sha256 is in the commit record
generations/<n>/MANIFEST.stat  {"path": [inode, size, mtime_ns], ...}: a cache for the pin check, not hashed
manifests/<n>                  a hard link to the MANIFEST, so a generation removed by hand can be rebuilt

Both are written in staging before the generation is published. A new generation's manifest is its base's
with the changed paths replaced, so a commit hashes only what it wrote.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Optional

from .fsutil import READ_ONLY, write_new

NAME = "MANIFEST"
STAT = "MANIFEST.stat"
RESERVED = frozenset({NAME, STAT})

Manifest = dict[str, list]  # path -> [sha256, size]
Stats = dict[str, list]     # path -> [inode, size, mtime_ns]


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def dumps(entries: dict[str, list]) -> bytes:
    return json.dumps(entries, sort_keys=True, separators=(",", ":")).encode()


def loads(data: bytes) -> Manifest:
    return json.loads(data)


def entry_of(data: bytes) -> list:
    return [digest(data), len(data)]


def load(tree: Path) -> Optional[Manifest]:
    try:
        return loads((tree / NAME).read_bytes())
    except FileNotFoundError:
        return None


def load_stats(tree: Path) -> Optional[Stats]:
    try:
        return json.loads((tree / STAT).read_bytes())
    except (FileNotFoundError, ValueError):
        return None


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


def walk(tree: Path) -> dict[str, os.stat_result]:
    """Every non-directory entry of a generation (manifest files excluded) with its lstat."""
    found: dict[str, os.stat_result] = {}
    stack = [(str(tree), "")]
    while stack:
        folder, prefix = stack.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                rel = prefix + entry.name
                if entry.is_dir(follow_symlinks=False):
                    stack.append((entry.path, rel + "/"))
                elif prefix or entry.name not in RESERVED:
                    found[rel] = entry.stat(follow_symlinks=False)
    return found


def scan(tree: Path, cache: Optional[dict[tuple[int, int], list]] = None) -> tuple[Manifest, Stats]:
    """Hash every file of a tree (each inode once, through `cache`)."""
    cache = {} if cache is None else cache
    entries, stats = {}, {}
    for rel, st in walk(tree).items():
        key = (st.st_dev, st.st_ino)
        if key not in cache:
            cache[key] = hash_file(os.path.join(tree, rel))
        entries[rel] = cache[key]
        stats[rel] = stat_entry(st)
    return entries, stats


def stat_entry(st: os.stat_result) -> list:
    return [st.st_ino, st.st_size, st.st_mtime_ns]


def write(tree: Path, entries: Manifest, stats: Stats, sync: bool = True) -> str:
    """Write MANIFEST and MANIFEST.stat into a tree (replacing any); return the manifest's sha256."""
    data = dumps(entries)
    for name, payload in ((NAME, data), (STAT, dumps(stats))):
        path = tree / name
        if os.path.lexists(path):
            os.unlink(path)
        write_new(path, payload, READ_ONLY, sync=sync)
    return digest(data)


def rewrite_stats(tree: Path, stats: Stats) -> None:
    tmp = tree / f".{STAT}.tmp"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    write_new(tmp, dumps(stats), READ_ONLY)
    os.replace(tmp, tree / STAT)


def stat_changes(tree: Path, recorded: Stats) -> list[str]:
    """Paths whose inode, size or mtime differ from the record, or that are missing: the cheap check
    run when a generation is pinned (one lstat per file, no reading)."""
    changed = []
    fds: dict[str, int] = {}
    root = os.open(tree, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for rel, expected in recorded.items():
            folder, _, name = rel.rpartition("/")
            fd = fds.get(folder)
            if fd is None:
                try:
                    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY, dir_fd=root) if folder else root
                except OSError:
                    changed.append(rel)
                    continue
                fds[folder] = fd
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                changed.append(rel)
                continue
            if st.st_ino != expected[0] or st.st_size != expected[1] or st.st_mtime_ns != expected[2]:
                changed.append(rel)
    finally:
        for folder, fd in fds.items():
            if folder:
                os.close(fd)
        os.close(root)
    return changed
