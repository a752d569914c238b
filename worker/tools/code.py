"""code_run: a python or bash script in its own process group inside the worker's directory, sandboxed.

With `sandbox.mode: bwrap` (the default) the script runs under bubblewrap (worker/sandbox.py): only the
workdir and a private /tmp are writable; the memory store, GA_HOME and the run directories are read-only.
Its processes live in their own PID namespace, so they end with the script (or with this process). No secret
enters its environment: model calls and nested fan-outs go through the task's gateway (worker/gateway.py). It
runs under `sandbox.limits` (worker/sandbox_limits.py); with `sandbox.network` a list of hosts it reaches only
those, through ga's egress proxy (worker/egress.py).
"""
from __future__ import annotations

import dataclasses
import functools
import os
import re
import select
import signal
import subprocess
import sys
import textwrap
from contextlib import closing
from functools import partial
from pathlib import Path
from typing import BinaryIO, Literal, Optional

import structlog
from pydantic import BaseModel, Field, field_validator, model_validator

from memory_shared import fsutil
from worker import egress, gateway, sandbox, sandbox_relay, telemetry
from worker.context import output_cap
from worker.context.cut import cut_marker
from worker.modelconfig import key_env_names
from worker.paths import PathError, resolve_read
from worker.sandbox_disk import DiskWatch
from worker.sandbox_limits import Limits, SandboxCgroup, confine, verdict
from worker.tools.base import FunctionTool, ToolContext, ToolState, optional_str
from worker.types import ToolResult
from worker.usage import Account

ANSWER_ENV = "GA_ANSWER"  # a task check's script reads the answer here (worker/taskcheck.py)
SCRIPT_DIR = ".ga"  # scripts and their output files, kept so tracebacks and logs stay inspectable
TYPE_ALIASES = {"py": "python", "python3": "python", "sh": "bash", "shell": "bash"}
PARENT_ONLY = ("GA_RAY_ADDRESS", "RAY_ADDRESS")  # the gateway runs nested fan-outs: scripts never join the cluster
log = structlog.get_logger("worker.code")


SHELL_COMMANDS = {"ls", "cat", "echo", "printf", "grep", "egrep", "wc", "head", "tail", "find", "sed", "awk", "cd", "pwd",
                  "mkdir", "rm", "cp", "mv", "touch", "chmod", "python", "python3", "pip", "pip3", "curl", "wget", "sort",
                  "uniq", "cut", "tr", "xargs", "export", "sqlite3", "jq", "date", "env", "which", "du", "df", "tar",
                  "unzip", "git", "bash", "sh", "seq", "diff", "stat", "file", "sudo", "apt", "apt-get", "npm", "node"}


SHELL_WORD = re.compile(r"([\w./-]+)(?:$|[ \t]+(?![=(.\[:,]|[-+*/%]=))")  # a word not followed by = ( . [ : ,


