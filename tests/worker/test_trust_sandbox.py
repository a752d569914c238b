"""Attacks on the sandbox's walls through a real `ga run`, a scripted model and real bubblewrap: resource limits,
hidden credential files, a planted project config, hosts outside the egress allow-list (issue 22, rows 5, 6, 10).

Each attack is one or more code_run calls; after it, the run goes on (the next code_run and the final answer
happen) and the tool result names what stopped the script.
"""
from __future__ import annotations

import http.server
import json
import shutil
import socket
import tempfile
import threading
from pathlib import Path

import pytest
import yaml

from tests.ga_support import run_ga

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
NO_KEY = {"OPENAI_API_KEY": None, "GA_MODEL": None}
AFTER = "echo still-running"  # the code_run after each attack: the run goes on


@pytest.fixture
def place(tmp_path: Path):
    """A HOME, GA_HOME and project directory outside /tmp (the sandbox's private /tmp would hide them anyway)."""
    root = Path(tempfile.mkdtemp(prefix="ga-walls-", dir="/var/tmp"))
    for name in ("home", "ga-home", "project"):
        (root / name).mkdir()
    yield root
    shutil.rmtree(root, ignore_errors=True)


def user_config(place: Path, text: str) -> None:
    folder = place / "home" / ".config" / "ga"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(text)


def attack(place: Path, calls: list[tuple[str, str]], *, timeout: float = 240) -> list[str]:
    """`ga run` in place/project whose scripted model makes these (type, script) code_runs, then one more
    (AFTER) and a final answer; returns every code_run result, in order."""
    turns = [{"content": "step", "tool_calls": [{"name": "code_run", "arguments": {"type": kind, "script": script,
                                                                                  "timeout": 120}}]}
             for kind, script in [*calls, ("bash", AFTER)]]
    turns.append({"content": "done", "echo_last_tool_result": True})
    script = place / "model.yaml"
    script.write_text(yaml.safe_dump({"tasks": [{"match": ".*", "turns": turns}]}))
    env = {**NO_KEY, "HOME": str(place / "home"), "GA_HOME": str(place / "ga-home")}
    done = run_ga("run", "attack", "--model", f"scripted:{script}", "--json", cwd=place / "project", env=env,
                  timeout=timeout)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    assert json.loads(done.stdout)["status"] == "succeeded", done.stdout[-2000:]
    results = tool_results(place / "project" / "runs")
    assert len(results) == len(calls) + 1 and "still-running" in results[-1], results[-1][:500]
    return results[:-1]


def tool_results(runs: Path) -> list[str]:
    (history,) = runs.glob("*/tasks/*/history.jsonl")
    turns = [json.loads(line) for line in history.read_text().splitlines()]
    return [result["output"] for turn in turns for result in turn.get("tool_results", [])
            if result["name"] == "code_run"]


def first_line(result: str) -> str:
    return result.splitlines()[0]


FORK_BOMB = "for i in $(seq 1 300); do sleep 30 & done; wait"
MEMORY = "x = bytearray(1500 * 1024 * 1024)\nprint('allocated', len(x))"
TMP_FILL = "head -c 300M /dev/zero > /tmp/fill && echo wrote-all"
HUGE_FILE = "head -c 200M /dev/zero > big.bin && echo wrote-all"
CPU_SPIN = "while True:\n    pass"


def test_a_fork_bomb_dies_alone_naming_the_process_limit(place: Path) -> None:
    user_config(place, "sandbox:\n  limits: {processes: 64}\n")
    (result,) = attack(place, [("bash", FORK_BOMB)])
    assert "process limit reached (64; sandbox.limits.processes)" in first_line(result), result[:600]


def test_allocating_1_5_gb_dies_naming_the_memory_limit(place: Path) -> None:
    user_config(place, "sandbox:\n  limits: {memory: 512MiB}\n")
    (result,) = attack(place, [("python", MEMORY)])
    assert "memory limit reached (512 MiB a process; sandbox.limits.memory)" in first_line(result), result[:600]
    assert "allocated" not in result


