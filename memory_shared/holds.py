"""Flock-held entries: pins (files) that keep a generation from gc, and staging dirs of live commits.

An entry is live while its creator holds an flock on it; the kernel drops the flock when the creator
dies, so a crashed process leaves only abandoned entries that the next scan removes. Entries are created
under a shared flock on `pins.lock` and scanned under an exclusive one, so a scan never sees an entry
between its creation and its flock.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from .fsutil import is_abandoned, lock_fd, remove_tree, unique


class Hold:
    """An flock'd file or directory; release() removes it and drops the flock."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: Optional[int] = fd
        self._owner = os.getpid()  # a forked child must not remove its parent's entry

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            if os.getpid() != self._owner:
                pass
            elif self.path.is_dir() and not self.path.is_symlink():
                remove_tree(self.path)
            else:
                self.path.unlink(missing_ok=True)
        finally:
            os.close(self._fd)
            self._fd = None


def create_pin(pins_dir: Path, generation: int) -> Hold:
    path = pins_dir / f"{generation}-{unique()}"
    return Hold(path, lock_fd(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL))


def create_dir(parent: Path, suffix: str = "") -> Hold:
    path = parent / unique(suffix)
    os.mkdir(path)
    return Hold(path, lock_fd(path, os.O_RDONLY | os.O_DIRECTORY))


def live_pins(pins_dir: Path, remove_stale: bool) -> set[int]:
    """Generations pinned by a live holder; stale pin files are deleted when `remove_stale`."""
    pinned: set[int] = set()
    if not pins_dir.is_dir():
        return pinned
    for entry in os.scandir(pins_dir):
        generation = entry.name.split("-", 1)[0]
        if is_abandoned(entry.path):
            if remove_stale:
                Path(entry.path).unlink(missing_ok=True)
        elif generation.isdigit():
            pinned.add(int(generation))
    return pinned


def abandoned_entries(parent: Path) -> list[Path]:
    if not parent.is_dir():
        return []
    return [Path(e.path) for e in os.scandir(parent) if is_abandoned(e.path)]
