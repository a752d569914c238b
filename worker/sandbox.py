"""Turn a command and a sandbox policy into a bubblewrap argv; check once (cached) that bubblewrap works here.

The view inside: the whole filesystem read-only, a private /tmp, the writable roots writable, the
read-only paths read-only again even inside a writable root (the most specific path wins), secret
files of the home directory hidden. A new PID namespace whose processes all die with the sandbox, the
sandbox dying with the process that started it; the network shared unless the policy turns it off.

No Unix socket of the host: a read-only mount does not stop connect(), so /run and /var/run (the system
and user buses, docker.sock, gpg and ssh agents, databases) get an empty read-only tmpfs (what /etc links
to there, resolv.conf, bound back), and every other socket the host has bound (/proc/net/unix) gets
/dev/null over it; /tmp's are the host's and out of sight already. Only the sockets ga serves the sandbox
stay (forwards, `Policy.sockets`). In `open` mode the host's abstract sockets are part of its network.

The environment is an allow-list (`allowed_env`): PATH, LANG, LC_*, TERM, HOME, TZ and what the user
lists in `sandbox.env`, never a key variable; ga adds its own (GA_*, the gateway's placeholders).

Mount points: bubblewrap before 0.12.0 creates a missing mount point by following links, a parent one
included, and while it sets up it can reach the host's root at /oldroot (CVE-2026-87766, fixed in 0.12.0;
Debian 12 ships 0.8.0). ga makes every missing mount point inside a writable path itself first
(`make_mount_points`, no link followed, refused if a link is on the way), so bubblewrap creates nothing on
the host. What ga cannot close is a race with another process that writes the same folder at that moment
(another sandbox sharing a `sandbox.writable` path): with bubblewrap older than 0.12.0 ga says so once.

Forwards: with the network off, `Policy.forwards` still lets the sandbox reach chosen Unix sockets outside
(the model gateway, an egress proxy) through 127.0.0.1:PORT in the sandbox's own network namespace. ga's relay
host joins that namespace while bubblewrap holds the command (`relay_outside`, worker/sandbox_relay.py), so
the ports listen before the command runs and no interpreter starts inside; where it cannot join one, the
sandbox's first process (worker/sandbox_launch.py) listens, relays, and becomes the command. Each socket is
bind-mounted into the sandbox as well (GA_GATEWAY: nested fan-outs post there).
"""
from __future__ import annotations

import atexit
import functools
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from memory_shared import fsutil
from worker import policy as rules
from worker.policy import GA_HIDDEN, SECRETS  # noqa: F401  (the rule's names, re-exported for callers)

OPT_OUT = ("opt out with `sandbox: {mode: off}` in ~/.config/ga/config.yaml, GA_SANDBOX__MODE=off or the tasks file "
           "(scripts then run unsandboxed)")
# The host's environment variables a sandbox sees (besides `sandbox.env`'s and ga's own), and their prefix.
ENV_ALLOWED = ("PATH", "LANG", "TERM", "HOME", "TZ")
ENV_ALLOWED_PREFIX = "LC_"
SOCKET_FOLDERS = ("/run", "/var/run")  # where hosts keep their sockets: an empty read-only tmpfs inside
NO_SOCKETS_UNDER = ("/tmp", "/proc", "/dev", *SOCKET_FOLDERS)  # private, or covered already
FIXED_BWRAP = (0, 12, 0)  # creates mount points without following links (CVE-2026-87766)
ENV_MARK = "GA_SANDBOX"  # set by code_run in its scripts' environment: bwrap or off
LAUNCHER = Path(__file__).resolve().parent / "sandbox_launch.py"  # run from its text (`python -c`): see wrap()
GA_ROOT = Path(__file__).resolve().parents[1]  # the folder holding ga's packages (a checkout, site-packages)


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
    sockets: tuple[Path, ...] = ()  # Unix sockets ga serves the sandbox directly (the gateway's, network open)


