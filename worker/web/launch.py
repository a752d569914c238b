"""How a task's Chromium is started: inside the task's sandbox (the one its code_run scripts get), through a
wrapper executable that Playwright runs in place of the browser.

    launch = sandboxed(binary, policy, settings, workdir)   # BrowserRefused: one line saying why
    launch = unsandboxed(binary, settings)                  # sandbox.mode: off only

Playwright's launch starts the wrapper with Chromium's flags and `--remote-debugging-pipe`, and talks to the
browser over fds 3 and 4, which the shell's exec, bubblewrap and the sandbox's launcher all pass on: the
browser has no DevTools port. The wrapper (a shell script in a folder of ga's own, outside every writable
root) writes its pid (after its exec, bubblewrap's), moves the profile into the sandbox's private /tmp, where
no other sandbox (code_run's) sees it, and execs bubblewrap with the task's policy, under code_run's
`sandbox.limits` (worker/sandbox_limits.py: the browser's own cgroup for its memory and processes where one can
be made, rlimits for each process's memory, CPU time and file size). ga makes the sandbox's mount points
itself, as for code_run (worker/sandbox.py, CVE-2026-87766). The network is the task's: `gateway` and `off`
reach no host at all (the sandbox's own network namespace, nothing forwarded), a host list goes through the
egress proxy (loopback included), `open` shares the host's.
"""
from __future__ import annotations

import os
import shlex
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from configs import Settings
from worker import egress, sandbox
from worker.sandbox_limits import Limits, SandboxCgroup, confine
from worker.web.chromium import CLOSED_NETWORK_FLAGS, PROFILE, proxy_flags

# The browser's environment: an allow-list (nothing of ga's keys, tokens or sockets reaches it).
ENV_NAMES = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM", "FONTCONFIG_PATH", "FONTCONFIG_FILE")
ENV_PREFIXES = ("LC_",)
FOLDER_PREFIX = "ga-browser-"
PIPE_FLAG = "--remote-debugging-pipe"  # on every command line of ours (Playwright adds it): how our processes are told


class BrowserRefused(RuntimeError):
    """The browser cannot run inside the task's sandbox; str() is one line saying why and what to do."""


