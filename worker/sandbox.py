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

OPT_OUT = ("opt out with `sandbox: {mode: off}` in ~/.config/ga/config.yaml, GA_SANDBOX__MODE=off or the tasks file "
           "(scripts then run unsandboxed)")
# Under the home directory: credentials, browser profiles (cookies, saved logins) and our own config; a directory
# gets an empty tmpfs, a file /dev/null. The one list of what a sandbox never sees there (GA_HOME's: GA_HIDDEN).
SECRETS = (".ssh", ".aws", ".gnupg", ".config/ga", ".azure", ".config/gcloud", ".kube", ".docker",
           ".password-store", ".netrc", ".git-credentials", ".pypirc", ".npmrc", ".pgpass",
           ".config/gh", ".config/hub", ".cache/huggingface", ".huggingface",
           ".config/chromium", ".cache/chromium", ".config/google-chrome", ".cache/google-chrome",
           ".config/google-chrome-beta", ".config/BraveSoftware", ".mozilla", ".cache/mozilla", "snap/chromium",
           "snap/firefox", ".var/app/org.mozilla.firefox", ".var/app/org.chromium.Chromium")
GA_HIDDEN = ("sessions",)  # under GA_HOME: every task's prompt, model and workdir (the rest is read-only)
# Environment variables a sandbox never sees (besides every api_key_env of models.yaml).
SECRET_ENV_SUFFIXES = ("_KEY", "_PASSWORD", "_PASSWD", "_CREDENTIALS", "_HEADERS")
SECRET_ENV_PREFIXES = ("AWS_", "AZURE_", "GOOGLE_APPLICATION_", "GH_", "GITHUB_")
SECRET_ENV_WORDS = ("SECRET", "TOKEN")
SECRET_ENV_NAMES = ("SSH_AUTH_SOCK", "GPG_AGENT_INFO", "NETRC")
PROTECTED_NAMES = (".git",)  # kept read-only inside every writable root
# Project-local configuration ga reads from the directory it runs in (configs/settings.py, worker/models.py,
# the scripts' .ga/): read-only in every writable root, and a missing file cannot be created there either.
PROJECT_CONFIG = ("ga.yaml", "models.yaml")
PROJECT_DIRS = (".ga",)
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
    """(path, rw | ro | hide) in mount order: parents before children, so the most specific path wins."""
    home = policy.home or Path.home()
    writable = _existing(policy.writable)
    protected = [root / name for root in writable for name in PROTECTED_NAMES]
    entries = {p: "rw" for p in writable}
    entries.update({p: "ro" for p in _existing([*policy.readonly, *protected])})
    entries.update(_project_config(writable, policy.config_dirs))
    entries.update({p: "hide" for p in _existing([*(home / name for name in SECRETS), *policy.hidden])})
    for path in _existing(_runtime_under_tmp()):
        entries.setdefault(path, "ro")
    rank = {"rw": 0, "ro": 1, "absent": 1, "hide": 2}
    return sorted(entries.items(), key=lambda item: (len(item[0].parts), rank[item[1]], str(item[0])))


def _project_config(writable: list[Path], config_dirs: Iterable[Path]) -> dict[Path, str]:
    """The project config names in every writable directory: existing ones read-only, missing files as
    "absent" (an empty read-only mount point, so the sandbox cannot create them; see placeholders())."""
    folders = [*writable, *(d for d in _existing(config_dirs) if any(d.is_relative_to(w) for w in writable))]
    entries: dict[Path, str] = {}
    for folder in folders:
        if not folder.is_dir():
            continue
        for name in (*PROJECT_CONFIG, *PROJECT_DIRS):
            path = folder / name
            if path.exists() or path.is_symlink():
                entries.update({p: "ro" for p in _existing([path])})
            elif name in PROJECT_CONFIG:
                entries[path] = "absent"
    return entries


def placeholders(argv: list[str]) -> list[Path]:
    """The project config files `argv` will create as empty mount points (missing before it runs): code_run
    removes them afterwards, when they are still the empty regular files bubblewrap made."""
    return [Path(argv[i + 2]) for i in range(len(argv) - 2)
            if argv[i] == "--ro-bind" and argv[i + 1] == "/dev/null" and Path(argv[i + 2]).name in PROJECT_CONFIG
            and not os.path.lexists(argv[i + 2])]


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


def _existing(paths: Iterable[Path]) -> list[Path]:
    """Real paths of those that exist (a bind needs its source; a symlink would bind its target's path)."""
    found = []
    for path in paths:
        path = Path(os.path.expanduser(str(path)))
        if path.exists() or path.is_symlink():
            real = path.resolve()
            if real.exists() and real not in found:
                found.append(real)
    return found


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
