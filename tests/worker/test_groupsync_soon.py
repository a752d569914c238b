"""memory_shared.groupsync's `soon`: files asked for without waiting are flushed by the window's timer when nobody
waits, along with a batch someone waits on when that batch is one syncfs anyway, and at once when their own
`wait` hurries them."""
from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path
from typing import IO

from memory_shared.groupsync import SYNCFS_FROM, GroupSync

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


def test_a_soon_batch_rides_along_a_waited_batch_that_is_one_syncfs_anyway(tmp_path: Path) -> None:
    group = GroupSync()
    with ExitStack() as files:
        deferred, *waited = [files.enter_context(_open(tmp_path / name)) for name in "abcd"]
        pending = group.soon(deferred.fileno(), within=3600)
        assert not pending.done()
        group.durable(*(handle.fileno() for handle in waited))  # with the deferred file: SYNCFS_FROM files
        assert SYNCFS_FROM <= 1 + len(waited)
        assert pending.done(), "a syncfs batch was flushed without taking the deferred file along"


def test_waiting_on_a_soon_batch_hurries_it(tmp_path: Path) -> None:
    group = GroupSync()
    with _open(tmp_path / "a") as handle:
        pending = group.soon(handle.fileno(), within=3600)
        pending.wait()  # would block for an hour if waiting did not flush the batch
        assert pending.done()
