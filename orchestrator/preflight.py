"""Checks a fan-out passes before Ray starts, so a broken store, runs dir or endpoint is one line
now instead of N failed tasks later: the memory store is healthy, the runs dir is writable, and every
model endpoint answers one `GET /models` (any HTTP reply counts; `--no-preflight` skips this probe).
Numbers (nan, inf, negatives) are already refused by the tasks and settings schemas.
"""
from __future__ import annotations

import inspect
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Optional

from worker.endpoint import invalid_url, probe, unreachable

if TYPE_CHECKING:
    from configs import Settings
    from worker.models import ModelConfig

MIN_FREE_BYTES = 1_000_000  # less than this free in the runs dir: the disk is as good as full


class PreflightError(ValueError):
    """One line: what is wrong, where, and the fix."""


def preflight(settings: Settings, models: dict[Optional[str], ModelConfig], runs_dir: Path, *, probe_endpoints: bool = True,
              check_memory: bool = True) -> None:
    if check_memory:
        check_memory_store(settings)
    if probe_endpoints:
        check_endpoints(models.items())
    check_runs_dir(runs_dir)


def check_memory_store(settings: Settings) -> None:
    from memory_shared import MemoryStore, MemoryStoreError

    root = settings.memory_root
    try:
        if not MemoryStore.exists(root):
            return  # the run creates it
        store = MemoryStore(root, l1_max_lines=settings.memory.l1_max_lines, l1_max_chars=settings.memory.l1_max_chars)
        quick = "quick" in inspect.signature(store.verify).parameters
        problems = store.verify(quick=True) if quick else store.verify()
    except MemoryStoreError as exc:
        problems = [str(exc)]
    except OSError as exc:
        problems = [f"{exc.filename or root}: {exc.strerror}"]
    if problems:
        raise PreflightError(f"memory store at {root} is not healthy: {problems[0]}; see the fix with "
                             "`ga memory repair --dry-run`, then `ga memory repair` (nothing was started)")


def check_runs_dir(runs_dir: Path) -> None:
    """Write a probe file there; directories made for the probe are removed again (the run makes its own)."""
    runs_dir = Path(runs_dir)
    created = [p for p in [runs_dir, *runs_dir.parents] if not p.exists()]
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
        handle, probe = tempfile.mkstemp(prefix=".ga-probe-", dir=runs_dir)
        try:
            os.write(handle, b"probe")
            os.fsync(handle)
        finally:
            os.close(handle)
            os.unlink(probe)
        stat = os.statvfs(runs_dir)
        if stat.f_bavail * stat.f_frsize < MIN_FREE_BYTES:
            raise OSError(28, f"less than {MIN_FREE_BYTES:,} bytes free")
    except OSError as exc:
        raise PreflightError(f"runs dir {runs_dir} is not writable ({exc.strerror or exc}); pass --out DIR or set "
                             "fanout.runs_dir to a writable directory (nothing was started)") from None
    finally:
        for path in created:  # deepest first
            try:
                path.rmdir()
            except OSError:
                pass


def check_endpoints(models: Iterable[tuple[Optional[str], ModelConfig]]) -> None:
    """Probe each distinct base_url once. A model whose endpoint is down is an error unless it can fail
    over to a fallback that answers, or is itself only the backup of a model that answers."""
    configs = dict(models)
    down: dict[str, str] = {}
    for base in dict.fromkeys(_base(config) for config in configs.values()):
        if base:
            reason = _probe(base, configs)
            if reason:
                down[base] = reason
    for name, config in configs.items():
        base = _base(config)
        if base not in down:
            continue
        fallbacks = [configs[f] for f in getattr(config, "fallbacks", None) or () if f in configs]
        if any(_base(f) not in down for f in fallbacks):
            continue
        if any(name in (getattr(other, "fallbacks", None) or ()) and _base(other) not in down
               for other in configs.values()):
            continue
        raise PreflightError(unreachable(name, base, down[base]))


def _base(config: ModelConfig) -> str:
    return str(getattr(config, "base_url", "") or "")


def _probe(base: str, configs: dict[Optional[str], ModelConfig]) -> Optional[str]:
    try:
        return probe(base)
    except ValueError as exc:  # http.client.InvalidURL, unknown scheme
        name = next((n for n, c in configs.items() if _base(c) == base), None)
        raise PreflightError(invalid_url(name, base, exc)) from None
