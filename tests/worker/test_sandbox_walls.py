"""Issue 30, item 6: a tighter sandbox, each attack through a real `ga run` (or `ga fanout`), the scripted model
as the attacker and real bubblewrap: secrets under names a deny-list misses, host Unix sockets, memory held
by many processes, a working directory filled past its quota, a check fooled by a planted sitecustomize.py,
and bubblewrap creating mount points on the host.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import threading
from pathlib import Path

import pytest
import yaml

from tests.ga_support import run_ga

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


@pytest.fixture
def place():
    """HOME, GA_HOME and the project outside /tmp (the sandbox's private /tmp would hide them anyway)."""
    root = Path(tempfile.mkdtemp(prefix="ga-walls-", dir="/var/tmp"))
    for name in ("home", "ga-home", "project"):
        (root / name).mkdir()
    yield root
    shutil.rmtree(root, ignore_errors=True)


def user_config(place: Path, text: str) -> None:
    folder = place / "home" / ".config" / "ga"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(text)


def attack(place: Path, calls: list[tuple[str, str]], env: dict[str, str | None] | None = None,
           timeout: float = 300) -> list[str]:
    """`ga run` in place/project whose scripted model makes these (type, script) code_runs, then answers;
    returns every code_run result, in order."""
    turns = [{"content": "step", "tool_calls": [{"name": "code_run", "arguments": {"type": kind, "script": script,
                                                                                  "timeout": 120}}]}
             for kind, script in calls]
    turns.append({"content": "done"})
    model = place / "model.yaml"
    model.write_text(yaml.safe_dump({"tasks": [{"match": ".*", "turns": turns}]}))
    done = run_ga("run", "attack", "--model", f"scripted:{model}", "--json", cwd=place / "project", timeout=timeout,
                  env={"OPENAI_API_KEY": None, "GA_MODEL": None, "HOME": str(place / "home"),
                       "GA_HOME": str(place / "ga-home"), **(env or {})})
    assert done.returncode in (0, 1) and done.stdout.strip(), done.stderr[-2000:]
    (history,) = (place / "project" / "runs").glob("*/tasks/*/history.jsonl")
    results = [r["output"] for line in history.read_text().splitlines()
               for r in json.loads(line).get("tool_results", []) if r["name"] == "code_run"]
    assert len(results) == len(calls), results
    return results


PLANTED = {"DATABASE_URL": "postgres://app:DBPASS-do-not-leak@db.internal/app", "MYSQL_PWD": "MYSQL-do-not-leak",
           "SERVICE_AUTH": "Basic AUTH-do-not-leak", "LDAP_PASS": "LDAP-do-not-leak",
           "MAPS_APIKEY": "APIKEY-do-not-leak", "SLACK_WEBHOOK_URL": "https://hooks.example/WEBHOOK-do-not-leak",
           "SENTRY_DSN": "https://DSN-do-not-leak@sentry.example/1",
           "TLS_PEM": "-----BEGIN PRIVATE KEY-----\nPEM-do-not-leak\n-----END PRIVATE KEY-----"}


def test_a_secret_under_any_name_stays_out_and_only_listed_names_come_in(place: Path) -> None:
    """The attack: the deny-list passed DATABASE_URL with its password, MYSQL_PWD, *_AUTH, *_PASS, *_APIKEY,
    webhook URLs, DSNs and PEM variables. Now only an allow-list, and what the user lists in sandbox.env."""
    user_config(place, "sandbox:\n  env: [BUILD_FLAVOUR]\n")
    (result,) = attack(place, [("bash", "env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; echo end")],
                       env={**PLANTED, "BUILD_FLAVOUR": "listed-by-the-user", "LANG": "C.UTF-8", "TZ": "UTC"})
    assert result.rstrip().endswith("end"), result[-500:]
    assert "do-not-leak" not in result, [line for line in result.splitlines() if "do-not-leak" in line]
    assert "BUILD_FLAVOUR=listed-by-the-user" in result and "TZ=UTC" in result and "LANG=C.UTF-8" in result
    assert "GA_SANDBOX=bwrap" in result and "OPENAI_API_KEY=ga-gateway" in result


class Listener:
    """A Unix socket of the host's, answering "HOST-SOCKET" to whoever connects."""

    def __init__(self, path: Path):
        self.path = path
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(str(path))
        self.server.listen(8)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"HOST-SOCKET")

    def close(self) -> None:
        self.server.close()
        self.path.unlink(missing_ok=True)


CONNECT = """
import socket, sys
for path in sys.argv[1:]:
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(3)
        s.connect(path)
        print(path, "reached", s.recv(64).decode())
    except OSError as exc:
        print(path, "refused", type(exc).__name__)
"""


