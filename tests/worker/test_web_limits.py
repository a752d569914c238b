"""The browser runs under code_run's `sandbox.limits` (worker/web/launch.py): a page is code the model steers, and
before, its Chromium had none of them (a page could take the machine's memory and CPU). Real Chromium, real
bubblewrap: the limits are read back from the kernel for every process of the task's browser.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from configs import load_settings
from web_fixtures.server import SITE_NETWORK, session
from worker.tools import REGISTRY, ToolContext

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
MEMORY, CPU, FILE_SIZE, PROCESSES = 3 << 30, 300, 256 << 20, 200


def limit(pid: int, name: str) -> str:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith(name):
            return line[len(name):].split()[0]
    raise AssertionError(f"no {name} in /proc/{pid}/limits")


def cgroup_file(pid: int, name: str) -> Path | None:
    """`name` in the cgroup (v2, or the v1 hierarchy holding it) of process `pid`, where that cgroup is ga's."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "/ga-" not in path:
            continue
        for base in ([Path("/sys/fs/cgroup", c) for c in controllers.split(",")] if controllers
                     else [Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")]):
            if (base / path.lstrip("/") / name).exists():
                return base / path.lstrip("/") / name
    return None


def test_every_browser_process_runs_under_the_sandbox_limits(tmp_path: Path) -> None:
    settings = load_settings({"home": str(tmp_path / "ga-home"), **SITE_NETWORK,
                              "sandbox.limits": {"memory": MEMORY, "cpu_seconds": CPU, "file_size": FILE_SIZE,
                                                 "processes": PROCESSES}})
    (tmp_path / "work").mkdir()
    ctx = ToolContext("limits", tmp_path / "work", settings, None)
    folders: list[Path] = []
    try:
        spec = REGISTRY["web_execute_js"]
        said = spec.run(ctx, spec.args.model_validate({"script": "1 + 1"})).output
        assert said.startswith("value: 2"), said
        pids = session(ctx).processes()
        assert len(pids) >= 3, pids  # bubblewrap, Chromium, its helpers
        for pid in pids:
            assert limit(pid, "Max data size") == str(MEMORY), pid
            assert limit(pid, "Max cpu time") == str(CPU), pid
            assert limit(pid, "Max file size") == str(FILE_SIZE), pid
        memory = cgroup_file(pids[0], "memory.max") or cgroup_file(pids[0], "memory.limit_in_bytes")
        processes = cgroup_file(pids[0], "pids.max")
        made = processes or memory
        if made is not None:  # where ga can make cgroups: the whole browser in one
            assert memory is None or memory.read_text().strip() == str(MEMORY), memory
            assert processes is None or processes.read_text().strip() == str(PROCESSES), processes
            assert all(cgroup_file(pid, made.name) == made for pid in pids)
            folders = [f.parent for f in (memory, processes) if f is not None]
    finally:
        ctx.close()
    assert not [f for f in folders if f.exists()], folders  # the browser's cgroups go with it
