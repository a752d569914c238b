"""Named fault points so tests can crash a writer at every step: the one fault-injection mechanism.

The store's commit steps are listed in POINTS; the L4 archive's are named `archive.<step>` and an
exploration cycle's `explore.<step>`. Arm a point with the environment (read at each check, so a
child process can be armed alone):
  GA_MEMORY_FAULT=<point>        the process SIGKILLs itself at that point
  GA_MEMORY_FAULT=<point>:<n>    ... at its n-th pass in this process
  GA_MEMORY_FAULT=<point>:block  it prints "FAULT <point> <pid>" to stderr and sleeps until killed
or set `hook` to a callable that receives every point name (in-process tests).
"""
from __future__ import annotations

import os
import signal
import sys
import time
from typing import Callable, Optional

POINTS = (
    "staging",     # staging dir created, nothing linked yet
    "linking",     # half of the base tree hard-linked into staging
    "writing",     # the first changed file half written
    "locked",      # commit lock held, nothing published
    "rebased",     # staging matches the new HEAD, about to publish
    "published",   # staging renamed into generations/<n>, no log line yet
    "logging",     # half of the log line written
    "logged",      # log line complete, HEAD not yet replaced
    "head",        # new HEAD written to its temp file, not yet renamed
    "committed",   # HEAD replaced, commit lock still held
    "gc",          # gc moved generations out of generations/, not yet deleted
)

ENV = "GA_MEMORY_FAULT"
hook: Optional[Callable[[str], None]] = None
_passes: dict[str, int] = {}


def armed(name: str) -> bool:
    spec = os.environ.get(ENV)
    return bool(spec) and spec.split(":", 1)[0] == name


def point(name: str) -> None:
    """Called by a writer (store, archive, exploration) at each named step."""
    if hook is not None:
        hook(name)
    if not armed(name):
        return
    when = os.environ[ENV].partition(":")[2]
    if when.isdigit():
        _passes[name] = _passes.get(name, 0) + 1
        if _passes[name] != int(when):
            return
    elif when == "block":
        sys.stderr.write(f"FAULT {name} {os.getpid()}\n")
        sys.stderr.flush()
        while True:
            time.sleep(60)
    os.kill(os.getpid(), signal.SIGKILL)
