"""Small POSIX file-system helpers: fsync, new read-only files, atomic replace, flock, tree linking."""
from __future__ import annotations

import fcntl
import os
import secrets
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Optional

READ_ONLY = 0o444


def unique(prefix: str = "") -> str:
    return f"{prefix}{os.getpid()}-{secrets.token_hex(6)}"


def fsync_dir(path: Path | str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_new(path: Path | str, data: bytes, mode: int = READ_ONLY, midway: Optional[Callable[[], None]] = None) -> None:
    """Create a file that must not exist yet, write it fully and fsync it. `midway` runs after half is written."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        view = memoryview(data)
        if midway is not None:
            half = len(view) // 2
            _write_all(fd, view[:half])
            midway()
            view = view[half:]
        _write_all(fd, view)
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, view: memoryview) -> None:
    while view:
        view = view[os.write(fd, view):]


def atomic_replace(path: Path, data: bytes, before_rename: Optional[Callable[[], None]] = None) -> None:
    """Write a temp file, fsync, rename over `path`, fsync the directory."""
    tmp = path.with_name(f".{path.name}.tmp-{unique()}")
    write_new(tmp, data, 0o644)
    if before_rename is not None:
        before_rename()
    os.replace(tmp, path)
    fsync_dir(path.parent)


@contextmanager
def flocked(path: Path, shared: bool = False) -> Iterator[None]:
    """Hold an flock on `path` (created if missing). The kernel drops it if the holder dies."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def lock_fd(path: Path | str, flags: int = os.O_RDONLY) -> int:
    """Open `path` and take an exclusive flock on it; the caller closes the fd to release it."""
    fd = os.open(path, flags)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def is_abandoned(path: Path | str) -> bool:
    """True if nobody holds an flock on `path` (its owner released it or died)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def link_tree(src: str, dst: str, midway: Optional[Callable[[], None]] = None) -> list[str]:
    """Recreate the directories of `src` under the existing `dst` and hard-link every other entry.

    Returns the directories created (to fsync). `midway` runs once, after the first linked file.
    """
    created = [dst]
    stack = [(src, dst)]
    while stack:
        s, d = stack.pop()
        with os.scandir(s) as entries:
            for entry in entries:
                target = os.path.join(d, entry.name)
                if entry.is_dir(follow_symlinks=False):
                    os.mkdir(target)
                    created.append(target)
                    stack.append((entry.path, target))
                else:
                    os.link(entry.path, target, follow_symlinks=False)
                    if midway is not None:
                        midway()
                        midway = None
    return created


def remove_tree(path: Path | str) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
