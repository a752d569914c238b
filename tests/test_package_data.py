"""`pip install .` (what `make quickstart` does) installs every file the packages hold, not only their modules: a
template, a stylesheet or a shipped YAML left out of the wheel breaks a command only for people who did not
install in editable mode. The wheel is built from a copy of what git lists: a checkout's own build/ and
ga.egg-info/ (left by an editable install) would otherwise put back what the configuration leaves out."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from tests.installed_lane import copy_checkout

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("cli", "configs", "memory_shared", "worker", "orchestrator", "skilltree")


def test_the_wheel_holds_every_file_git_tracks_in_the_packages(tmp_path: Path) -> None:
    copy_checkout(tmp_path / "ga")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "wheel"),
                            str(tmp_path / "ga")], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "wheel").glob("ga-*.whl")
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files", *PACKAGES], capture_output=True, text=True,
                             check=True).stdout.split()
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    missing = [name for name in tracked if name not in in_wheel]
    assert not missing, f"left out of the wheel (pyproject.toml [tool.setuptools.package-data]): {missing}"