class CodeRunArgs(BaseModel):
    script: str = Field(description="the whole script: python source, or shell commands with type bash; or leave "
                        "it out and put the script in a ```python or ```bash block of your reply")
    type: Literal["python", "bash"] = Field("python", description="python or bash; a script that is plainly shell "
                                            "(ls, cat, grep, python -c ...) and not Python runs as bash")
    timeout: int = Field(60, description="seconds, max 600")
    cwd: Optional[str] = Field(None, json_schema_extra=optional_str)

    @model_validator(mode="before")
    @classmethod
    def _infer(cls, data: object) -> object:
        """`code` is read as `script` (GenericAgent's name for it); a missing type follows the script."""
        if not isinstance(data, dict):
            return data
        if "script" not in data and "code" in data:
            data = {**{k: v for k, v in data.items() if k != "code"}, "script": data["code"]}
        script = data.get("script")
        if isinstance(script, str) and (not data.get("type") or (data.get("type") in ("python", "py", "python3")
                                                                  and plainly_shell(script) and not _compiles(script))):
            # no type, or "python" on a shell command line that is no Python (the 1.5B model's `python -c '...'`)
            data = {**data, "type": "bash" if plainly_shell(script) else "python"}
        return data

    @field_validator("type", mode="before")
    @classmethod
    def _alias(cls, value: object) -> object:  # names models often use for the same interpreters
        return TYPE_ALIASES.get(value, value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _dedent(self) -> "CodeRunArgs":
        """A python script whose first line is indented cannot run as sent (IndentationError): small models indent
        the script inside the JSON as they would in Python source (the live 1.5B held-out JSON filter). Its
        common margin is taken off; a script that starts at its margin is left as it is."""
        if self.type == "python" and self.script.lstrip("\r\n")[:1] in (" ", "\t"):
            self.script = textwrap.dedent(self.script)
        return self


def _compiles(script: str) -> bool:
    try:
        compile(script, "<script>", "exec")
        return True
    except (SyntaxError, ValueError):
        return False


def plainly_shell(script: str) -> bool:
    """Whether a script given without a type is shell: a shell shebang, or a first line that starts with a shell
    command used as one (`ls -la`, `python -c '...'`, `cat data.csv | wc -l`; not `file = open(...)`)."""
    lines = [line.strip() for line in script.splitlines() if line.strip() and not line.strip().startswith("# ")]
    if not lines:
        return False
    if lines[0].startswith("#!"):
        return "python" not in lines[0] and any(word in lines[0] for word in ("sh", "bash", "zsh"))
    found = SHELL_WORD.match(lines[0])
    return bool(found) and (found.group(1) in SHELL_COMMANDS or found.group(1).startswith(("./", "/bin/", "/usr/bin/")))


def code_run(ctx: ToolContext, args: CodeRunArgs) -> ToolResult:
    return run_script(ctx, args)


CODE_RUN = FunctionTool("code_run", "Run a python or bash script in the working directory; returns the exit code and"
                        " output.", CodeRunArgs, code_run)


def run_script(ctx: ToolContext, args: CodeRunArgs, check_answer: Optional[str] = None) -> ToolResult:
    """code_run's work. With `check_answer` it runs a task's check (worker/taskcheck.py), isolated: python with -I,
    and a clean environment (the allow-list, the answer in GA_ANSWER, the gateway's placeholders), so nothing the
    task left in its directory (a sitecustomize.py, a module named like one the check imports) is imported."""
    isolated = check_answer is not None
    workdir = ctx.workdir.resolve()
    try:
        cwd = _resolve_cwd(ctx, args.cwd) if args.cwd else workdir
    except PathError as exc:
        return ToolResult(str(exc), ok=False, evidence=False)
    policy = ctx.settings.sandbox
    wrap = policy.mode == "bwrap"
    shared = policy.network == "open"
    problem = sandbox.support_problem(policy.bwrap, shared) if wrap else None
    if wrap and not problem and (linked := ctx.policy.link_refusal()):  # worker/policy.py: a link cannot be held
        problem = f"code_run refused: {linked}"
    if problem:  # fail closed: never run unsandboxed because the sandbox is missing
        log.error("sandbox_unavailable", task=ctx.task_id, problem=problem)
        return ToolResult(problem, ok=False, evidence=False, stop="failed", data={"reason": problem})
    limit = max(1, ctx.settings.worker.code_timeout_max)
    timeout = min(max(1, args.timeout), limit)
    try:
        script_path, output = _script_files(workdir, args.type, args.script, ctx.state(Scripts))
    except OSError as exc:  # the task made its .ga unusable (a symlink there): say so, run nothing
        return ToolResult(f"error: {SCRIPT_DIR}/{exc}", ok=False, evidence=False)
    python = [sys.executable, "-I", "-u"] if isolated else [sys.executable, "-u"]
    command = [*python, str(script_path)] if args.type == "python" else ["bash", str(script_path)]
    env = _check_env(ctx, check_answer) if check_answer is not None else _child_env(ctx, cwd, sandboxed=wrap)
    limits = Limits.of(ctx.settings.sandbox.limits)
    try:  # rlimits always (bubblewrap and all it starts inherit them); a pids cgroup where ga may make one
        confinement, cgroup = confine(limits, sandboxed=wrap)
    except FileNotFoundError as exc:
        return ToolResult(str(exc), ok=False, evidence=False, stop="failed", data={"reason": str(exc)})
    scripts = ctx.state(Scripts)
    gate = None if policy.network == "off" else scripts.gateway_for_task()
    if gate is not None:
        env[gateway.ENV_SOCKET] = str(gate.socket_path)
        gate.traceparent = env.get("TRACEPARENT")
    placeholders: list[Path] = []
    hold: Optional[sandbox_relay.Hold] = None  # the forwards relayed from outside: the command waits for them
    forwards: tuple[tuple[int, Path], ...] = ()
    if wrap:
        confined = task_policy(ctx, env, gate, limits)
        if gate is not None and shared:  # the host's network: the gateway's socket itself stays reachable
            confined = dataclasses.replace(confined, sockets=(gate.socket_path,))
        if gate is not None and any(gate.folder.is_relative_to(root) for root in confined.writable):
            problem = (f"code_run refused: the model gateway's socket {gate.folder} would be writable from the sandbox; "
                       "point TMPDIR outside the task's writable paths")
            output.close()
            if cgroup is not None:
                cgroup.remove()
            return ToolResult(problem, ok=False, evidence=False, stop="failed", data={"reason": problem})
        if gate is not None and not shared:
            env.update(OPENAI_BASE_URL=f"http://127.0.0.1:{gateway.PORT}/v1", OPENAI_API_KEY=gateway.PLACEHOLDER_KEY)
        proc_ok, forwards = sandbox.mounts_proc(policy.bwrap, shared), confined.forwards
        if forwards and sandbox_relay.usable(policy.bwrap, proc_ok):
            hold = sandbox_relay.Hold()
        command = sandbox.wrap(command, confined, policy.bwrap, cwd, proc=proc_ok,
                               relay_outside=hold.bwrap_args if hold else ())
        placeholders = sandbox.placeholders(command)
        try:
            sandbox.make_mount_points(command, confined.writable)
        except OSError as exc:  # a link where a mount point goes: it was put there to be followed
            problem = f"code_run refused: a mount point of the sandbox cannot be made safely ({exc})"
            if hold is not None:
                hold.close()
            output.close()
            sandbox.remove_placeholders(placeholders)
            if cgroup is not None:
                cgroup.remove()
            return ToolResult(problem, ok=False, evidence=False, stop="failed", data={"reason": problem})
        _warn_shared_mount_race(policy.bwrap, confined.writable[1:])
        if shared:
            _warn_open_network(ctx)
    elif policy.mode == "off":
        _warn_unsandboxed(ctx.task_id, scripts)
    command = [*confinement, *command]
    with os.fdopen(os.dup(output.fileno()), "wb") as out:  # read back through `output`, never by its path
        # Output goes to a file, not a pipe: background children that keep it open cannot block us.
        try:
            proc = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True,
                                    pass_fds=hold.child_fds if hold else ())
        except BaseException:
            if hold is not None:
                hold.close()
            raise
    scripts.groups.append(proc.pid)  # killed at the task's end if still alive then
    killer = partial(_kill_group, proc.pid)
    ctx.kill.append(killer)
    if ctx.cancelled.is_set():  # cancelled while it started: cancel() may have run before the killer was listed
        killer()
    disk = DiskWatch(workdir, limits.disk, killer)
    try:
        relayed = _release(hold, forwards, proc, killer)
        code = wait_exited(proc, timeout) if relayed is None else proc.wait()
        status = f"exit code {code}" if relayed is None else f"code_run failed: {relayed} (exit code {code})"
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        code = proc.wait()
        status = f"timeout after {timeout}s: killed the script's whole process group (exit code {code})"
    finally:
        if hold is not None:  # only now: a hold closed while the sandbox lives lets its command run
            if proc.poll() is None and hold.holding:
                killer()
                proc.wait()
            hold.close()
        ctx.kill.remove(killer)
        hit = disk.stop()  # killed for the disk limit: named first
        if gate is not None:  # a nested run lives only as long as the code_run that asked for it
            gate.cancel_nested(wait=gateway.NESTED_GRACE)
    if not _group_alive(proc.pid):  # nothing left in the background: forget it (its id may be reused)
        scripts.groups.remove(proc.pid)
    sandbox.remove_placeholders(placeholders)
    if args.timeout > limit:
        status += f"; timeout capped at {limit}s"
    cap = output_cap(ctx.settings.context, "code_run", ctx.calls_in_turn)
    with output:
        text, size = _read_ends(output.fileno(), cap)
    hits = _limits_hit(scripts, cgroup)
    if hit or (not status.startswith("timeout") and (hit := verdict(code, text, limits, *hits))):
        status += f"; {hit}"
    if size > cap:
        status += f"; full output in {script_path.with_suffix('.out').relative_to(workdir).as_posix()}"
    return ToolResult(f"{status}\n{text}", ok=code == 0, evidence=code == 0,
                      data={"exit_code": code, "timed_out": status.startswith("timeout")})


