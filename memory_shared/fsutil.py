"""Small POSIX file-system helpers: fsync, new read-only files, atomic replace, flock, tree removal."""
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


def write_new(path: Path | str, data: bytes, mode: int = READ_ONLY, midway: Optional[Callable[[], None]] = None,
              sync: bool = True) -> None:
    """Create a file that must not exist yet, write it fully and fsync it (unless the caller syncs in bulk).
    `midway` runs after half is written."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        view = memoryview(data)
        if midway is not None:
            half = len(view) // 2
            _write_all(fd, view[:half])
            midway()
            view = view[half:]
        _write_all(fd, view)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, view: memoryview) -> None:
    while view:
        view = view[os.write(fd, view):]


def atomic_replace(path: Path, data: bytes, before_rename: Optional[Callable[[], None]] = None,
                   mode: int = 0o644, sync: bool = True) -> None:
    """Write a temp file, fsync, rename over `path`, fsync the directory (neither fsync unless `sync`: for
    files rebuilt from others after a power cut). A failure (a full disk) leaves `path` as it was and no
    temp file behind."""
    tmp = path.with_name(f".{path.name}.tmp-{unique()}")
    try:
        write_new(tmp, data, mode, sync=sync)
        if before_rename is not None:
            before_rename()
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if sync:
        fsync_dir(path.parent)


def atomic_link(source: Path | str, path: Path) -> None:
    """Make `path` a hard link to `source`, replacing whatever it was in one rename; fsync the directory."""
    tmp = path.with_name(f".{path.name}.tmp-{unique()}")
    os.link(source, tmp)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str, before_rename: Optional[Callable[[], None]] = None) -> None:
    """`atomic_replace` for UTF-8 text."""
    atomic_replace(path, text.encode("utf-8"), before_rename)


@contextmanager
def flocked(path: Path, shared: bool = False) -> Iterator[None]:
    """Hold an flock on `path` (created if missing). The kernel drops it if the holder dies."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class HeldElsewhere(RuntimeError):
    """Another live process holds a single-instance lock; `holder` is the pid it wrote."""

    def __init__(self, holder: str):
        super().__init__(f"held by pid {holder}")
        self.holder = holder


def hold(path: Path) -> int:
    """Take the single-instance lock on `path` (our pid written in it) and return its fd; closing the fd
    releases it. HeldElsewhere if another process holds it. The kernel drops the lock when its holder
    dies, so a crash never wedges it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise HeldElsewhere(holder) from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


@contextmanager
def single_instance(path: Path) -> Iterator[None]:
    """Hold `path`'s single-instance lock (see `hold`) for the block."""
    fd = hold(path)
    try:
        yield
    finally:
        os.close(fd)


def lock_fd(path: Path | str, flags: int = os.O_RDONLY, mode: int = 0o644) -> int:
    """Open `path` and take an exclusive flock on it; the caller closes the fd to release it."""
    fd = os.open(path, flags, mode)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise
    return fd


def is_held(fd: int) -> bool:
    """True if another open file holds an exclusive flock on the file behind `fd`. The probe is shared,
    so checkers never see each other as holders (it lasts until `fd` is closed)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    return False


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


def remove_tree(path: Path | str) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


@contextmanager
def flocked_readonly(path: Path, shared: bool = True) -> Iterator[None]:
    """Hold an flock on an existing `path` opened read-only (a check that must not create or change
    anything, and works on a read-only mount); shared by default, so checkers never block each other. A
    lock file that does not exist yet is held by nobody: the block runs without it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def atomic_symlink(text: str, path: Path | str) -> None:
    """Make `path` a symlink with `text`, replacing whatever it was in one rename; fsync the directory."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{unique()}")
    os.symlink(text, tmp)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