def test_filling_tmp_stops_at_its_size_naming_the_limit(place: Path) -> None:
    user_config(place, "sandbox:\n  limits: {tmp_size: 64MiB}\n")
    (result,) = attack(place, [("bash", TMP_FILL)])
    assert "/tmp is limited to 64 MiB (sandbox.limits.tmp_size)" in first_line(result), result[:600]
    assert "wrote-all" not in result


def test_a_huge_file_is_cut_at_the_file_size_limit(place: Path) -> None:
    user_config(place, "sandbox:\n  limits: {file_size: 32MiB}\n")
    (result,) = attack(place, [("bash", HUGE_FILE)])
    assert "killed: file size limit (32 MiB; sandbox.limits.file_size)" in first_line(result), result[:600]
    assert (place / "project" / "big.bin").stat().st_size == 32 << 20


def test_a_cpu_spin_is_killed_at_the_cpu_time_limit(place: Path) -> None:
    user_config(place, "sandbox:\n  limits: {cpu_seconds: 2}\n")
    (result,) = attack(place, [("python", CPU_SPIN)])
    assert "killed: CPU time limit (2 s a process; sandbox.limits.cpu_seconds)" in first_line(result), result[:600]


CREDENTIALS = {".config/gh/hosts.yml": "github.com:\n  oauth_token: gho_FAKE_TOKEN_walls\n",
               ".cache/huggingface/token": "hf_FAKE_TOKEN_walls\n",
               ".config/chromium/Default/Cookies": "FAKE_COOKIE_walls\n",
               ".mozilla/firefox/x.default/cookies.sqlite": "FAKE_COOKIE_walls\n"}


def test_credential_files_and_sessions_are_hidden(place: Path) -> None:
    home = place / "home"
    for name, text in CREDENTIALS.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(text)
    sessions = place / "ga-home" / "sessions"
    sessions.mkdir()
    (sessions / "old-run.json").write_text('{"task": "FAKE_SESSION_walls"}')
    reads = "; ".join(f'cat "$HOME/{name}"' for name in CREDENTIALS)
    (result,) = attack(place, [("bash", f'{reads}; cat "$GA_HOME"/sessions/*; ls -a "$GA_HOME/sessions"; true')])
    assert "FAKE" not in result, result[:1000]
    assert "old-run.json" not in result


def test_a_planted_ga_yaml_does_not_turn_the_sandbox_off(place: Path) -> None:
    project = place / "project"
    plant = ("printf 'sandbox: {mode: \"off\"}\\n' > ga.yaml; echo planted=$?; echo 'models: {}' > models.yaml; "
             "echo models=$?; echo x > .ga/evil; echo dotga=$?; ln -s /etc/passwd .ga/code_9.out; echo link=$?")
    (result,) = attack(place, [("bash", plant)])
    assert "planted=1" in result and "models=1" in result and "dotga=1" in result and "link=1" in result, result
    assert not (project / "ga.yaml").exists() and not (project / "models.yaml").exists()  # no placeholder left
    assert not (project / ".ga" / "evil").exists()
    # a ga.yaml there, whoever wrote it, cannot weaken the sandbox: the next run refuses it in one line
    (project / "ga.yaml").write_text('sandbox: {mode: "off"}\n')
    (project / "model.yaml").write_text("tasks: [{match: '.*', turns: [{content: hi}]}]\n")
    done = run_ga("run", "hi", "--model", f"scripted:{project / 'model.yaml'}", cwd=project,
                  env={**NO_KEY, "HOME": str(place / "home"), "GA_HOME": str(place / "ga-home")})
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "ga.yaml:1" in lines[0] and "sandbox.mode" in lines[0] and "~/.config/ga/config.yaml" in lines[0]