@pytest.mark.parametrize("network", ["gateway", "open"])
def test_no_host_unix_socket_is_reachable(place: Path, network: str) -> None:
    """The attack: `/` bound read-only does not stop connect(): docker.sock, the user bus and gpg-agent (here: a
    listener in /run, and one in a folder of no special name) answered from every network mode."""
    run_folder = Path(tempfile.mkdtemp(prefix="ga-walls-", dir="/run"))
    elsewhere = place / "sockets"
    elsewhere.mkdir()
    listeners = [Listener(run_folder / "daemon.sock"), Listener(elsewhere / "agent.sock")]
    user_config(place, f"sandbox:\n  network: {network}\n")
    script = CONNECT.replace("sys.argv[1:]", repr([str(listener.path) for listener in listeners]))
    try:
        (result,) = attack(place, [("python", script)])
    finally:
        for listener in listeners:
            listener.close()
        shutil.rmtree(run_folder, ignore_errors=True)
    assert "HOST-SOCKET" not in result and "reached" not in result, result
    assert result.count(" refused ") == 2, result


def test_four_processes_cannot_each_hold_the_sandboxs_memory(place: Path) -> None:
    """The attack: `sandbox.limits.memory` was per process; four processes held 400 MiB each under 512 MiB."""
    user_config(place, "sandbox:\n  limits: {memory: 512MiB}\n")
    hold = ("import sys, time\nblock = b'\\x01' * (400 << 20)\nprint('held', flush=True)\ntime.sleep(4)\n")
    script = ("import subprocess, sys\n"
              f"children = [subprocess.Popen([sys.executable, '-c', {hold!r}]) for _ in range(4)]\n"
              "codes = [c.wait() for c in children]\nprint('codes', codes)\nsys.exit(max(abs(c) for c in codes))\n")
    (result,) = attack(place, [("python", script)])
    assert "codes [0, 0, 0, 0]" not in result, result[:600]  # the kernel killed inside the sandbox
    assert "memory limit of the whole sandbox (512 MiB; sandbox.limits.memory)" in result.splitlines()[0], result[:600]


def test_a_script_cannot_fill_the_disk_past_the_working_directorys_limit(place: Path) -> None:
    """The attack: 4 GB in one code_run. Here 256 MiB may be held; the script writes 64 MiB files (each under
    the file size limit) until it is stopped."""
    user_config(place, "sandbox:\n  limits: {disk: 256MiB}\n")
    fill = "for i in $(seq 1 16); do head -c 64M /dev/zero > fill_$i.bin; done; echo wrote-all"
    (result,) = attack(place, [("bash", fill)])
    held = sum(p.stat().st_blocks * 512 for p in (place / "project").glob("fill_*.bin"))
    assert "wrote-all" not in result, result[:400]
    assert "killed: disk limit of the working directory (256 MiB; sandbox.limits.disk)" in result.splitlines()[0], \
        result[:400]
    assert held < 512 << 20, held  # the limit, and what the disk takes between two looks; the script wanted 1 GiB


def test_a_planted_sitecustomize_does_not_make_a_failing_check_pass(place: Path) -> None:
    """The attack: the task writes sitecustomize.py into its directory, which was on the check's Python path;
    it exits 0 at start-up, so a check that always fails reported "passed"."""
    plant = "printf 'import os\\nos._exit(0)\\n' > sitecustomize.py; cp sitecustomize.py json.py; echo planted"
    model = place / "model.yaml"
    model.write_text(yaml.safe_dump({"tasks": [{"match": ".*", "turns": [
        {"content": "step", "tool_calls": [{"name": "code_run", "arguments": {"type": "bash", "script": plant}}]},
        {"content": "all done"}]}]}))
    tasks = place / "project" / "tasks.yaml"
    tasks.write_text(yaml.safe_dump({"retries": 0, "defaults": {"model": f"scripted:{model}"}, "tasks": [
        {"id": "py", "prompt": "plant it", "check": {"script": "import json, sys\nsys.exit(1)", "type": "python"}},
        {"id": "sh", "prompt": "plant it", "check": {"script": "python3 -c 'import json, sys; sys.exit(1)'"}}]}))
    done = run_ga("fanout", str(tasks), "--json", "--no-preflight", cwd=place / "project", timeout=300,
                  env={"OPENAI_API_KEY": None, "GA_MODEL": None, "HOME": str(place / "home"),
                       "GA_HOME": str(place / "ga-home")})
    assert done.stdout.strip(), done.stderr[-2000:]
    results = {r["id"]: r for r in json.loads(done.stdout)["results"]}
    assert sorted(results) == ["py", "sh"], results
    for result in results.values():
        assert result["status"] == "failed", result
        assert "check" in (result.get("reason") or ""), result