def wrap(command: list[str], policy: Policy, bwrap: str, cwd: Path, *, proc: bool = True,
         relay_outside: tuple[str, ...] = ()) -> list[str]:
    """The argv that runs `command` in `cwd` inside the sandbox `policy` describes. `relay_outside`: bubblewrap's
    options of a worker/sandbox_relay.py Hold, whose relay host serves the forwards (no launcher inside)."""
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev"]
    # Never the host's /proc: its /proc/<pid>/root would lead out of the sandbox. Where a fresh one
    # cannot be mounted (some containers), scripts get an empty one.
    argv += ["--proc", "/proc"] if proc else ["--tmpfs", "/proc"]
    # --cap-drop ALL: run by root, bubblewrap would keep every capability (and remount / read-write).
    argv += ["--size", str(policy.tmp_size)] if policy.tmp_size else []
    argv += ["--tmpfs", "/tmp", "--unshare-pid", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    # /dev is a tmpfs of its own that a script could fill (memory, outside tmp_size): read-only at the end, but
    # for a /dev/shm of the same size as /tmp (POSIX semaphores and shared memory live there)
    argv += [*(["--size", str(policy.tmp_size)] if policy.tmp_size else []), "--tmpfs", "/dev/shm"]
    argv += _socket_folders()
    if not policy.network:
        argv.append("--unshare-net")
    for path, kind in _mounts(policy):
        if kind == "rw":
            argv += ["--bind", str(path), str(path)]
        elif kind == "ro":
            argv += ["--ro-bind", str(path), str(path)]
        elif kind == "hide" and path.is_dir():
            argv += ["--tmpfs", str(path)]
        elif kind == "absent_dir":  # a protected folder that does not exist (.git): empty and read-only
            argv += ["--tmpfs", str(path), "--remount-ro", str(path)]
        elif kind == "absent":  # a protected file that does not exist: an empty regular file, read-only
            argv += ["--ro-bind", str(empty_file()), str(path)]
        else:  # a hidden file
            argv += ["--ro-bind", "/dev/null", str(path)]
    argv += _hide_host_sockets(policy)
    for _, socket_path in policy.forwards:  # after the private /tmp: a socket there must stay visible
        argv += ["--ro-bind", str(socket_path), str(socket_path)]
    argv += [arg for folder in ("/dev", *_tmpfs_folders()) for arg in ("--remount-ro", folder)]
    argv += relay_outside
    if policy.forwards and not relay_outside:
        # its text, not its path: wherever ga is installed (an editable checkout under /tmp, hidden by the
        # private /tmp), the first process needs no file of ga's inside
        relays = [f"{port}={socket_path}" for port, socket_path in policy.forwards]
        command = [sys.executable, "-I", "-S", "-c", launcher_source(), *relays, "--", *command]
    return argv + ["--chdir", str(cwd), "--", *command]


def empty_file() -> Path:
    """An empty read-only regular file of this process's (removed at exit; made again if a cleaner took it), bound
    over a protected file that does not exist: a script reads it as empty. /dev/null there would be a device on
    a nodev mount, which every `cat *`, `grep -r` or `tar` of the working directory fails to read."""
    with _EMPTY_LOCK:
        if _EMPTY and os.path.isfile(_EMPTY[0]) and os.stat(_EMPTY[0]).st_size == 0:
            return _EMPTY[0]
        folder = Path(tempfile.mkdtemp(prefix="ga-empty-"))
        path = folder / "empty"
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444))
        atexit.register(shutil.rmtree, str(folder), True)
        _EMPTY[:] = [path]
        return path


_EMPTY: list[Path] = []
_EMPTY_LOCK = threading.Lock()


@functools.lru_cache(maxsize=1)
def launcher_source() -> str:
    return LAUNCHER.read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def _tmpfs_folders() -> tuple[str, ...]:
    """The socket folders that are folders of their own here (/var/run is usually a link to /run)."""
    return tuple(f for f in SOCKET_FOLDERS if os.path.isdir(f) and not os.path.islink(f))


@functools.lru_cache(maxsize=1)
def _socket_folders() -> tuple[str, ...]:
    """An empty tmpfs over each socket folder, with what /etc links into it (resolv.conf under systemd-resolved)
    bound back; made read-only at the end of the argv, after the mounts that may land inside."""
    argv: list[str] = []
    for folder in _tmpfs_folders():
        argv += ["--tmpfs", folder]
    for name in ("/etc/resolv.conf", "/etc/hosts", "/etc/localtime"):
        target = os.path.realpath(name)
        if target != name and os.path.isfile(target) and any(target.startswith(f + "/") for f in _tmpfs_folders()):
            argv += ["--ro-bind", target, target]
    return tuple(argv)


def _hide_host_sockets(policy: Policy) -> list[str]:
    """/dev/null over every Unix socket the host has bound outside the folders covered already, except those ga
    serves this sandbox; listed when the sandbox starts (a socket bound later is not covered: see the doc)."""
    keep = {str(p) for p in (*policy.sockets, *(path for _, path in policy.forwards))}
    argv: list[str] = []
    for path in _host_socket_paths():
        if path not in keep:
            argv += ["--ro-bind", "/dev/null", path]
    return argv


def _host_socket_paths() -> list[str]:
    """The real paths of the Unix sockets bound in this network namespace (/proc/net/unix; abstract ones have
    none) outside NO_SOCKETS_UNDER (most are there: those are skipped before any system call)."""
    try:
        with open("/proc/net/unix", "rb") as table:
            lines = table.read().decode(errors="replace").splitlines()[1:]
    except OSError:
        return []
    covered = tuple(f + "/" for f in NO_SOCKETS_UNDER)
    found: list[str] = []
    for line in lines:
        fields = line.split(None, 7)
        if len(fields) < 8 or not fields[7].startswith("/") or fields[7].startswith(covered):
            continue
        path = os.path.realpath(fields[7])
        if path not in found and not path.startswith(covered) and _is_socket(path):
            found.append(path)
    return found


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except OSError:
        return False


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
    """The files and folders `argv` will create as empty mount points (missing before it runs: the protected names
    a sandbox may not create): code_run removes them afterwards, when they are still the empty regular files or
    folders made for them. A hidden path exists, so it is never one."""
    empty = ("/dev/null", str(empty_file()))
    files = [argv[i + 2] for i in range(len(argv) - 2) if argv[i] == "--ro-bind" and argv[i + 1] in empty]
    folders = [argv[i + 1] for i in range(len(argv) - 3)
               if argv[i] == "--tmpfs" and argv[i + 2] == "--remount-ro" and argv[i + 3] == argv[i + 1]]
    return [Path(p) for p in [*files, *folders] if not os.path.lexists(p)]


