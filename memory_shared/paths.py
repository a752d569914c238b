"""Path safety: only plain relative POSIX paths, and nothing that resolves outside a tree."""
from __future__ import annotations

import os
from pathlib import Path

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


def resolve(tree: Path, rel: str) -> str:
    """Resolve symlinks of `rel` inside `tree`; return the real relative path, refusing any escape."""
    rel = check_rel(rel)
    real_tree = os.path.realpath(tree)
    real = os.path.realpath(os.path.join(real_tree, rel))
    if real == real_tree or not real.startswith(real_tree + os.sep):
        raise PathRefused(f"memory path {rel!r} leads outside the store through a symlink; refused")
    return os.path.relpath(real, real_tree).replace(os.sep, "/")