def _release(hold: Optional[sandbox_relay.Hold], forwards: tuple[tuple[int, Path], ...], proc: subprocess.Popen,
             killer: partial) -> Optional[str]:
    """Start the relays of a held sandbox and let its command go: None, or why not (the sandbox killed unrun)."""
    if hold is None:
        return None
    problem = hold.release(forwards)
    if problem:
        killer()
        proc.wait()
        return f"the gateway's relay could not start ({problem})"
    return None


def wait_exited(proc: subprocess.Popen, timeout: float) -> int:
    """`proc`'s exit code the moment it exits; TimeoutExpired as Popen.wait raises it. Popen.wait(timeout) polls
    with doubling sleeps (1, 2, 4 ... 50 ms), so a sandbox that ended at 32 ms was seen at 63 ms; a pidfd becomes
    readable when the process ends. Without one (Linux before 5.3), Popen's own wait."""
    try:
        fd = os.pidfd_open(proc.pid)
    except OSError:
        return proc.wait(timeout=timeout)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if not poller.poll(timeout * 1000):
            raise subprocess.TimeoutExpired(proc.args, timeout)
    finally:
        os.close(fd)
    return proc.wait()


def _limits_hit(scripts: Scripts, cgroup: Optional[SandboxCgroup]) -> tuple[int, int]:
    """(forks refused, processes killed for memory) in the script's cgroup; the cgroup is removed now, or at the
    task's end if still busy."""
    if cgroup is None:
        return 0, 0
    hits = cgroup.refused_forks(), cgroup.oom_kills()
    if not cgroup.remove():
        scripts.busy_cgroups.append(cgroup)
    return hits


