"""ga's own re-run of a script (worker/rerun.py: the memory gate's and the exploration verifier's) acts for a task,
whose script it runs and whose refusal quotes its output: it hides what every sandbox hides. It ran with the
sandbox's home set to its own fresh folder, so the person's ~/.ssh and GA_HOME's sessions were readable there.

Real bubblewrap; the home and GA_HOME under /var/tmp (the sandbox's private /tmp would hide a place under /tmp).
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from configs import load_settings
from worker.rerun import rerun

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
KEY = "FAKE-SSH-KEY-rerun-4411"
SESSION = "FAKE-SESSION-rerun-4412"


@pytest.fixture
def place(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="ga-rerun-", dir="/var/tmp"))
    (root / "home" / ".ssh").mkdir(parents=True)
    (root / "home" / ".ssh" / "id_rsa").write_text(KEY + "\n")
    (root / "ga-home" / "sessions").mkdir(parents=True)
    (root / "ga-home" / "sessions" / "old.json").write_text(SESSION + "\n")
    (root / "readable.txt").write_text("READABLE-control\n")
    monkeypatch.setenv("HOME", str(root / "home"))
    monkeypatch.setenv("GA_HOME", str(root / "ga-home"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_the_rerun_reads_neither_the_persons_keys_nor_the_sessions(place: Path) -> None:
    script = (f"cat {place}/readable.txt; cat {place}/home/.ssh/id_rsa; cat {place}/ga-home/sessions/old.json; "
              "exit 1")
    code, output = rerun("leak.sh", {"leak.sh": script}, sandbox=load_settings().sandbox)
    assert code == 1 and "READABLE-control" in output, output  # the rest of the filesystem stays readable
    assert KEY not in output and SESSION not in output, output
