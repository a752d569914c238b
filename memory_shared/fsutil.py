"""Small POSIX file-system helpers: fsync, new read-only files, atomic replace, flock, tree removal, and
files inside a directory hostile code can write (no symlink followed, regular files only, reads capped)."""
from __future__ import annotations

import errno
import fcntl
import os
import secrets
import shutil
import stat
import weakref
from contextlib import closing, contextmanager, suppress
from pathlib import Path
from typing import Callable, Iterator, Optional, TypeVar

T = TypeVar("T")

READ_ONLY = 0o444
PIECE = 1 << 16  # what _pread asks for past the size the file had when it started


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
            write_all(fd, view[:half])
            midway()
            view = view[half:]
        write_all(fd, view)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
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
    _replace_with(os.link, source, Path(path))


def _replace_with(make: Callable[[T, Path], None], what: T, path: Path) -> None:
    """`make(what, tmp)` beside `path`, then rename it over `path` and fsync the directory."""
    tmp = path.with_name(f".{path.name}.tmp-{unique()}")
    make(what, tmp)
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
    shutil.rmtree(path, ignore_errors=True)


# ---- inside a directory hostile code can write (a task's workdir, a run directory under it) ----
# Every name is opened relative to a directory fd, one component at a time, never following a symlink;
# only regular files are read or written, reads never block on a FIFO, and a read takes at most a cap.

class Unsafe(OSError):
    """A path where ga writes (a task's directory, a run's, the memory store) that it refuses to touch: a symlink,
    a FIFO, a device, a hard link."""


_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


def _refusal(name: str, exc: OSError) -> OSError:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        return Unsafe(f"{name}: a symbolic link or not a directory; ga never follows links where it "
                      "writes (remove it)")
    if exc.errno == errno.ENXIO:  # a FIFO opened to write with no reader
        return Unsafe(f"{name}: not a regular file; ga only writes regular files")
    return exc


def open_dir(dir_fd: Optional[int], relpath: Path | str, create: bool = False) -> int:
    """An fd of the directory `relpath` (relative to `dir_fd`; absolute or cwd-relative when it is None: a path
    ga chose itself, followed as given). Below `dir_fd` each component is opened with O_NOFOLLOW; `create`
    makes the missing ones."""
    if dir_fd is None:
        try:
            return os.open(relpath, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            if not create:
                raise
        Path(relpath).mkdir(parents=True, exist_ok=True)
        return os.open(relpath, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    fd = os.dup(dir_fd)
    try:
        for part in Path(relpath).parts:
            if part in ("/", ".."):
                raise Unsafe(f"{relpath}: must be a relative path below the directory ga writes")
            if create:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                raise _refusal(str(relpath), exc) from None
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_file(dir_fd: int, relpath: Path | str, flags: int = os.O_RDONLY, mode: int = 0o644, *,
              linked_ok: bool = False) -> int:
    """An fd of the regular file `relpath` below `dir_fd`, no component followed if a symlink; O_NONBLOCK so a
    FIFO cannot hang the open. Refuses (Unsafe) anything but a regular file, and (unless `linked_ok`) a file to
    write with other hard links (it could be someone else's file linked in); O_TRUNC applies only after the checks."""
    path = Path(relpath)
    parent = open_dir(dir_fd, path.parent) if path.parent != Path(".") else None
    try:
        try:
            fd = os.open(path.name, (flags & ~os.O_TRUNC) | _NOFOLLOW | os.O_NONBLOCK, mode,
                         dir_fd=dir_fd if parent is None else parent)
        except OSError as exc:
            raise _refusal(str(relpath), exc) from None
    finally:
        if parent is not None:
            os.close(parent)
    info = os.fstat(fd)
    writing = flags & (os.O_WRONLY | os.O_RDWR)
    problem = ("not a regular file" if not stat.S_ISREG(info.st_mode)
               else "a hard link to another file" if writing and info.st_nlink > 1 and not linked_ok else "")
    if problem:
        os.close(fd)
        raise Unsafe(f"{relpath}: {problem}; ga only touches regular files where it writes (remove it)")
    os.set_blocking(fd, True)  # O_NONBLOCK was for the open only: a script given this fd as stdout gets a plain one
    if flags & os.O_TRUNC:
        os.ftruncate(fd, 0)
    return fd


def read_ends(fd: int, size: int, keep: int) -> tuple[bytes, bytes]:
    """(head, tail) of the open file: whole as head when `size` <= `keep`, else keep//2 bytes from the start and
    the rest from the end; never more than `keep` bytes, however the file grows meanwhile."""
    if size <= keep:
        return _pread(fd, keep, 0), b""
    head = _pread(fd, keep // 2, 0)
    return head, _pread(fd, keep - len(head), size - (keep - len(head)))


def _pread(fd: int, count: int, offset: int) -> bytes:
    """At most `count` bytes from `offset`. os.pread allocates all it is asked for: a history read under a 1 GiB
    cap cost a 1 GiB allocation however small the file, so each piece asked for is what the file holds (a file
    that grew meanwhile: pieces of PIECE bytes), never more than `count`."""
    chunks: list[bytes] = []
    size = os.fstat(fd).st_size
    while count > 0:
        chunk = os.pread(fd, min(count, max(size - offset, PIECE)), offset)
        if not chunk:
            break
        chunks.append(chunk)
        count -= len(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def read_file(path: Path | str, cap: int) -> bytes:
    """At most `cap` bytes of the regular file `path` whose name (not its directory) hostile code could have
    replaced: a symlink or special file there is refused (Unsafe)."""
    path = Path(path)
    with closing(Folder(path.parent)) as folder:
        return folder.read(path.name, cap)


class Folder:
    """A directory held open by its fd: its files are reached through the fd (so renaming or replacing the
    directory's path later moves nothing ga writes), without following symlinks, regular files only."""

    def __init__(self, path: Path | str, create: bool = False, *, fd: Optional[int] = None):
        self.path = Path(path)
        self.fd = fd if fd is not None else open_dir(None, path, create)
        self._closer = weakref.finalize(self, os.close, self.fd)

    def close(self) -> None:
        self._closer()

    def sub(self, relpath: Path | str, create: bool = False) -> "Folder":
        return Folder(self.path / relpath, fd=open_dir(self.fd, relpath, create))

    def open(self, relpath: Path | str, flags: int = os.O_RDONLY, mode: int = 0o644) -> int:
        return open_file(self.fd, relpath, flags, mode)

    def create(self, name: str, flags: int = os.O_WRONLY, mode: int = 0o644) -> int:
        """A new file's fd (O_EXCL: FileExistsError if anything, a symlink included, has the name)."""
        return self.open(name, flags | os.O_CREAT | os.O_EXCL, mode)

    def read(self, relpath: Path | str, cap: int) -> bytes:
        """At most `cap` bytes from the start of the file."""
        fd = self.open(relpath)
        try:
            return _pread(fd, cap, 0)
        finally:
            os.close(fd)

    def replace(self, name: str, data: bytes, mode: int = 0o644) -> None:
        """Write a new temp file and rename it over `name` (a symlink there is replaced, never followed)."""
        tmp = f".{name}.tmp-{unique()}"
        fd = self.create(tmp, mode=mode)
        try:
            try:
                write_all(fd, data)
            finally:
                os.close(fd)
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            with suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=self.fd)
            raise


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
    _replace_with(os.symlink, text, Path(path))