def settings_in(place: Path, project: str, user: str = "", environ: dict | None = None):
    from configs import load_settings

    (place / "user.yaml").write_text(user)
    (place / "project" / "ga.yaml").write_text(project)
    return load_settings(user_file=place / "user.yaml", project_file=place / "project" / "ga.yaml",
                         environ=environ or {})


@pytest.mark.parametrize(("project", "key"), [
    ("sandbox: off\n", "sandbox.mode"),
    ("sandbox: {network: true}\n", "sandbox.network"),
    ("sandbox: {writable: [/etc]}\n", "sandbox.writable"),
    ("sandbox: {bwrap: ./fake-bwrap}\n", "sandbox.bwrap"),
    ("sandbox: {limits: {processes: 100000}}\n", "sandbox.limits.processes"),
    ("worker: {allow_write: [/root]}\n", "worker.allow_write"),
    ("worker: {model: planted}\n", "worker.model"),
])
def test_a_project_file_cannot_loosen_the_sandbox(place: Path, project: str, key: str) -> None:
    from configs import ConfigError

    with pytest.raises(ConfigError) as caught:
        settings_in(place, project, user="sandbox: {network: [pypi.org]}\n")
    message = str(caught.value)
    assert message.startswith(f"{place / 'project' / 'ga.yaml'}:1: {key} is refused in a project file")
    assert "~/.config/ga/config.yaml" in message and "\n" not in message


def test_a_project_file_may_tighten_or_repeat_what_the_user_allows(place: Path) -> None:
    tight = settings_in(place, "sandbox: {network: false, limits: {processes: 32}}\nworker: {max_turns: 3}\n")
    assert tight.sandbox.network == "off" and tight.sandbox.limits.processes == 32 and tight.worker.max_turns == 3
    assert settings_in(place, "sandbox: off\n", user="sandbox: off\n").sandbox.mode == "off"
    assert settings_in(place, "sandbox: off\n", environ={"GA_SANDBOX__MODE": "off"}).sandbox.mode == "off"


