"""Where a tool may read and write: the worker's directory is its root; `memory/` names the memory tier."""
from __future__ import annotations

import os
from contextlib import closing
from pathlib import Path, PurePosixPath
from typing import Iterable, Optional

from memory_shared import fsutil

MEMORY_PREFIX = "memory"


class PathError(ValueError):
    """A path the tool refuses; str() is one line saying why and what to do instead."""


def memory_rel(path: str) -> Optional[str]:
    """'memory/L2/facts.md' -> 'L2/facts.md' ('memory' alone -> ''); None if the path is not in the memory tier."""
    text = path.replace("\\", "/").strip()
    while text.startswith("./"):
        text = text[2:]
    parts = PurePosixPath(text).parts if text else ()
    if not parts or parts[0] != MEMORY_PREFIX:
        return None
    rest = parts[1:]
    if ".." in rest:
        raise PathError(f"{path}: '..' is not allowed in memory paths; name the file as memory/<layer>/<file>")
    return "/".join(p for p in rest if p != ".")


def resolve_read(path: str, workdir: Path, allow_read: Iterable[Path] = (), allow_write: Iterable[Path] = ()) -> Path:
    """The real path to read, inside the workdir or a configured path; PathError otherwise."""
    return _resolve(path, workdir, [*allow_read, *allow_write], "read", "worker.allow_read")


def resolve_write(path: str, workdir: Path, allow_write: Iterable[Path] = ()) -> Path:
    """The real path to write, inside the workdir or worker.allow_write; PathError otherwise."""
    return _resolve(path, workdir, list(allow_write), "write", "worker.allow_write")


def _resolve(path: str, workdir: Path, allowed: list[Path], verb: str, setting: str) -> Path:
    if not path or not path.strip():
        raise PathError("empty path; give a file path relative to the worker's directory")
    root = workdir.resolve()
    raw = Path(os.path.expanduser(path.strip()))
    if not raw.is_absolute():
        lexical = Path(os.path.normpath(root / raw))
        if not _inside(lexical, root):
            raise PathError(f"{path}: '..' leaves the worker's directory; use a path inside it"
                            f" (or an absolute path listed in {setting})")
        raw = lexical
    real = raw.resolve()  # follows every symlink, also of missing leaves' parents
    roots = [root, *(Path(os.path.expanduser(p)).resolve() for p in allowed)]
    if any(_inside(real, r) for r in roots):
        return real
    how = "resolves through a symlink to" if real != Path(os.path.normpath(raw)) else "is"
    raise PathError(f"{path}: {how} {real}, outside the worker's directory; {verb} refused"
                    f" (add the directory to {setting} to allow it)")


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def plain_rel(path: str) -> Optional[str]:
    """`path` normalized, when it plainly names a path below the worker's directory (relative, not leaving it by
    '..', no '~'); None when it needs the full check of resolve_read/resolve_write."""
    text = path.strip()
    if not text or text.startswith(("/", "~")):
        return None
    rel = os.path.normpath(text)
    if rel in (".", "..") or rel.startswith("../"):
        return None
    return rel


def open_plain(root_fd: int, rel: str, flags: int) -> Optional[int]:
    """An fd of the regular file `rel` (from plain_rel) below the directory fd `root_fd`, opened one component at
    a time without following a symlink; None when that walk does not reach it (a symlink or a missing directory on
    the way, not a regular file...): then resolve and open_checked decide, as for any path."""
    try:
        return fsutil.open_file(root_fd, rel, flags, linked_ok=True)
    except OSError:  # fsutil.Unsafe included
        return None


def open_checked(real: Path, workdir: Path, allowed: Iterable[Path], flags: int = os.O_RDONLY,
                 make_parents: bool = False) -> int:
    """An fd of `real` (a path resolve_read or resolve_write returned), opened again from the root it lies in one
    component at a time without following a symlink: the task's background processes cannot swap a directory
    for a symlink between the check and the open. Regular files only (a FIFO cannot hang the tool)."""
    roots = [workdir.resolve(), *(Path(os.path.expanduser(p)).resolve() for p in allowed)]
    root = next((r for r in roots if _inside(real, r)), None)
    if root is None or real == root:
        raise PathError(f"{real}: not a file inside the worker's directory")
    rel = real.relative_to(root)
    with closing(fsutil.Folder(root)) as top:
        if make_parents and rel.parent != Path("."):
            os.close(fsutil.open_dir(top.fd, rel.parent, create=True))
        return fsutil.open_file(top.fd, rel, flags, linked_ok=True)
