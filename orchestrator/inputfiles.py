"""A task's inputs, read for its workdir: opened once, then read from that handle, never by name again.

A nested run's inputs were checked by the parent (orchestrator/fanout.py `_refuse_unseen`) in a directory its
task's script can write, so the script could swap one for a symlink after the check: nothing on their path is
followed (the spec resolved the directory part already). A top-level task's inputs are the user's, named in
the tasks file: a symlink there is the user's and is followed, as it always was. Either way only a regular
file is read, and at most INPUT_CAP bytes of it.
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


class InputError(OSError):
    """An input that cannot be copied safely; one line naming it and the fix."""


def open_input(root: fsutil.Folder, path: str, follow_link: bool) -> int:
    """An fd of the regular file `path` (absolute), opened through `root` (the directory "/" held open):
    no component followed if a symlink, except the file itself when `follow_link`."""
    relpath = Path(path).relative_to("/")
    try:
        if not follow_link:
            return root.open(relpath)
        with closing(root.sub(relpath.parent)) as folder:  # the directory part: the plan resolved it
            fd = os.open(relpath.name, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=folder.fd)
    except fsutil.Unsafe:
        raise InputError(UNSAFE.format(path=path)) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(UNSAFE.format(path=path))
    os.set_blocking(fd, True)
    return fd


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