def test_a_project_models_yaml_cannot_move_an_endpoint_or_add_a_model(place: Path, monkeypatch) -> None:
    from worker.modelconfig import ModelConfigError, load_model_entries

    monkeypatch.chdir(place / "project")
    home = place / "home" / ".config" / "ga"
    home.mkdir(parents=True)
    (home / "models.yaml").write_text("models:\n  mine: {base_url: 'http://127.0.0.1:8000/v1', model: m, "
                                      "api_key_env: MY_KEY}\n")
    monkeypatch.setenv("HOME", str(place / "home"))
    project = place / "project" / "models.yaml"
    project.write_text("models:\n  mine: {base_url: 'http://127.0.0.1:9999/v1'}\n")
    with pytest.raises(ModelConfigError, match=r"^models.yaml:2: models.mine.base_url is refused in a project file"):
        load_model_entries()
    project.write_text("models:\n  other: {base_url: 'http://127.0.0.1:9999/v1', model: m, api_key_env: MY_KEY}\n")
    with pytest.raises(ModelConfigError, match=r"^models.yaml:2: models.other is refused in a project file: a "
                                               r"project file may not add a model"):
        load_model_entries()
    # the attack of issue 30: a keyless model whose base_url is any host
    project.write_text("models:\n  mine: {temperature: 0.5}\n  keyless: {base_url: 'http://127.0.0.1:9/v1', model: m}\n")
    with pytest.raises(ModelConfigError, match=r"^models.yaml:3: models.keyless is refused in a project file"):
        load_model_entries()
    project.write_text("models:\n  mine:\n    temperature: 0.5\n    max_tokens: 99999\n")
    with pytest.raises(ModelConfigError, match=r"^models.yaml:4: models.mine.max_tokens is refused in a project file "
                                               r"\(a project file may lower it"):
        load_model_entries()
    project.write_text("models:\n  mine: {temperature: 0.5, max_tokens: 100, base_url: 'http://127.0.0.1:8000/v1/'}\n")
    entries = load_model_entries()
    assert entries["mine"][0]["temperature"] == 0.5 and entries["mine"][0]["max_tokens"] == 100


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (the http.server name)
        body = f"hello from {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def web():
    """An HTTP server on 127.0.0.1 (the only place tests send traffic); yields its port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def unix_request(socket_path: Path, head: str, then: bytes = b"") -> bytes:
    with socket.socket(socket.AF_UNIX) as conn:
        conn.settimeout(10)
        conn.connect(str(socket_path))
        conn.sendall(head.encode())
        if then:  # a CONNECT tunnel: read the proxy's answer, then speak HTTP to the far end through it
            answer = conn.recv(4096)
            if b" 200 " not in answer.split(b"\r\n")[0]:
                return answer
            conn.sendall(then)
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


def test_the_egress_proxy_admits_listed_hosts_only(tmp_path: Path, web: int) -> None:
    from worker.egress import EgressProxy

    proxy = EgressProxy(["localhost"], tmp_path / "proxy.sock")
    try:
        plain = unix_request(proxy.socket_path, f"GET http://localhost:{web}/plain HTTP/1.1\r\nHost: localhost\r\n\r\n")
        tunnel = unix_request(proxy.socket_path, f"CONNECT localhost:{web} HTTP/1.1\r\n\r\n",
                              b"GET /tunnel HTTP/1.0\r\nHost: localhost\r\n\r\n")
        refused = unix_request(proxy.socket_path, f"GET http://127.0.0.1:{web}/x HTTP/1.1\r\nHost: a\r\n\r\n")
        refused_tunnel = unix_request(proxy.socket_path, f"CONNECT 127.0.0.1:{web} HTTP/1.1\r\n\r\n", b"GET / HTTP/1.0\r\n\r\n")
    finally:
        proxy.close()
    assert plain.startswith(b"HTTP/1.0 200") and plain.endswith(b"hello from /plain")
    assert tunnel.startswith(b"HTTP/1.0 200") and tunnel.endswith(b"hello from /tunnel")
    for answer in (refused, refused_tunnel):
        assert answer.startswith(b"HTTP/1.1 403") and b"127.0.0.1 is not on the allow-list (sandbox.network)" in answer


def test_a_script_reaches_listed_hosts_and_no_other(place: Path, web: int) -> None:
    user_config(place, "sandbox:\n  network: [localhost]\n")
    # Inside, loopback is the sandbox's own (NO_PROXY keeps it direct): name the proxy to reach the host's.
    fetch = "curl -sS --noproxy '' --proxy \"$HTTP_PROXY\" -w ' status=%{http_code}' http://HOST:" + f"{web}/page"
    direct = f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {web}), timeout=3)\"; echo direct=$?"
    tunnel = fetch.replace("curl ", "curl --proxytunnel ")  # CONNECT, as HTTPS would go
    listed, tunnelled, unlisted, around = attack(place, [
        ("bash", fetch.replace("HOST", "localhost")), ("bash", tunnel.replace("HOST", "localhost")),
        ("bash", fetch.replace("HOST", "127.0.0.1")), ("bash", direct)])
    assert "hello from /page status=200" in listed, listed
    assert "hello from /page status=200" in tunnelled, tunnelled
    assert "127.0.0.1 is not on the allow-list (sandbox.network)" in unlisted and "status=403" in unlisted, unlisted
    assert "direct=0" not in around, around


def test_a_wildcard_entry_admits_the_domain_and_its_subdomains_only(tmp_path: Path) -> None:
    from worker.egress import EgressProxy

    proxy = EgressProxy(["*.example.org", "api.github.com"], tmp_path / "proxy.sock")
    try:
        assert proxy.allows("example.org") and proxy.allows("files.example.org") and proxy.allows("A.B.Example.org.")
        assert proxy.allows("api.github.com")
        assert not proxy.allows("github.com") and not proxy.allows("evil-example.org")
        assert not proxy.allows("example.org.evil.net")
    finally:
        proxy.close()
