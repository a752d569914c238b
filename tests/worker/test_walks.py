"""bench/walks.py runs and measures three walks; what each must hold is found the way the script finds it."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memory_shared import MemoryStore
from worker import Worker

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # three fresh processes, each running a worker or a fan-out under a profiler


def test_walks_prints_three_walks_within_their_windows():
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "walks.py"), "--json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    walks = json.loads(done.stdout)
    assert list(walks) == ["turn", "fanout", "commit"]
    for walk in walks.values():
        assert walk["count"] == len(walk["counted"]) > 0
        assert set(walk["counted"]) <= set(walk["modules"])
        assert not [m for m in walk["counted"] if m.startswith("configs")]
    entry = next(line.split('"')[1].split(":")[0] for line in (ROOT / "pyproject.toml").read_text().splitlines()
                 if line.startswith("ga ="))
    store_package = MemoryStore.__module__.split(".")[0]
    assert Worker.__module__ in walks["turn"]["counted"]  # the loop is on the stack when the request leaves
    assert walks["fanout"]["modules"][0].split(".")[0] == entry.split(".")[0]  # from the command line's entry
    assert Worker.__module__ in walks["fanout"]["counted"]  # the worker's run is one step of the fan-out ...
    assert len(walks["fanout"]["descended"]) > len(walks["fanout"]["modules"])  # ... not descended into
    assert walks["commit"]["counted"][0].split(".")[0] != store_package  # the worker's side hands the write over
    assert [m for m in walks["commit"]["counted"][1:] if m.split(".")[0] == store_package]
