"""Path safety: only plain relative POSIX paths, and nothing that resolves outside a tree."""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Optional

from .errors import PathRefused


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
        if stat.S_ISLNK(mode):
            return _resolve_links(tree, rel)
        if plain is not None and i < len(parts):
            plain.add(prefix)
    return rel


def _resolve_links(tree: Path, rel: str) -> str:
    real_tree = os.path.realpath(tree)
    real = os.path.realpath(os.path.join(real_tree, rel))
    if real == real_tree or not real.startswith(real_tree + os.sep):
        raise PathRefused(f"memory path {rel!r} leads outside the store through a symlink; refused")
    return os.path.relpath(real, real_tree).replace(os.sep, "/")
