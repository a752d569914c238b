"""Turn a command and a sandbox policy into a bubblewrap argv; check once (cached) that bubblewrap works here.

The view inside: the whole filesystem read-only, a private /tmp, the writable roots writable, the
read-only paths read-only again even inside a writable root (the most specific path wins), secret
files of the home directory hidden. A new PID namespace whose processes all die with the sandbox, the
sandbox dying with the process that started it; the network shared unless the policy turns it off.

Forwards: with the network off, `Policy.forwards` still lets the sandbox reach chosen Unix sockets outside
(the model gateway, an egress proxy): each socket is bind-mounted into the sandbox, and the sandbox's first
process (worker/sandbox_launch.py) listens on 127.0.0.1:PORT in the sandbox's own network namespace, relays
each connection to its socket, and becomes the command.
"""
from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from worker import policy as rules
from worker.policy import GA_HIDDEN, SECRETS  # noqa: F401  (the rule's names, re-exported for callers)

OPT_OUT = ("opt out with `sandbox: {mode: off}` in ~/.config/ga/config.yaml, GA_SANDBOX__MODE=off or the tasks file "
           "(scripts then run unsandboxed)")
# Environment variables a sandbox never sees (besides every api_key_env of models.yaml).
SECRET_ENV_SUFFIXES = ("_KEY", "_PASSWORD", "_PASSWD", "_CREDENTIALS", "_HEADERS")
SECRET_ENV_PREFIXES = ("AWS_", "AZURE_", "GOOGLE_APPLICATION_", "GH_", "GITHUB_")
SECRET_ENV_WORDS = ("SECRET", "TOKEN")
SECRET_ENV_NAMES = ("SSH_AUTH_SOCK", "GPG_AGENT_INFO", "NETRC")
ENV_MARK = "GA_SANDBOX"  # set by code_run in its scripts' environment: bwrap or off
LAUNCHER = Path(__file__).resolve().parent / "sandbox_launch.py"


@dataclass(frozen=True)
class Policy:
    network: bool = True
    writable: tuple[Path, ...] = ()  # besides a private /tmp
    readonly: tuple[Path, ...] = ()  # read-only even where a writable root contains them
    home: Optional[Path] = None  # whose SECRETS are hidden; default: the current home directory
    hidden: tuple[Path, ...] = ()  # more paths to hide (GA_HOME's sessions)
    tmp_size: Optional[int] = None  # bytes of the private /tmp; None: no limit of its own
    config_dirs: tuple[Path, ...] = ()  # where ga reads project config besides the writable roots (its cwd)
    forwards: tuple[tuple[int, Path], ...] = ()  # loopback port inside -> Unix socket outside (see the module doc)


