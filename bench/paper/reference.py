"""Make the GenericAgent reference runnable for the paper's runners, outside this repository:

    python bench/paper/reference.py --source GIT_DIR_OR_CHECKOUT --to /tmp/ga-ref

GIT_DIR_OR_CHECKOUT is a clone of github.com/lsdefine/GenericAgent (a bare git directory or a work tree). This
writes DIR/checkout (its files at HEAD, via `git archive`), DIR/venv (a virtualenv with its core dependencies
from its pyproject.toml, plus pandas and openpyxl, which the benchmarks' inputs need, as in ga's `paper` extra)
and DIR/SOURCE (the commit). Nothing of the reference is copied into ga.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

CORE = ["requests>=2.28", "beautifulsoup4>=4.12", "bottle>=0.12", "simple-websocket-server>=0.4", "aiohttp>=3.9"]
BENCH = ["pandas", "openpyxl"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", required=True, type=Path)
    parser.add_argument("--to", required=True, type=Path)
    args = parser.parse_args()
    git = ["git", "--git-dir", str(args.source)] if (args.source / "HEAD").is_file() else ["git", "-C", str(args.source)]
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    checkout = args.to / "checkout"
    if not (checkout / "agentmain.py").is_file():
        extract(git, checkout)
    venv = args.to / "venv"
    if not (venv / "bin" / "python").is_file():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *CORE, *BENCH], check=True)
    (args.to / "SOURCE").write_text(f"github.com/lsdefine/GenericAgent {commit}\n")
    print(f"reference ready: {checkout} (commit {commit[:12]}), python {venv / 'bin' / 'python'}")


def extract(git: list[str], checkout: Path) -> None:
    """HEAD's files, one by one: a snapshot may lack some large media blobs, which the loop never reads."""
    listing = subprocess.run([*git, "ls-tree", "-r", "-z", "HEAD"], capture_output=True, check=True).stdout
    missing = []
    for entry in filter(None, listing.split(b"\0")):
        meta, path = entry.split(b"\t", 1)
        mode, kind, blob = meta.split()
        if kind != b"blob":
            continue
        target = checkout / path.decode()
        done = subprocess.run([*git, "cat-file", "blob", blob.decode()], capture_output=True)
        if done.returncode:
            missing.append(path.decode())
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(done.stdout)
        if mode == b"100755":
            target.chmod(0o755)
    if missing:
        print(f"note: {len(missing)} file(s) absent from the source, skipped (e.g. {missing[0]})")


if __name__ == "__main__":
    main()
