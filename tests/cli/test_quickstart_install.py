"""The README's first command on a stock Debian/Ubuntu: `make quickstart` in a fresh clone whose PATH has only the
system's Python (PEP 668: pip refuses to install into it) makes .venv, installs ga there and runs the main job.

That one is slow (40-100 s: a virtual environment and ga's dependencies installed from pip's cache, then the quick
start; it clones the committed HEAD, not uncommitted changes); `-m "not slow"` leaves it out. The other plays a Debian without python3-venv: a python3 whose `-m venv`
fails half-way, as it does without ensurepip, and an apt-get on PATH that installs the package (this machine has it)."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.ga_support import REPO

SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
# what would point at the test's own Python, and the make variables of a `make test` around the test: make hands
# its command line (`VENV=.venv-system` in .ci/run) to every recipe both in MAKEFLAGS and as plain variables
NOT_OURS = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "CONDA_PREFIX", "MAKEFLAGS", "MFLAGS", "MAKELEVEL",
            "MAKEOVERRIDES", "VENV", "PYTHON", "BIN")


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


FAKE_APT = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/apt.log"
case "$*" in *"install -y -qq python3-venv"*) touch "$(dirname "$0")/installed";; esac
"""
NO_ENSUREPIP = """#!/bin/sh
if [ "$1 $2" = "-m venv" ] && [ ! -e "$(dirname "$0")/installed" ]; then
  mkdir -p "$3/bin" && ln -sf /usr/bin/python3 "$3/bin/python"
  echo "ensurepip is not available" >&2; exit 1
fi
exec /usr/bin/python3 "$@"
"""


def test_the_venv_step_installs_python3_venv_when_venv_cannot_make_one(tmp_path: Path) -> None:
    if not shutil.which("make", path=SYSTEM_PATH) or not Path("/usr/bin/python3").exists():
        pytest.skip("needs make and /usr/bin/python3")
    shims = tmp_path / "shims"
    shims.mkdir()
    for name, text in (("apt-get", FAKE_APT), ("python3", NO_ENSUREPIP), ("sudo", '#!/bin/sh\nexec "$@"\n')):  # sudo: not root
        (shims / name).write_text(text)
        (shims / name).chmod(stat.S_IRWXU)
    env = {k: v for k, v in os.environ.items() if k not in NOT_OURS}
    env["PATH"] = f"{shims}:{SYSTEM_PATH}"
    venv = tmp_path / "venv"
    make = ["make", "-C", str(REPO), "venv", f"PYTHON={shims / 'python3'}", f"VENV={venv}"]

    done = subprocess.run(make, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (shims / "apt.log").read_text().splitlines() == ["update -qq", "install -y -qq python3-venv"]
    assert (venv / "bin" / "pip").is_file()  # the half-made directory was removed and made again, whole
    again = subprocess.run(make, env=env, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout
    assert len((shims / "apt.log").read_text().splitlines()) == 2