def task_policy(ctx: ToolContext, env: dict[str, str], gate: Optional[gateway.Gateway] = None,
                limits: Optional[Limits] = None) -> sandbox.Policy:
    """The task's sandbox, derived from its one policy (ctx.policy, worker/policy.py): what it may write, what
    stays read-only or hidden inside that; the network as `sandbox.network` says, the gateway reachable unless it
    is off (through a relay port, or with the host's network the socket itself, read-only)."""
    rules = ctx.policy
    readonly = [path for path, _ in rules.state]
    network = rules.network
    forwards: tuple[tuple[int, Path], ...] = ()
    if gate is not None and network == "open":  # the host's network: the socket itself, no relay port
        readonly.append(gate.folder)
    elif gate is not None:
        forwards = ((gateway.PORT, gate.socket_path),)
    if isinstance(network, list):  # an allow-list: besides the gateway, only ga's filtering proxy
        forwards += ((egress.PORT, egress.proxy_for(network)),)
        env.update(egress.sandbox_env())
    return sandbox.Policy(network=network == "open", writable=rules.writable, forwards=forwards,
                          readonly=tuple(readonly), hidden=rules.hidden, home=rules.home,
                          tmp_size=limits.tmp_size if limits else None, config_dirs=rules.config_dirs)


class Scripts(ToolState):
    """What code_run keeps for a task: the process groups it started that may still be alive, the number of its
    last .ga/code_N script, the sandbox cgroups still busy when their script ended, and the task's model gateway
    (started at the first code_run that needs one). At the task's end the leftovers are killed, then their
    cgroups removed, then the gateway closed."""

    def __init__(self, ctx: ToolContext) -> None:
        super().__init__(ctx)
        self.groups: list[int] = []
        self.numbered = 0
        self.busy_cgroups: list[SandboxCgroup] = []
        self.gateway: Optional[gateway.Gateway] = None
        self.warned_unsandboxed = False

    def gateway_for_task(self) -> gateway.Gateway:
        """The task's model gateway, started at its first use."""
        if self.gateway is None:
            ctx = self.ctx
            account = ctx.account if ctx.account is not None else Account()
            parent = gateway.Parent(ctx.task_id, ctx.workdir, ctx.settings, {k: str(v) for k, v in ctx.env.items()},
                                    account)
            self.gateway = gateway.Gateway(ctx.settings, ctx.model_config, parent)
            ctx.kill.append(self.gateway.cancel_nested)  # the task's cancel (timeout, stop) stops its nested runs
        return self.gateway

    def kill_leftovers(self) -> int:
        """Kill the process groups still alive; returns how many."""
        killed = sum(_kill_group(pgid) for pgid in self.groups)
        self.groups.clear()
        return killed

    def close(self) -> None:
        try:
            self.kill_leftovers()
            for cgroup in self.busy_cgroups:
                cgroup.remove(tries=10)
        finally:
            if self.gateway is not None:
                self.gateway.close()