@dataclass
class Launch:
    """What Playwright starts for one task's browser, and how to clear it away."""

    executable: Path  # the wrapper
    args: list[str]  # Chromium flags besides Playwright's own
    env: dict[str, str]
    headless: bool
    folder: Path  # ga's folder of the wrapper and its pid file (removed by remove())
    placeholders: list[Path] = field(default_factory=list)  # the protected names' empty mount points
    sandboxed: bool = True
    cgroup: Optional[SandboxCgroup] = None  # the browser's own (sandbox.limits), removed by remove()

    def pid(self) -> Optional[int]:
        """The browser's first process (bubblewrap's outer process when sandboxed), while it runs."""
        try:
            pid = int((self.folder / "pid").read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if PIPE_FLAG in _cmdline(pid) else None  # not a reused pid

    def processes(self) -> list[int]:
        """Every live process of the browser: the first one and its descendants."""
        top = self.pid()
        if top is None:
            return []
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                fields = _stat(int(entry.name))
                if fields and fields[0] not in ("Z", "X"):
                    children.setdefault(int(fields[1]), []).append(int(entry.name))
        found, todo = [], [top]
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo.extend(children.get(pid, []))
        return found

    def snapshot(self) -> dict[int, str]:
        """The browser's processes with their command lines (to tell them from a later process of the same pid)."""
        return {pid: _cmdline(pid) for pid in self.processes()}

    def kill(self, known: Optional[dict[int, str]] = None, wait: float = 0.0) -> None:
        """SIGKILL the browser's processes (and those of `known` still running), the first one first: sandboxed,
        the whole sandbox dies with bubblewrap (--die-with-parent, its own PID namespace). Then wait up to `wait`
        seconds for them to be gone. Safe from any thread, and when nothing runs."""
        targets = {**(known or {}), **self.snapshot()}
        for pid, line in targets.items():
            if _cmdline(pid) == line:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        deadline = time.monotonic() + wait
        while any(_running(pid, line) for pid, line in targets.items()) and time.monotonic() < deadline:
            time.sleep(0.02)

    def remove(self) -> None:
        """Remove the wrapper's folder and the mount points bubblewrap made (after the browser stopped)."""
        shutil.rmtree(self.folder, ignore_errors=True)
        sandbox.remove_placeholders(self.placeholders)
        if self.cgroup is not None:
            self.cgroup.remove(tries=10)


def sandboxed(binary: Path, policy: sandbox.Policy, settings: Settings, cwd: Path) -> Launch:
    """The browser inside `policy` (the task's sandbox), run from `cwd`; BrowserRefused where that cannot be."""
    options = settings.sandbox
    if not settings.web.headless:
        raise BrowserRefused("the web tools refused: web.headless: false needs a display, and the sandbox has none; "
                             "use headless, or attach your own browser with web.cdp_url (README, Getting a browser)")
    shared = options.network == "open"
    problem = sandbox.support_problem(options.bwrap, shared)
    if problem:
        raise BrowserRefused(problem.replace("code_run refused", "the web tools refused", 1))
    argv = sandbox.wrap([str(binary)], policy, shutil.which(options.bwrap) or options.bwrap, cwd,
                        proc=sandbox.mounts_proc(options.bwrap, shared))
    folder = _new_folder()
    if any(folder.resolve().is_relative_to(root.resolve()) for root in policy.writable):
        shutil.rmtree(folder, ignore_errors=True)
        raise BrowserRefused(f"the web tools refused: the browser's launcher {folder} would be writable from the "
                             "sandbox; point TMPDIR outside the task's writable paths")
    placeholders = sandbox.placeholders(argv)
    try:
        sandbox.make_mount_points(argv, policy.writable)
        confinement, cgroup = confine(Limits.of(options.limits), sandboxed=True)
    except OSError as exc:  # a link where a mount point goes; no prlimit (fail closed)
        shutil.rmtree(folder, ignore_errors=True)
        sandbox.remove_placeholders(placeholders)
        said = str(exc).replace("code_run refused: ", "", 1)
        raise BrowserRefused(f"the web tools refused: the browser's sandbox cannot be made ({said})") from None
    _write_wrapper(folder, [*confinement, *argv], profile=PROFILE)
    network = options.network
    args = [*CLOSED_NETWORK_FLAGS, *(proxy_flags(egress.PORT) if isinstance(network, list) else [])]
    return Launch(folder / "chromium", args, {**browser_env(), "HOME": "/tmp"}, True, folder, placeholders,
                  cgroup=cgroup)


def unsandboxed(binary: Path, settings: Settings) -> Launch:
    """The browser as it is (sandbox.mode: off): the host's files and network, this user's rights."""
    folder = _new_folder()
    _write_wrapper(folder, [str(binary)])
    home = {"HOME": os.environ["HOME"]} if "HOME" in os.environ else {}
    return Launch(folder / "chromium", list(CLOSED_NETWORK_FLAGS), {**browser_env(), **home}, settings.web.headless,
                  folder, sandboxed=False)


def browser_env() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name in ENV_NAMES or name.startswith(ENV_PREFIXES)}


def _new_folder() -> Path:
    """A folder of this process's for one launch (named by its pid); those of processes that died (a kill -9
    leaves them) are removed on the way."""
    base = Path(tempfile.gettempdir())
    for old in base.glob(f"{FOLDER_PREFIX}*-*"):
        owner = old.name[len(FOLDER_PREFIX):].split("-", 1)[0]
        if owner.isdigit() and not _stat(int(owner)) and old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-", dir=base))


def _write_wrapper(folder: Path, command: list[str], profile: Optional[str] = None) -> None:
    """folder/chromium: writes its pid, execs `command` with Playwright's flags, their --disable-features lists
    merged (Chromium keeps only the last one, and both Playwright's and ours keep background traffic off), and
    the profile moved to `profile`."""
    moved = f'set -- "$@" --user-data-dir={profile}' if profile else 'set -- "$@" "$arg"'
    script = [
        "#!/bin/sh",
        "# ga's browser for one task (worker/web/launch.py); Playwright runs it in place of Chromium",
        f"echo $$ > {shlex.quote(str(folder / 'pid'))}",
        "features=",
        "for arg do",
        "  shift",
        "  case $arg in",
        '    --disable-features=*) features="$features,${arg#--disable-features=}" ;;',
        f"    --user-data-dir=*) {moved} ;;",
        '    *) set -- "$@" "$arg" ;;',
        "  esac",
        "done",
        f'exec {shlex.join(command)} "$@" "--disable-features=${{features#,}}"',
        ""]
    wrapper = folder / "chromium"
    fd = os.open(wrapper, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
    with os.fdopen(fd, "w") as handle:
        handle.write("\n".join(script))


def _stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (state, ppid, ...), or [] when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _running(pid: int, line: str) -> bool:
    """Still there: ours (the same command line), or exiting (its memory, and so its command line, already gone)."""
    fields = _stat(pid)
    return bool(fields) and fields[0] not in ("Z", "X") and _cmdline(pid) in (line, "")


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