def test_ga_makes_the_mount_points_bubblewrap_would_create_on_the_host(place: Path) -> None:
    """bubblewrap before 0.12.0 creates a missing mount point by following links (CVE-2026-87766). A wrapper in
    bubblewrap's place notes, for each mount point inside the project, whether it existed when bubblewrap
    started: ga made them all (the project's absent ga.yaml and models.yaml among them)."""
    log = place / "mount-points.txt"
    wrapper = place / "bwrap-wrapper"
    wrapper.write_text(f"""#!/bin/bash
prev2= prev1=
for arg in "$@"; do
  if [ "$prev2" = --ro-bind ] || [ "$prev2" = --bind ]; then
    case "$arg" in {place / 'project'}/*) [ -e "$arg" ] && echo "existed $arg" >> {log} || echo "missing $arg" >> {log};; esac
  fi
  [ "$arg" = -- ] && break
  prev2=$prev1 prev1=$arg
done
exec {shutil.which('bwrap')} "$@"
""")
    wrapper.chmod(0o755)
    user_config(place, f"sandbox:\n  bwrap: {wrapper}\n")
    (result,) = attack(place, [("bash", "echo inside")])
    assert "inside" in result, result
    noted = log.read_text().splitlines()
    assert any(line.endswith("/ga.yaml") for line in noted), noted
    assert not [line for line in noted if line.startswith("missing ")], noted
    assert not (place / "project" / "ga.yaml").exists()  # the placeholder is gone again


def test_a_link_on_the_way_to_a_mount_point_is_refused_not_followed(tmp_path: Path) -> None:
    """Between the plan of the mounts and their making, a folder on the way became a link to elsewhere: ga makes
    nothing there, and says so."""
    from memory_shared.fsutil import Unsafe
    from worker import sandbox

    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    argv = ["bwrap", "--bind", str(work), str(work), "--ro-bind", "/dev/null", str(work / "sub" / "ga.yaml"), "--",
            "true"]
    (work / "sub").symlink_to(elsewhere)
    with pytest.raises(Unsafe):
        sandbox.make_mount_points(argv, [work])
    assert not list(elsewhere.iterdir())
    (work / "sub").unlink()
    sandbox.make_mount_points(argv, [work])
    assert (work / "sub" / "ga.yaml").is_file() and (work / "sub").is_dir() and not (work / "sub").is_symlink()


def test_code_run_works_from_an_editable_install_under_tmp(tmp_path: Path) -> None:
    """The attack on the launcher: with an editable install of a checkout under /tmp (what `make test` leaves
    behind), the sandbox's private /tmp hid worker/sandbox_launch.py and every code_run failed. The tests set
    PYTHONPATH, so none noticed: this one runs the install's own `ga`, without it."""
    import subprocess
    import sys
    import sysconfig

    pytest.importorskip("wheel", reason="an offline editable install needs setuptools and wheel (the dev extra)")
    root = Path(__file__).resolve().parents[2]
    checkout, venv = tmp_path / "checkout", tmp_path / "venv"
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=root, capture_output=True,
                            text=True, check=True).stdout.split("\n")
    for name in filter(None, listed):
        source = root / name
        if source.is_file():
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, checkout / name)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()"
                                "['purelib'])"], capture_output=True, text=True, check=True).stdout.strip())
    (site / "ga-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # this venv's libraries
    installed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--no-deps", "--no-index",
                                "--no-build-isolation", "-q", "-e", str(checkout)], capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr[-2000:]
    project = Path(tempfile.mkdtemp(prefix="ga-editable-", dir="/var/tmp"))
    (project / "configs" / "examples").mkdir(parents=True)  # the quick start's copy of the example data
    model = project / "model.yaml"
    probe = "from orchestrator import fanout\nimport worker\nprint('imported', worker.__file__)"
    model.write_text(yaml.safe_dump({"tasks": [{"match": ".*", "turns": [
        {"content": "step", "tool_calls": [{"name": "code_run", "arguments": {"type": "bash", "script": "echo ran"}}]},
        {"content": "step", "tool_calls": [{"name": "code_run", "arguments": {"type": "python", "script": probe}}]},
        {"content": "done"}]}]}))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GA_MODEL", "OPENAI_API_KEY")}
    try:
        done = subprocess.run([str(venv / "bin" / "ga"), "run", "probe", "--model", f"scripted:{model}", "--json"],
                              cwd=project, env={**env, "GA_HOME": str(project / "ga-home")}, capture_output=True,
                              text=True, timeout=300)
        assert done.stdout.strip(), done.stderr[-2000:]
        (history,) = (project / "runs").glob("*/tasks/*/history.jsonl")
        outputs = [r["output"] for line in history.read_text().splitlines()
                   for r in json.loads(line).get("tool_results", [])]
    finally:
        shutil.rmtree(project, ignore_errors=True)
    assert len(outputs) == 2 and outputs[0].startswith("exit code 0") and "ran" in outputs[0], outputs
    assert outputs[1].startswith("exit code 0") and f"imported {checkout}/worker/__init__.py" in outputs[1], outputs
