"""memory_shared.groupsync's `soon`: files asked for without waiting are flushed by the window's timer when nobody
waits, with the next batch someone waits on when that comes first, and at once when their own `wait` hurries them."""
from __future__ import annotations

import time
from pathlib import Path
from typing import IO

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


def test_a_soon_batch_rides_along_the_next_waited_flush(tmp_path: Path) -> None:
    group = GroupSync()
    with _open(tmp_path / "a") as deferred, _open(tmp_path / "b") as waited:
        pending = group.soon(deferred.fileno(), within=3600)
        assert not pending.done()
        group.durable(waited.fileno())
        assert pending.done(), "a durable() call flushed its batch without the deferred file in it"


def test_waiting_on_a_soon_batch_hurries_it(tmp_path: Path) -> None:
    group = GroupSync()
    with _open(tmp_path / "a") as handle:
        pending = group.soon(handle.fileno(), within=3600)
        pending.wait()  # would block for an hour if waiting did not flush the batch
        assert pending.done()