def wrap(command: list[str], policy: Policy, bwrap: str, cwd: Path, *, proc: bool = True) -> list[str]:
    """The argv that runs `command` in `cwd` inside the sandbox `policy` describes."""
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev"]
    # Never the host's /proc: its /proc/<pid>/root would lead out of the sandbox. Where a fresh one
    # cannot be mounted (some containers), scripts get an empty one.
    argv += ["--proc", "/proc"] if proc else ["--tmpfs", "/proc"]
    # --cap-drop ALL: run by root, bubblewrap would keep every capability (and remount / read-write).
    argv += ["--size", str(policy.tmp_size)] if policy.tmp_size else []
    argv += ["--tmpfs", "/tmp", "--unshare-pid", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if not policy.network:
        argv.append("--unshare-net")
    for path, kind in _mounts(policy):
        if kind == "rw":
            argv += ["--bind", str(path), str(path)]
        elif kind == "ro":
            argv += ["--ro-bind", str(path), str(path)]
        elif kind == "hide" and path.is_dir():
            argv += ["--tmpfs", str(path)]
        else:  # a hidden file, or a project config file that does not exist yet (made as an empty mount point)
            argv += ["--ro-bind", "/dev/null", str(path)]
    for _, socket_path in policy.forwards:  # after the private /tmp: a socket there must stay visible
        argv += ["--ro-bind", str(socket_path), str(socket_path)]
    if policy.forwards:
        relays = [f"{port}={socket_path}" for port, socket_path in policy.forwards]
        command = [sys.executable, "-I", "-S", str(LAUNCHER), *relays, "--", *command]
    return argv + ["--chdir", str(cwd), "--", *command]


def _mounts(policy: Policy) -> list[tuple[Path, str]]:
    """(path, rw | ro | absent | hide) in mount order: parents before children, so the most specific path wins.
    What is protected is worker/policy.py's rule; this only adds what the interpreter needs under /tmp."""
    table = rules.entries(policy.writable, [(p, "read-only") for p in policy.readonly], policy.hidden,
                          policy.config_dirs, policy.home)
    known = {e.path for e in table}
    table += [rules.Entry(p, "ro", "the interpreter") for p in rules.existing(_runtime_under_tmp()) if p not in known]
    table.sort(key=lambda e: (len(e.path.parts), rules.RANK[e.access], str(e.path)))
    return [(e.path, e.access) for e in table]


def placeholders(argv: list[str]) -> list[Path]:
    """The files `argv` will create as empty mount points (missing before it runs: the project config files a
    sandbox may not create): code_run removes them afterwards, when they are still the empty regular files
    bubblewrap made. A hidden file exists, so it is never one."""
    return [Path(argv[i + 2]) for i in range(len(argv) - 2)
            if argv[i] == "--ro-bind" and argv[i + 1] == "/dev/null" and not os.path.lexists(argv[i + 2])]


def remove_placeholders(paths: Iterable[Path]) -> None:
    for path in paths:
        try:
            info = path.lstat()
            if stat.S_ISREG(info.st_mode) and info.st_size == 0:
                path.unlink()
        except OSError:
            pass


def _runtime_under_tmp() -> list[Path]:
    """The interpreter, its prefixes and the import path where they live under /tmp (a virtualenv or a checkout
    there): the private /tmp would hide them, and scripts could not even start."""
    places = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable)),
              *sys.path, *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    return [Path(p) for p in places if p and Path(p).resolve().is_relative_to("/tmp")]


def without_secrets(env: dict[str, str], key_names: Iterable[str] = ()) -> dict[str, str]:
    """`env` less what may hold a secret: the named key variables, and by name API keys, tokens, passwords,
    secrets, cloud credentials and agent sockets."""
    names = set(key_names)
    return {k: v for k, v in env.items() if k not in names and not _secret_name(k.upper())}


def _secret_name(name: str) -> bool:
    return (name.endswith(SECRET_ENV_SUFFIXES) or name.startswith(SECRET_ENV_PREFIXES)
            or any(word in name for word in SECRET_ENV_WORDS) or name in SECRET_ENV_NAMES)


def hidden(path: Path, home: Optional[Path] = None, more: Iterable[Path] = ()) -> bool:
    """Whether `path` is (or is inside) what every sandbox hides (SECRETS, and `more`: a policy's own hidden
    paths): ga reads nothing there on a sandbox's behalf."""
    real = Path(os.path.realpath(os.path.expanduser(str(path))))
    policy = Policy(home=home, hidden=tuple(more))
    return any(real.is_relative_to(p) for p, kind in _mounts(policy) if kind == "hide")


def support_problem(bwrap: str, network: bool = True) -> Optional[str]:
    """None when bubblewrap can build this sandbox here, else one line saying why not and what to do."""
    return probe(bwrap, network)[0]


def mounts_proc(bwrap: str, network: bool = True) -> bool:
    """Whether a fresh /proc can be mounted (some containers refuse it)."""
    return probe(bwrap, network)[1]


@functools.lru_cache(maxsize=16)
def probe(bwrap: str, network: bool) -> tuple[Optional[str], bool]:
    """(problem or None, mounts /proc); run once per binary and network choice for the process's life."""
    binary = shutil.which(bwrap)
    if binary is None:
        return (f"code_run refused: no sandbox: bubblewrap not found ({bwrap!r}); install it "
                f"(apt-get install bubblewrap) or {OPT_OUT}"), False
    true = shutil.which("true") or "/bin/true"
    error = ""
    for proc in (True, False):
        argv = wrap([true], Policy(network=network), binary, Path("/"), proc=proc)
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            error = str(exc)
            continue
        if done.returncode == 0:
            return None, proc
        error = error or (done.stderr.decode(errors="replace").strip().splitlines() or [f"exit {done.returncode}"])[0]
    return (f"code_run refused: no sandbox: bubblewrap cannot create its namespaces here ({error[:160]}); allow "
            f"user namespaces (sysctl kernel.unprivileged_userns_clone=1) or {OPT_OUT}"), False