def remove_placeholders(paths: Iterable[Path]) -> None:
    for path in paths:
        try:
            info = path.lstat()
            if stat.S_ISREG(info.st_mode) and info.st_size == 0:
                path.unlink()
            elif stat.S_ISDIR(info.st_mode):
                path.rmdir()  # only while empty
        except OSError:
            pass


def _runtime_under_tmp() -> list[Path]:
    """The interpreter, its prefixes, the import path and ga's own packages where they live under /tmp (a
    virtualenv or a checkout there, an editable install's): the private /tmp would hide them, and scripts could
    not even start, nor import ga for a nested fan-out."""
    places = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable)),
              *sys.path, *os.environ.get("PYTHONPATH", "").split(os.pathsep), str(GA_ROOT)]
    return [Path(p) for p in places if p and Path(p).resolve().is_relative_to("/tmp")]


def allowed_env(env: dict[str, str], names: Iterable[str] = (), key_names: Iterable[str] = ()) -> dict[str, str]:
    """What of the host's `env` a sandbox gets: ENV_ALLOWED, LC_*, and `names` (`sandbox.env`); never a key
    variable (`key_names`: the gateway adds the key outside), even one the user listed."""
    allowed, keys = {*ENV_ALLOWED, *names}, set(key_names)
    return {k: v for k, v in env.items() if (k in allowed or k.startswith(ENV_ALLOWED_PREFIX)) and k not in keys}


def make_mount_points(argv: list[str], writable: Iterable[Path]) -> None:
    """Create the missing mount points of `argv` that lie inside a writable path, as bubblewrap would (an empty
    file for a file's bind, else a folder), without following any link: Unsafe (an OSError, one line) when a
    link or a non-folder is on the way. See the module doc (CVE-2026-87766)."""
    roots = [Path(os.path.realpath(p)) for p in writable]
    for source, dest in _mount_destinations(argv):
        path = Path(dest)
        if os.path.lexists(path) or not any(path.is_relative_to(r) and path != r for r in roots):
            continue
        root = max((r for r in roots if path.is_relative_to(r)), key=lambda r: len(r.parts))
        *folders, name = path.relative_to(root).parts
        as_file = source is not None and not os.path.isdir(source)
        with closing(fsutil.Folder(root)) as top:
            folder = top.sub(Path(*folders), create=True) if folders else top
            try:
                if as_file:
                    os.close(folder.create(name, mode=0o600))
                else:
                    os.mkdir(name, 0o755, dir_fd=folder.fd)
            except FileExistsError:
                pass  # made meanwhile: bubblewrap finds it (it follows no link to a file it need not create)
            finally:
                if folder is not top:
                    folder.close()


def _mount_destinations(argv: list[str]) -> list[tuple[Optional[str], str]]:
    """(source or None, destination) of every mount in a bubblewrap argv, up to its `--`."""
    found: list[tuple[Optional[str], str]] = []
    i = 1
    while i < len(argv) and argv[i] != "--":
        arg = argv[i]
        if arg in ("--bind", "--ro-bind", "--dev-bind", "--bind-try", "--ro-bind-try"):
            found.append((argv[i + 1], argv[i + 2]))
            i += 3
        elif arg in ("--tmpfs", "--dev", "--proc", "--mqueue", "--dir"):
            found.append((None, argv[i + 1]))
            i += 2
        elif arg in ("--size", "--perms", "--chdir", "--remount-ro", "--uid", "--gid", "--hostname", "--cap-drop",
                     "--cap-add", "--exec-label", "--file-label", "--argv0", "--seccomp", "--userns", "--pidns",
                     "--info-fd", "--block-fd"):
            i += 2
        elif arg in ("--setenv", "--symlink", "--file", "--bind-data", "--ro-bind-data"):
            i += 3
        else:
            i += 1
    return found


def bwrap_version(bwrap: str) -> Optional[tuple[int, ...]]:
    """bubblewrap's version (from `--version`), None when it does not say."""
    return _version(shutil.which(bwrap) or bwrap)


@functools.lru_cache(maxsize=8)
def _version(binary: str) -> Optional[tuple[int, ...]]:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = out.split()
    try:
        return tuple(int(n) for n in words[-1].split(".")) if words else None
    except ValueError:
        return None


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
