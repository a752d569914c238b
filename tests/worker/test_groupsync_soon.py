"""memory_shared.groupsync's `soon`: files asked for without waiting are flushed by the window's timer when nobody
waits, and at once when their own `wait` hurries them; a batch's files are flushed each (fdatasync), never the
whole file system."""
from __future__ import annotations

import os
import time
from contextlib import ExitStack
from pathlib import Path
from typing import IO

import pytest

from memory_shared.groupsync import GroupSync

PATIENCE = 60.0  # generous: the machine may be loaded; the window asked for is far shorter


def _open(path: Path) -> IO[str]:
    handle = path.open("a")
    handle.write("line\n")
    handle.flush()
    return handle


def test_a_soon_batch_is_flushed_by_its_timer_when_nobody_waits(tmp_path: Path) -> None:
    group = GroupSync()
    with _open(tmp_path / "a") as handle:
        pending = group.soon(handle.fileno(), within=0.05)
        deadline = time.monotonic() + PATIENCE
        while not pending.done() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert pending.done(), "the window passed and nobody flushed the batch"


def test_a_batch_flushes_its_own_files_and_says_which_failed(tmp_path: Path) -> None:
    """A descriptor that is not a file (a pipe's fdatasync fails with EINVAL) fails its batch's callers: proof that
    each file of a large batch is flushed by its own call (a syncfs of the disk would have succeeded)."""
    group = GroupSync()
    read_end, write_end = os.pipe()
    try:
        with ExitStack() as files:
            handles = [files.enter_context(_open(tmp_path / name)) for name in "abcde"]
            with pytest.raises(OSError, match="flushing a batch of 6 files"):
                group.durable(*(handle.fileno() for handle in handles), write_end)
            group.durable(*(handle.fileno() for handle in handles))  # the next batch is not tainted by that one
    finally:
        os.close(read_end)
        os.close(write_end)


def test_waiting_on_a_soon_batch_hurries_it(tmp_path: Path) -> None:
    group = GroupSync()
    with _open(tmp_path / "a") as handle:
        pending = group.soon(handle.fileno(), within=3600)
        pending.wait()  # would block for an hour if waiting did not flush the batch
        assert pending.done()
