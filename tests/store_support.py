"""What the store's tests share: `ga memory ARGS` as a real process, a shell step done to the store as a process
that can write it would, and every published generation's files read back."""
from __future__ import annotations

import os
import subprocess
from functools import partial
from pathlib import Path

from tests.ga_support import run_ga

ga_memory = partial(run_ga, "memory")  # `ga memory ARGS`, a real process on the test's GA_HOME


def sh(script: str, cwd: Path) -> None:
    subprocess.run(["sh", "-c", script], cwd=cwd, check=True, timeout=30)


def published(root: Path) -> dict[int, dict[str, bytes]]:
    """Every generation's files (manifest files aside) and their bytes, read through the shared folders."""
    state = {}
    for gen in sorted((root / "generations").iterdir(), key=lambda p: int(p.name)):
        files = (Path(folder, name) for folder, _, names in os.walk(gen, followlinks=True) for name in names)
        state[int(gen.name)] = {str(f.relative_to(gen)): f.read_bytes() for f in files
                                if f.is_file() and not f.name.startswith("MANIFEST")}
    return state
