"""Another revision of this repository's files, extracted for a side-by-side benchmark."""
from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# tarfile's filter= came with Python 3.11.4 (3.10.12); Debian 12's own 3.11.2 lacks it. The archive is this
# repository's own, so without the filter nothing is lost there.
HAS_FILTER = hasattr(tarfile, "data_filter")


def extract(rev: str, target: Path, *paths: str) -> Path:
    """`git archive REV [PATHS]` unpacked into `target` (created); returns `target`."""
    data = subprocess.run(["git", "-C", str(REPO), "archive", rev, *paths], capture_output=True, check=True).stdout
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        if HAS_FILTER:
            tar.extractall(target, filter="data")
        else:
            tar.extractall(target)
    return target
