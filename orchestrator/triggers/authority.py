"""What a daemon runs with the person's rights on every cycle (a reflect trigger's Python, a schedule's jobs file,
each reloaded when it changes) is authority: it must not lie where the daemon's own tasks may write, or a task's
next cycle runs as the person, outside any sandbox, with the model key. Where tasks write is their policy's
(worker/policy.py: the working directory, `sandbox.writable`, `worker.allow_write`)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Optional

from configs import Settings
from worker.policy import Environment


def writable_by_tasks(settings: Settings, workdirs: Iterable[Optional[Path]]) -> list[Path]:
    """The real paths the tasks run in `workdirs` (None: the current directory) may write."""
    roots: list[Path] = []
    for workdir in workdirs:
        policy = Environment.for_task(settings, Path(workdir) if workdir else Path.cwd())
        roots += [root for root in policy.writable if root not in roots]
    return roots


def writable_problem(path: Path, what: str, roots: Iterable[Path]) -> Optional[str]:
    """One line when `path` lies where the tasks may write (`roots`), else None."""
    real = Path(os.path.realpath(path))
    for root in roots:
        if real.is_relative_to(root):
            return (f"{path}: the {what} lies in {root}, which its tasks may write (their working directory, "
                    "sandbox.writable or worker.allow_write), and ga runs it with your rights; move it outside "
                    "(e.g. ~/.config/ga/) or run the tasks elsewhere (--workdir)")
    return None
