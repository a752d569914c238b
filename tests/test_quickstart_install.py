"""The README's first command on a stock Debian/Ubuntu: `make quickstart` in a fresh clone whose PATH has only the
system's Python (PEP 668: pip refuses to install into it) makes .venv, installs ga there and runs the main job.

Slow (about 40 s: a virtual environment and ga's dependencies installed from pip's cache, then the quick start);
`-m "not slow"` leaves it out."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.ga_support import REPO

SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
NOT_OURS = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "CONDA_PREFIX")  # what would point at the test's own Python


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_make_quickstart_in_a_fresh_clone_with_only_the_system_python(tmp_path: Path) -> None:
    if not (REPO / ".git").exists() or not shutil.which("make", path=SYSTEM_PATH) or not Path("/usr/bin/python3").exists():
        pytest.skip("needs a git checkout, make and /usr/bin/python3")
    clone = tmp_path / "ga"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, timeout=120)
    # HOME stays, so pip reuses its cache (and PIP_* settings stay: where packages come from).
    env = {k: v for k, v in os.environ.items() if k not in NOT_OURS and not k.startswith("GA_")}
    env.update(PATH=SYSTEM_PATH, GA_HOME=str(tmp_path / "home"), COLUMNS="200")

    done = subprocess.run(["make", "quickstart"], cwd=clone, env=env, capture_output=True, text=True, timeout=840)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "3/3 succeeded" in done.stdout and "56 words in 3 files" in done.stdout, done.stdout[-3000:]
    assert (clone / ".venv" / "bin" / "ga").is_file()
    assert len(list((clone / "runs").iterdir())) == 1

    up_to_date = subprocess.run(["make", "-q", ".venv/bin/pip"], cwd=clone, env=env, timeout=60)
    assert up_to_date.returncode == 0  # a second make does not make the venv again
    system = subprocess.run(["/usr/bin/python3", "-c", "import importlib.metadata as m; m.version('ga')"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert system.returncode != 0 and "PackageNotFoundError" in system.stderr  # nothing went into the system Python