def _warn_shared_mount_race(bwrap: str, shared: tuple[Path, ...]) -> None:
    """Once a process: a writable path besides the workdir, which another sandbox may share, can race bubblewrap's
    mount points before 0.12.0 (worker/sandbox.py's doc)."""
    version = sandbox.bwrap_version(bwrap) if shared and not _WARNED_RACE else None
    if version is not None and version < sandbox.FIXED_BWRAP:
        _WARNED_RACE.append(bwrap)
        log.warning("bubblewrap_mount_race", version=".".join(map(str, version)),
                    note="bubblewrap before 0.12.0 can be raced into creating a file outside the sandbox by another "
                         "sandbox writing the same sandbox.writable path (CVE-2026-87766); upgrade bubblewrap")


_WARNED_RACE: list[str] = []


def _key_names(ctx: ToolContext) -> set[str]:
    """Every api_key_env of models.yaml and of the task's model: never in a sandbox's environment."""
    own = getattr(ctx.model_config, "api_key_env", None)
    return {*_configured_key_names(), *([own] if own else [])}


@functools.lru_cache(maxsize=1)
def _configured_key_names() -> frozenset[str]:
    """Read once a process: the model files are the user's and this process's, not a task's."""
    return key_env_names()


def _warn_open_network(ctx: ToolContext) -> None:
    run = ctx.env.get("GA_RUN_DIR") or ctx.task_id
    if run not in _WARNED_OPEN:  # once per run (a fan-out's tasks share it)
        _WARNED_OPEN.add(run)
        log.warning("sandbox_network_open", task=ctx.task_id,
                    note="code_run shares the host's network (sandbox.network: open): scripts can reach anything")


_WARNED_OPEN: set[str] = set()


def _warn_unsandboxed(task_id: str, scripts: Scripts) -> None:
    if not scripts.warned_unsandboxed:  # once per task: every run that uses `sandbox: off` says so
        scripts.warned_unsandboxed = True
        log.warning("sandbox_off", task=task_id,
                    note="code_run runs unsandboxed (sandbox.mode: off): it can write wherever this user can")


def _resolve_cwd(ctx: ToolContext, cwd: str) -> Path:
    w = ctx.settings.worker
    path = resolve_read(cwd, ctx.workdir, w.allow_read, w.allow_write)
    if not path.is_dir():
        raise PathError(f"{cwd}: no such directory in the worker's directory; create it first")
    return path


