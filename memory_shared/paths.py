"""Path safety: only plain relative POSIX paths, and nothing that resolves outside a tree.

A generation's folders are shared between generations as pooled directories (`dirs/<id>`, see transaction.py),
reached by symlinks the store makes, `../../dirs/<id>`: both a generation's root and a pooled directory sit
two levels below the store's root, so the same text resolves from either. Those links are folders of the
tree; any other symlink is resolved logically (against the generation's paths, not the pool's) and refused
when it leads outside the generation.
"""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Iterator, Optional

from .errors import PathRefused

POOL = "dirs"
POOL_LINK = f"../../{POOL}/"
_POOL_ID = re.compile(r"\d+-[0-9a-f]{12}\.\d+")
MAX_LINKS = 40  # symlinks followed while resolving one path (as the kernel's ELOOP)


def pool_id(target: str) -> Optional[str]:
    """The id of the pooled directory a store-made symlink's text names, or None for any other symlink."""
    if target.startswith(POOL_LINK) and _POOL_ID.fullmatch(target[len(POOL_LINK):]):
        return target[len(POOL_LINK):]
    return None


def is_pool_link(path: str) -> bool:
    try:
        return pool_id(os.readlink(path)) is not None and os.path.isdir(path)
    except OSError:
        return False


def tree_files(base: Path) -> list[Path]:
    """The paths of every non-directory entry under `base`, through the store's shared folders (pathlib's
    rglob does not follow symlinked folders); none when `base` is not a folder."""
    return [base / rel for rel, _ in walk_tree(base)] if os.path.isdir(base) else []


def walk_tree(base: Path | str) -> Iterator[tuple[str, os.DirEntry]]:
    """Every non-directory entry under `base` by relative path, descending into real folders and into the
    store's pooled folders (never through another symlink)."""
    stack = [(str(base), "")]
    while stack:
        folder, prefix = stack.pop()
        with os.scandir(folder) as found:
            for entry in found:
                if entry.is_dir(follow_symlinks=False) or (entry.is_symlink() and is_pool_link(entry.path)):
                    stack.append((entry.path, prefix + entry.name + "/"))
                else:
                    yield prefix + entry.name, entry


def check_rel(rel: str) -> str:
    """Return `rel` if it is a plain relative POSIX path, else raise PathRefused."""
    if not isinstance(rel, str):
        raise PathRefused(f"memory path must be a string, got {type(rel).__name__}")
    if not rel:
        raise PathRefused("memory path is empty; use a relative path like L2/facts.md")
    if "\x00" in rel or "\\" in rel:
        raise PathRefused(f"memory path {rel!r} has a NUL or backslash; use a relative POSIX path like L2/facts.md")
    if rel.startswith("/"):
        raise PathRefused(f"memory path {rel!r} is absolute; use a path relative to the store, like L2/facts.md")
    parts = rel.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise PathRefused(
                f"memory path {rel!r} has an empty, '.' or '..' part; use a plain relative path like L2/facts.md"
            )
    return rel


def resolve(tree: Path, rel: str, plain: Optional[set[str]] = None) -> str:
    """Resolve symlinks of `rel` inside `tree`; return the real relative path, refusing any escape.

    `plain` caches folders of `tree` already seen not to be symlinks (the tree is immutable while used),
    so resolving many paths costs one lstat per new folder rather than a realpath each."""
    rel = check_rel(rel)
    parts = rel.split("/")
    for i in range(1, len(parts) + 1):
        prefix = "/".join(parts[:i])
        if plain is not None and prefix in plain:
            continue
        try:
            mode = os.lstat(os.path.join(tree, prefix)).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return rel  # nothing below a missing entry (or a file) can be a symlink
        if stat.S_ISLNK(mode) and not is_pool_link(os.path.join(tree, prefix)):
            return _resolve_links(tree, rel)
        if plain is not None and i < len(parts):
            plain.add(prefix)
    return rel


def _resolve_links(tree: Path, rel: str) -> str:
    """Follow the symlinks of `rel` one part at a time against the tree's own paths (a folder reached through
    a pooled directory has the generation's parent, not the pool's)."""
    todo, done, followed = rel.split("/")[::-1], [], 0
    while todo:
        part = todo.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if not done:
                raise _escape(rel)
            done.pop()
            continue
        path = os.path.join(tree, *done, part)
        if not os.path.islink(path) or is_pool_link(path):
            done.append(part)
            continue
        followed += 1
        if followed > MAX_LINKS:
            raise PathRefused(f"memory path {rel!r} passes through too many symlinks (a loop?); refused")
        target = os.readlink(path)
        if target.startswith("/"):
            real_tree = os.path.realpath(tree)
            if not target.startswith(real_tree + os.sep):
                raise _escape(rel)
            target, done = os.path.relpath(target, real_tree), []
        todo.extend(target.split("/")[::-1])
    if not done:
        raise _escape(rel)
    return "/".join(done)


def _escape(rel: str) -> PathRefused:
    return PathRefused(f"memory path {rel!r} leads outside the store through a symlink; refused")
