"""ga's own re-run of a procedure's script: in a fresh directory outside any task's, holding only the given files,
with a minimal environment (no secrets, HOME inside it), under code_run's sandbox with the network off: what
every sandbox hides (the credentials under the person's home, GA_HOME's sessions) it cannot read either, since
its output comes back to the task (the gate's refusal quotes its last line).

Both verifications use it: the consolidation gate's (worker/procedures.py, for what a task staged in L3) and
`ga explore`'s (skilltree/verify.py, for what an exploration task left in its workdir).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from contextlib import closing
from pathlib import Path, PurePosixPath
from typing import Optional

import structlog

from configs import load_settings
from configs.settings import ConfigError, SandboxSettings
from memory_shared import fsutil
from worker import sandbox as bwrap
from worker.sandbox_limits import Limits, confine

SCRIPT_RUNNERS = {".py": [sys.executable], ".sh": ["bash"]}
RERUN_TIMEOUT = 60.0
OUTPUT_TAIL = 1500
log = structlog.get_logger("worker.rerun")


def rerun(script: str, files: dict[str, str], timeout: float = RERUN_TIMEOUT,
          sandbox: Optional[SandboxSettings] = None) -> tuple[int, str]:
    """Run `script` (a relative path among `files`: path -> text) with no arguments in a fresh directory holding
    only `files`; (exit code, output tail). A timeout kills the script's whole process group and counts as exit
    code -9. Sandboxed with the network off (default policy: the loaded settings'); no sandbox where one is
    required: exit 126."""
    policy = sandbox or _settings_sandbox()
    if policy.mode == "bwrap" and (problem := bwrap.support_problem(policy.bwrap, network=False)):
        return 126, problem
    with tempfile.TemporaryDirectory(prefix="ga-verify-") as tmp:
        root = Path(tmp) / "work"
        for rel, text in files.items():
            parts = PurePosixPath(rel).parts
            if not parts or ".." in parts or PurePosixPath(rel).is_absolute():
                return 126, f"{rel}: not a plain relative path"
            target = root.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tmp, "TMPDIR": tmp, "LANG": "C.UTF-8",
               "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(root)}
        command = SCRIPT_RUNNERS[PurePosixPath(script).suffix] + [str(root / script)]
        limits = Limits.of(policy.limits)
        if policy.mode == "bwrap":
            command = bwrap.wrap(command, bwrap.Policy(network=False, writable=(Path(tmp),), hidden=_hidden_state(),
                                                       tmp_size=limits.tmp_size),
                                 policy.bwrap, root, proc=bwrap.mounts_proc(policy.bwrap, network=False))
        else:
            log.warning("sandbox_off", script=script, note="verification re-run unsandboxed (sandbox.mode: off)")
        try:
            confinement, cgroup = confine(limits, sandboxed=policy.mode == "bwrap")
        except FileNotFoundError as exc:
            return 126, str(exc)
        command = [*confinement, *command]
        # A file, not a pipe: a background child cannot block us. The script can write its folder: its output is
        # read back through the file created here, never by its name.
        with closing(fsutil.Folder(tmp)) as folder, os.fdopen(folder.create("output.txt", os.O_RDWR), "rb") as output:
            with os.fdopen(os.dup(output.fileno()), "wb") as out:
                proc = subprocess.Popen(command, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                        stderr=subprocess.STDOUT, start_new_session=True)
            try:
                code = _wait_and_clean(proc, timeout)
            finally:
                if cgroup is not None:
                    cgroup.remove(tries=10)
            text = _tail(output.fileno(), OUTPUT_TAIL)
        if code == -9:
            text += f"\n[timeout after {timeout:g}s: killed]"
        return code, text[-OUTPUT_TAIL:]


def _wait_and_clean(proc: subprocess.Popen, timeout: float) -> int:
    """The script's exit code (-9 past `timeout`); its leftovers killed either way."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return -9
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # leftovers of the script, if any
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()


def _tail(fd: int, chars: int) -> str:
    """About the last `chars` characters of the open file, reading no more than that many UTF-8 bytes could take."""
    size = os.fstat(fd).st_size
    return os.pread(fd, chars * 4, max(0, size - chars * 4)).decode("utf-8", errors="replace")


def _hidden_state() -> tuple[Path, ...]:
    """GA_HOME's hidden folders (its sessions), GA_HOME as the settings say (GA_HOME, else ~/.ga, where they do
    not load)."""
    try:
        home = load_settings().home_dir
    except ConfigError:
        home = Path(os.environ.get("GA_HOME") or "~/.ga").expanduser()
    return tuple(home / name for name in bwrap.GA_HIDDEN)


def _settings_sandbox() -> SandboxSettings:
    return load_settings().sandbox
