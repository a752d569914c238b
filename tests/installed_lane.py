"""`make test-installed`: the tests that start `ga` run it as installed, from a `ga` on PATH with no PYTHONPATH.

A copy of this checkout goes under /tmp (where a user's clone may well be, and which the sandbox replaces with a
private /tmp); then, for each install, a virtual environment under /tmp gets `ga` from that copy:
- `editable`: `pip install -e COPY`, so `ga` imports the copy through pip's editable finder;
- `plain`: `pip install COPY`, so `ga` lives in the environment's site-packages.
ga's dependencies are not installed again: a .pth line lends the environment this one's site-packages (pip's
`--no-deps`), which holds no `ga` that could be imported (its own editable finder is not a site directory's).

pytest (this environment's) then runs LANE_TESTS (or the paths of --tests) marked LANE_MARKS, with
GA_TEST_INSTALLED naming that `ga` (tests/ga_support.py starts it instead of `python -m cli`, and without
PYTHONPATH), GA_TEST_INSTALL the kind, and that environment's bin/ first on PATH, so a task's `code_run` that
calls `ga` gets it too.

    python tests/installed_lane.py [--only editable|plain] [--keep] [--tests PATH...] [PYTEST OPTIONS...]
"""
from __future__ import annotations

import argparse
import os
import shutil
import site
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KINDS = ("editable", "plain")
# The CLI tests that start a real `ga`, the README's parent example, and every command the docs show.
LANE_TESTS = ["tests/cli", "tests/orchestrator/test_parent_example.py", "tests/test_docs_commands.py"]
LANE_MARKS = "proc and not slow"


def copy_checkout(target: Path) -> None:
    """The checkout's files as git sees them (tracked and untracked, not ignored), copied to `target`."""
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, text=True, check=True).stdout
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():  # a tracked file deleted in the work tree is not copied
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def install(kind: str, checkout: Path, venv: Path) -> Path:
    """A virtual environment at `venv` with ga installed from `checkout` (`kind`); returns its `ga`."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "_ga_lane_dependencies.pth").write_text("".join(f"{p}\n" for p in site.getsitepackages()))
    editable = ["-e"] if kind == "editable" else []
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", *editable, str(checkout)], check=True)
    where = subprocess.run([str(python), "-c", "import cli; print(cli.__file__)"], cwd="/", capture_output=True,
                           text=True, check=True).stdout.strip()
    expected = checkout if kind == "editable" else Path(purelib)
    if not Path(where).is_relative_to(expected):
        sys.exit(f"installed-lane: the {kind} install imports cli from {where}, not from {expected}")
    print(f"installed-lane: {kind}: ga from {where}", flush=True)
    return venv / "bin" / "ga"


def run_tests(kind: str, ga: Path, pytest_args: list[str]) -> int:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(GA_TEST_INSTALLED=str(ga), GA_TEST_INSTALL=kind, PATH=f"{ga.parent}{os.pathsep}{env.get('PATH', '')}",
               RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", *pytest_args], cwd=REPO, env=env).returncode


def main() -> int:
    parser = argparse.ArgumentParser(description="The tests that start `ga`, against ga installed under /tmp.")
    parser.add_argument("--only", choices=KINDS, help="one install instead of both")
    parser.add_argument("--keep", action="store_true", help="leave the copy and the environments in /tmp")
    parser.add_argument("--tests", nargs="+", metavar="PATH", help="these tests instead of the lane's")
    options, pytest_args = parser.parse_known_args()
    root = Path(tempfile.mkdtemp(prefix="ga-installed-", dir="/tmp"))
    failed = []
    try:
        started = time.monotonic()
        copy_checkout(root / "ga")
        kinds = [options.only] if options.only else list(KINDS)
        for kind in kinds:
            began = time.monotonic()
            ga = install(kind, root / "ga", root / f"venv-{kind}")
            code = run_tests(kind, ga, [*(options.tests or LANE_TESTS), "-m", LANE_MARKS, *pytest_args])
            print(f"installed-lane: {kind}: {'passed' if code == 0 else f'failed (pytest exit {code})'} "
                  f"in {time.monotonic() - began:.0f} s", flush=True)
            if code:
                failed.append(kind)
        print(f"installed-lane: {len(kinds) - len(failed)} of {len(kinds)} installs passed "
              f"in {time.monotonic() - started:.0f} s", flush=True)
    finally:
        if options.keep:
            print(f"installed-lane: kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
