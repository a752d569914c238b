"""A run's or a session's ga.log: its info lines while the run (or the session's exchange) lasts; the lines are
bound to the run by its directory's name (configs.logs), so two runs in one process keep their own.

`ga run` keeps its run directory where the task's scripts could write (with the sandbox off): the file is opened
as History opens its own (memory_shared.fsutil: no symlink followed, regular files only); one that cannot be is
skipped with a warning and the run goes on.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

import structlog

from configs.logs import LOG_FILE, log_file
from memory_shared import fsutil


@contextmanager
def run_log(run_dir: Path) -> Iterator[Optional[Path]]:
    """Log to `run_dir`/ga.log while the block runs; yields its path, or None when it was refused."""
    path = Path(run_dir) / LOG_FILE
    try:
        folder = fsutil.Folder(path.parent, create=True)
        try:
            fd = folder.open(path.name, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        finally:
            folder.close()
    except OSError as exc:
        structlog.get_logger("ga.log").warning("log_file_skipped", path=str(path), problem=str(exc))
        yield None
        return
    with os.fdopen(fd, "a", encoding="utf-8") as handle, log_file(handle, run=path.parent.name):
        yield path
