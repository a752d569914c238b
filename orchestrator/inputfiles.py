"""A task's inputs, read for its workdir: opened once, then read from that handle, never by name again.

A nested run's inputs were checked by the parent (orchestrator/fanout.py `_refuse_unseen`) in a directory its
task's script can write, so the script could swap one for a symlink after the check: nothing on their path is
followed (the spec resolved the directory part already), and the file is read only if the task's sandbox could
read it itself. ga may run as root, but root in a sandbox has no capabilities (bubblewrap's --cap-drop ALL), so
there the permission bits decide: each directory on the path must let this uid (or one of its groups) search
it, and the file must let it read; checked on the handles opened, so a swap after the check changes nothing.
A top-level task's inputs are the user's, named in the tasks file: a symlink there is the user's and is
followed, as it always was. Either way only a regular file is read, and at most INPUT_CAP bytes of it.
"""
from __future__ import annotations

import os
import stat
from contextlib import closing
from pathlib import Path
from typing import Iterator

from memory_shared import fsutil

INPUT_CAP = 1 << 30  # bytes of one input file; a larger one is refused, never cut
_CHUNK = 1 << 20
UNSAFE = ("input {path}: a symbolic link on its path, or not a regular file; ga copies inputs without following "
          "links (give the file itself)")
UNREADABLE = ("input {path}: the task's sandbox could not read it itself (its permission bits); a nested run gets "
              "only what its task can read")


class InputError(OSError):
    """An input that cannot be copied safely; one line naming it and the fix."""


def open_input(root: fsutil.Folder, path: str, follow_link: bool) -> int:
    """An fd of the regular file `path` (absolute), opened through `root` (the directory "/" held open): no
    component followed if a symlink, except the file itself when `follow_link`. Without `follow_link` (a nested
    run's input) only what the task's sandbox could read itself (see the module doc)."""
    relpath = Path(path).relative_to("/")
    try:
        if not follow_link:
            fd = _open_as_sandbox(root.fd, relpath, path)
        else:
            with closing(root.sub(relpath.parent)) as folder:  # the directory part: the plan resolved it
                fd = os.open(relpath.name, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=folder.fd)
    except fsutil.Unsafe:
        raise InputError(UNSAFE.format(path=path)) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(UNSAFE.format(path=path))
    os.set_blocking(fd, True)
    return fd


def sandbox_may(info: os.stat_result, want: int) -> bool:
    """Whether this process without capabilities (as in its sandbox) may `want` (R_OK, X_OK) by the mode bits."""
    if info.st_uid == os.geteuid():
        bits = info.st_mode >> 6
    elif info.st_gid == os.getegid() or info.st_gid in os.getgroups():
        bits = info.st_mode >> 3
    else:
        bits = info.st_mode
    return bits & want == want


def _open_as_sandbox(root_fd: int, relpath: Path, path: str) -> int:
    """Walk `relpath` from `root_fd` one directory at a time (no link followed), checking each handle."""
    fd = os.dup(root_fd)
    try:
        for name in relpath.parts[:-1]:
            if not sandbox_may(os.fstat(fd), os.X_OK):
                raise InputError(UNREADABLE.format(path=path))
            try:
                child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError:
                raise InputError(UNSAFE.format(path=path)) from None
            os.close(fd)
            fd = child
        if not sandbox_may(os.fstat(fd), os.X_OK):
            raise InputError(UNREADABLE.format(path=path))
        try:
            file = os.open(relpath.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=fd)
        except OSError:
            raise InputError(UNSAFE.format(path=path)) from None
    finally:
        os.close(fd)
    if not sandbox_may(os.fstat(file), os.R_OK):
        os.close(file)
        raise InputError(UNREADABLE.format(path=path))
    return file


def copy_input(root: fsutil.Folder, path: str, dest: Path, follow_link: bool) -> None:
    """Copy the input `path` to the new file `dest` (which must not exist), with its mode and times."""
    fd = open_input(root, path, follow_link)
    try:
        info = os.fstat(fd)
        out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            for chunk in _chunks(fd, path):
                fsutil.write_all(out, chunk)
            os.fchmod(out, stat.S_IMODE(info.st_mode))  # as shutil.copy2 did: mode and times
            os.utime(out, ns=(info.st_atime_ns, info.st_mtime_ns))
        finally:
            os.close(out)
    finally:
        os.close(fd)


def read_input(root: fsutil.Folder, path: str, follow_link: bool) -> bytes:
    """The whole input `path` (sent with the job where the actor shares no disk with the driver)."""
    fd = open_input(root, path, follow_link)
    try:
        return b"".join(_chunks(fd, path))
    finally:
        os.close(fd)


def _chunks(fd: int, path: str) -> Iterator[bytes]:
    """The file's bytes; InputError past INPUT_CAP (told by its size, or as it grows while read)."""
    if os.fstat(fd).st_size > INPUT_CAP:
        raise _too_large(path)
    read = 0
    while chunk := os.read(fd, _CHUNK):
        read += len(chunk)
        if read > INPUT_CAP:
            raise _too_large(path)
        yield chunk


def _too_large(path: str) -> InputError:
    return InputError(f"input {path}: larger than {INPUT_CAP >> 20} MB; split it, or give the task its path to read "
                      "instead")