def _script_files(workdir: Path, kind: str, script: str, scripts: Scripts) -> tuple[Path, BinaryIO]:
    """Write the next .ga/code_N script and create its output file; returns the script's path and the output
    file, open. The task can write .ga: nothing there is followed, and a name already taken is never reused."""
    with closing(fsutil.Folder(workdir)) as top, closing(top.sub(SCRIPT_DIR, create=True)) as folder:
        n = scripts.numbered + 1
        while True:
            try:
                out = folder.create(f"code_{n}.out", os.O_RDWR)
                break
            except FileExistsError:  # a resumed task keeps its earlier scripts
                n += 1
        scripts.numbered = n
        name = f"code_{n}{'.py' if kind == 'python' else '.sh'}"
        try:
            folder.replace(name, script.encode("utf-8"))
        except BaseException:
            os.close(out)
            raise
    return workdir / SCRIPT_DIR / name, os.fdopen(out, "rb")


def _child_env(ctx: ToolContext, cwd: Path, sandboxed: bool) -> dict[str, str]:
    """A script's environment: sandboxed, the host's allow-list (sandbox.allowed_env) and ga's own variables;
    with `sandbox: off` (the user's explicit choice), the host's whole environment."""
    env = sandbox.allowed_env(dict(os.environ), ctx.settings.sandbox.env, _key_names(ctx)) if sandboxed else \
        dict(os.environ)
    env["GA_HOME"] = str(ctx.settings.home_dir)
    env["PYTHONUNBUFFERED"] = "1"  # stdout and stderr interleave in the order they were written
    # The script file lives in .ga/, so put the cwd on the import path as `python script.py` would; then the
    # path ga itself was started with (the user's, no secret), then ga's own packages where they are not
    # installed (a checkout, an editable install): a folder in the cwd named like one of them (a project's
    # configs/) is then a namespace portion that ga's package, found later, wins over.
    own = [] if sandbox.GA_ROOT.name in ("site-packages", "dist-packages") else [str(sandbox.GA_ROOT)]
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(cwd), os.environ.get("PYTHONPATH", ""), *own) if p)
    root = getattr(ctx.memory, "root", None)
    if root is not None:
        env["GA_MEMORY"] = str(root)  # the pinned snapshot, read-only: run L3 scripts from it
    env[sandbox.ENV_MARK] = ctx.settings.sandbox.mode
    env.update({k: str(v) for k, v in ctx.env.items() if k not in PARENT_ONLY})
    env.update(telemetry.child_env())  # a nested fan-out joins this tool call's trace
    return env


def _check_env(ctx: ToolContext, answer: str) -> dict[str, str]:
    """A check's environment: the allow-list and the answer; no import path of the task's, and a Python started
    from a bash check puts neither its cwd nor its script's folder on it either (PYTHONSAFEPATH)."""
    env = sandbox.allowed_env(dict(os.environ), ctx.settings.sandbox.env, _key_names(ctx))
    env.update(PYTHONSAFEPATH="1", PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
    env[sandbox.ENV_MARK] = ctx.settings.sandbox.mode
    env[ANSWER_ENV] = answer
    return env


def _kill_group(pgid: int) -> int:
    try:
        os.killpg(pgid, signal.SIGKILL)
        return 1
    except (ProcessLookupError, PermissionError):
        return 0


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _read_ends(fd: int, limit: int) -> tuple[str, int]:
    """The output cut head+tail to `limit` chars, reading only its ends (a runaway print stays cheap), and its
    size in bytes."""
    size = os.fstat(fd).st_size
    keep = limit if size <= limit else max(0, limit - len(cut_marker(size)))
    head, tail = fsutil.read_ends(fd, size, keep)
    text = head.decode("utf-8", errors="replace")
    if size <= limit:
        return text, size
    return text + cut_marker(size - len(head) - len(tail)) + tail.decode("utf-8", errors="replace"), size
