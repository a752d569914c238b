"""Issue 22, rows 5 and 7 and items 2 and 4: what a task's code_run can reach, tried the way a prompt-injected
model would, through a real `ga` process, the scripted model over real HTTP and real bubblewrap.

No secret in the sandbox (env, /proc/*/environ), no way to the model but the task's gateway (which counts
every token against the task and the run's budget), no write into the memory store or the run directory,
and no nested summary that lifts a budget.
"""
from __future__ import annotations

import http.server
import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.ga_support import run_ga
from worker.scripted import ScriptedServer

OPENAI_SECRET = "sk-test-OPENAI-do-not-leak-4242"
PROVIDER_SECRET = "provider-cred-do-not-leak-9191"
BIG_PROMPT_CHARS = 400_000  # ~100,000 tokens by the scripted server's count: far above what the worker spends itself
FORGED = "FORGED-BY-THE-SCRIPT"

GATEWAY_CALL = f"""
import json, os, urllib.error, urllib.request
request = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"] + "/chat/completions",
    data=json.dumps({{"model": "any", "messages": [{{"role": "user", "content": "inner " + "x" * {BIG_PROMPT_CHARS}}}]}}).encode(),
    headers={{"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}})
try:
    reply = json.load(urllib.request.urlopen(request, timeout=60))
    print("INNER", json.dumps(reply["usage"]))
    print("CONTENT", reply["choices"][0]["message"]["content"])
except urllib.error.HTTPError as exc:
    print("REFUSED", exc.code, exc.read().decode())
"""

TAMPER = f"""set +e
mem="$GA_HOME/memory"
echo 99 > "$mem/HEAD"; echo "head=$?"
echo '{FORGED}' >> "$mem/log.jsonl"; echo "log=$?"
echo '{{"event":"gc","generations":[0],"note":"{FORGED}"}}' >> "$mem/events.jsonl"; echo "events=$?"
for d in "${{GA_RUN_DIR:-}}" "${{GA_RUN_DIR:-/none}}"/tasks/* "$PWD"/runs/*/tasks/*; do
  [ -d "$d" ] || continue
  echo '{FORGED}' > "$d/planted.txt"; echo "run=$?"
  if [ -f "$d/ledger.jsonl" ]; then echo '{FORGED}' >> "$d/ledger.jsonl"; echo "run=$?"; fi
done
exit 0
"""


def code_run_then_echo(script: str, kind: str = "bash", match: str = ".*") -> dict[str, Any]:
    return {"match": match, "turns": [
        {"content": "running", "tool_calls": [{"name": "code_run", "arguments": {"type": kind, "script": script}}]},
        {"content": "Output:", "echo_last_tool_result": True}]}


def ga_run(tmp_path: Path, server: ScriptedServer, env: dict[str, str | None] | None = None) -> dict[str, Any]:
    work = tmp_path / "proj"
    work.mkdir(exist_ok=True)
    done = run_ga("run", "probe the sandbox", "--model", f"scripted@{server.base_url}", "--json", cwd=work,
                  env={"OPENAI_API_KEY": OPENAI_SECRET, **(env or {})}, timeout=240)
    assert done.stdout.strip(), done.stderr[-2000:]
    assert OPENAI_SECRET not in done.stdout + done.stderr
    return json.loads(done.stdout)


def ga_fanout(tmp_path: Path, spec: dict[str, Any], executor: str = "local") -> dict[str, Any]:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(json.dumps(spec))  # JSON is YAML
    done = run_ga("fanout", str(tasks), "--json", "--executor", executor, "--out", str(tmp_path / "runs"),
                  "--no-preflight", cwd=tmp_path, env={"OPENAI_API_KEY": OPENAI_SECRET}, timeout=400)
    assert done.stdout.strip(), done.stderr[-2000:]
    return json.loads(done.stdout)


def codes(answer: str) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for line in answer.splitlines():
        name, _, value = line.partition("=")
        if value.isdigit():
            found.setdefault(name, []).append(int(value))
    return found


def test_no_key_in_the_scripts_environment_nor_in_any_process_of_the_sandbox(tmp_path: Path) -> None:
    """Row 5: `env` and /proc/*/environ show a placeholder key and the gateway's address, never a secret."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / "models.yaml").write_text(  # a second provider whose key variable has no telltale name
        "models:\n  other:\n    base_url: http://127.0.0.1:9/v1\n    model: m\n    api_key_env: PROVIDER_CRED\n")
    probe = "env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; echo; echo end"
    with ScriptedServer({"tasks": [code_run_then_echo(probe)]}, log_path=tmp_path / "requests.jsonl") as server:
        result = ga_run(tmp_path, server, {"PROVIDER_CRED": PROVIDER_SECRET})
    answer = result["answer"]
    assert result["status"] == "succeeded" and answer.rstrip().endswith("end"), answer
    assert OPENAI_SECRET not in answer and PROVIDER_SECRET not in answer
    assert "OPENAI_API_KEY=ga-gateway" in answer and "OPENAI_BASE_URL=http://127.0.0.1:8411/v1" in answer
    history = next((project / "runs").glob("*/tasks/*/history.jsonl")).read_text()
    assert OPENAI_SECRET not in history and PROVIDER_SECRET not in history


def test_the_endpoint_is_unreachable_but_through_the_gateway_whose_tokens_count(tmp_path: Path) -> None:
    """gateway mode: a direct request to the model endpoint fails (no network); one through the gateway is
    answered with the real key added outside, and its tokens are in the task's usage."""
    direct = ("import urllib.request\ntry:\n    urllib.request.urlopen(open('endpoint.txt').read() + '/models', timeout=5)\n"
              "    print('direct=0')\nexcept OSError as exc:\n    print(exc)\n    print('direct=1')\n")
    script = {"tasks": [{"match": "inner", "turns": [{"content": "inner answer"}]},
                        code_run_then_echo(direct + GATEWAY_CALL, "python")]}
    (tmp_path / "proj").mkdir()
    with ScriptedServer(script, log_path=tmp_path / "requests.jsonl") as server:
        (tmp_path / "proj" / "endpoint.txt").write_text(server.base_url)
        result = ga_run(tmp_path, server)
        inner_calls = [r for r in server.records if "inner x" in json.dumps(r["body"])]
    answer = result["answer"]
    assert codes(answer)["direct"] == [1], answer
    assert "CONTENT inner answer" in answer, answer
    inner = json.loads(answer.split("INNER ", 1)[1].splitlines()[0])
    assert inner["total_tokens"] > 50_000 and len(inner_calls) == 1
    assert result["usage"]["total"] >= inner["total_tokens"] + 1  # the task's usage includes the gateway's count


def test_a_streamed_reply_passes_through_the_gateway_and_its_tokens_count(tmp_path: Path) -> None:
    stream = f"""
import http.client, json, os, urllib.parse
url = urllib.parse.urlsplit(os.environ["OPENAI_BASE_URL"])
body = json.dumps({{"model": "any", "stream": True, "messages": [{{"role": "user", "content": "inner " + "x" * {BIG_PROMPT_CHARS}}}]}})
connection = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
connection.request("POST", url.path + "/chat/completions", body, {{"Content-Type": "application/json"}})
reply = connection.getresponse()
events = [line for line in reply.read().decode().splitlines() if line.startswith("data: ")]
print("TYPE", reply.getheader("Content-Type"))
print("TEXT", "".join(json.loads(e[6:])["choices"][0]["delta"].get("content") or "" for e in events[:-1]
                      if json.loads(e[6:])["choices"]))
print("LAST", events[-1])
"""
    script = {"tasks": [{"match": "inner", "turns": [{"content": "streamed inner answer"}]},
                        code_run_then_echo(stream, "python")]}
    with ScriptedServer(script, log_path=tmp_path / "requests.jsonl") as server:
        result = ga_run(tmp_path, server)
    answer = result["answer"]
    assert "TYPE text/event-stream" in answer and "TEXT streamed inner answer" in answer, answer
    assert "LAST data: [DONE]" in answer
    assert result["usage"]["total"] > 100_000  # the streamed call's prompt (~100,000 tokens) is the task's


def test_the_gateway_refuses_once_the_tasks_budget_is_spent(tmp_path: Path) -> None:
    script = {"tasks": [{"match": "inner", "turns": [{"content": "inner answer"}]},
                        code_run_then_echo(GATEWAY_CALL, "python")]}
    with ScriptedServer(script, log_path=tmp_path / "requests.jsonl") as server:
        result = ga_run(tmp_path, server, {"GA_WORKER__MAX_TOKENS": "100"})  # the first reply spends it
        inner_calls = [r for r in server.records if "inner x" in json.dumps(r["body"])]
    assert result["status"] == "limit"  # the task stopped after that turn: the script's output is in its history
    output = next((tmp_path / "proj" / "runs").glob("*/tasks/*/history.jsonl")).read_text()
    assert "REFUSED 402" in output and "budget is spent" in output, output
    assert not inner_calls


def test_a_script_spending_through_the_gateway_spends_the_runs_budget(tmp_path: Path) -> None:
    """s0's script spends ~20,000 tokens through its gateway; what the run's 50,000 then leaves s1 and s2 cannot
    hold another such call (held as its prompt at 2 bytes a token: ~40,000), so theirs are refused."""
    call = GATEWAY_CALL.replace(f'"x" * {BIG_PROMPT_CHARS}', '"x" * 80_000')
    script = {"tasks": [{"match": "inner", "turns": [{"content": "inner answer"}]},
                        code_run_then_echo(call, "python", match="spend")]}
    with ScriptedServer(script, log_path=tmp_path / "requests.jsonl") as server:
        run = ga_fanout(tmp_path, {"tasks": [{"id": f"s{i}", "prompt": f"spend {i}"} for i in range(3)],
                                   "concurrency": 1, "budget": {"tokens": 50_000},
                                   "defaults": {"model": f"scripted@{server.base_url}"}})
    answers = {r["id"]: r["answer"] for r in run["results"]}
    assert sorted(answers) == ["s0", "s1", "s2"], run
    assert "CONTENT inner answer" in answers["s0"], answers["s0"]
    for later in ("s1", "s2"):
        assert "REFUSED 402" in answers[later] and "budget" in answers[later], answers[later]
    assert 20_000 < run["usage"]["total"] < 50_000, run["usage"]


def test_a_forged_nested_summary_cannot_lift_the_budget(tmp_path: Path) -> None:
    """Row 7: a task writes a nested run's summary.json with usage -1e9 where nested runs live."""
    forge = ('set +e\nd="$GA_RUN_DIR/tasks/$GA_PARENT_TASK/runs/forged"\nmkdir -p "$d"; echo "mkdir=$?"\n'
             'echo \'{"usage": {"prompt": -1000000000, "completion": 0}}\' > "$d/summary.json"; echo "forge=$?"\n')
    script = {"tasks": [code_run_then_echo(forge, match="spend")]}
    with ScriptedServer(script, log_path=tmp_path / "requests.jsonl") as server:
        run = ga_fanout(tmp_path, {"tasks": [{"id": f"s{i}", "prompt": f"spend {i}"} for i in range(4)],
                                   "concurrency": 1, "budget": {"tokens": 1},
                                   "defaults": {"model": f"scripted@{server.base_url}"}})
    assert run["status"] == "budget_spent", run
    assert [r["id"] for r in run["results"]] == ["s0"] and run["usage"]["total"] > 0
    assert codes(run["results"][0]["answer"])["mkdir"] != [0]
    assert not list((tmp_path / "runs").glob("*/tasks/s0/runs/forged/summary.json"))


def _untouched(ga_home: Path, runs: Path) -> None:
    memory = ga_home / "memory"
    assert (memory / "HEAD").is_file() and (memory / "HEAD").read_text().strip() != "99"
    for name in ("log.jsonl", "events.jsonl"):
        path = memory / name
        assert not path.exists() or FORGED not in path.read_text(), name
    assert not list(runs.rglob("planted.txt"))
    for ledger in runs.rglob("ledger.jsonl"):
        assert FORGED not in ledger.read_text()


def test_ga_run_scripts_cannot_write_the_memory_store_or_the_run_directory(tmp_path: Path, ga_home: Path) -> None:
    with ScriptedServer({"tasks": [code_run_then_echo(TAMPER)]}, log_path=tmp_path / "requests.jsonl") as server:
        result = ga_run(tmp_path, server)
    found = codes(result["answer"])
    assert found["head"] != [0] and found["log"] != [0] and found["events"] != [0], result["answer"]
    assert found["run"] and 0 not in found["run"], result["answer"]
    _untouched(ga_home, tmp_path / "proj" / "runs")


def test_ga_chat_scripts_cannot_read_the_key_nor_write_ga_s_state(tmp_path: Path, ga_home: Path) -> None:
    """The same attack from `ga chat` in a real terminal: the key stays out of the script and of the screen, and
    neither the store nor the session's run directory takes a write."""
    import io
    import os
    import sys

    import pexpect

    probe = f"env | grep -c '{OPENAI_SECRET}'; " + TAMPER.replace("exit 0", "echo done-probing")
    work = tmp_path / "proj"
    work.mkdir()
    with ScriptedServer({"tasks": [code_run_then_echo(probe)]}, log_path=tmp_path / "requests.jsonl") as server:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "GA_HOME": str(ga_home),
               "OPENAI_API_KEY": OPENAI_SECRET, "TERM": "dumb"}
        env.pop("GA_MODEL", None)
        child = pexpect.spawn(sys.executable, ["-m", "cli", "chat", "--model", f"scripted@{server.base_url}"],
                              cwd=str(work), env=env, encoding="utf-8", timeout=120, dimensions=(24, 80))
        child.logfile_read = seen = io.StringIO()
        try:
            child.expect_exact("you> ")
            child.sendline("probe the sandbox")
            child.expect_exact("done-probing")
            child.expect_exact("you> ")
            child.sendline("/quit")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
    screen = seen.getvalue().replace("\r", "")
    found = codes(screen)
    assert found["head"] != [0] and found["log"] != [0] and found["events"] != [0], screen
    assert OPENAI_SECRET not in screen
    assert "\n0\n" in screen, screen  # `grep -c` found the key in no line of the script's environment
    _untouched(ga_home, work / "runs")


@pytest.mark.parametrize("executor", ["local", pytest.param("ray", marks=pytest.mark.ray)])  # ray: `ga fanout` starts its own
def test_fanout_scripts_cannot_write_the_memory_store_or_the_run_directory(tmp_path: Path, ga_home: Path,
                                                                           executor: str) -> None:
    with ScriptedServer({"tasks": [code_run_then_echo(TAMPER)]}, log_path=tmp_path / "requests.jsonl") as server:
        run = ga_fanout(tmp_path, {"tasks": [{"id": "t0", "prompt": "tamper"}],
                                   "defaults": {"model": f"scripted@{server.base_url}"}}, executor)
    answer = run["results"][0]["answer"]
    found = codes(answer)
    assert found["head"] != [0] and found["log"] != [0] and found["events"] != [0], answer
    assert found["run"] and 0 not in found["run"], answer
    _untouched(ga_home, tmp_path / "runs")


def test_a_nested_run_stops_when_the_code_run_that_asked_for_it_times_out(tmp_path: Path) -> None:
    """The parent's process runs the nested run; the parent script's timeout (its sandbox killed) cancels it."""
    from tests.fanout_support import beating_task

    parent = ("from orchestrator import fanout\n"
              "fanout([{'id': 'sleeper', 'prompt': 'sleep long'}], display='quiet')\nprint('nested run returned')\n")
    script = {"tasks": [beating_task("sleep long", 120),
                        {"match": "parent", "turns": [
                            {"content": "fan out", "tool_calls": [{"name": "code_run", "arguments": {
                                "type": "python", "script": parent, "timeout": 8}}]},
                            {"content": "Output:", "echo_last_tool_result": True}]}]}
    with ScriptedServer(script, log_path=tmp_path / "requests.jsonl") as server:
        run = ga_fanout(tmp_path, {"tasks": [{"id": "parent", "prompt": "parent"}],
                                   "defaults": {"model": f"scripted@{server.base_url}"}})
    answer = run["results"][0]["answer"]
    assert "timeout after 8s" in answer and "nested run returned" not in answer, answer
    (nested,) = (tmp_path / "runs").glob("*/tasks/parent/runs/*")
    summary = json.loads((nested / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["depth"] == 1, summary
    events = [json.loads(line) for line in (nested / "ledger.jsonl").read_text().splitlines()]
    assert any(e["event"] == "interrupted" and "code_run" in e.get("note", "") for e in events), events
    assert summary["tasks"]["unfinished"] == 1  # the sleeper was stopped, left for --resume
    assert any(e["event"] == "interrupted" and e.get("task_id") == "sleeper" for e in events), events


def test_a_nested_spec_cannot_unsandbox_its_tasks_nor_take_hidden_files_as_inputs(tmp_path: Path,
                                                                                   ga_home: Path) -> None:
    """The parent runs a nested spec outside the sandbox, so it refuses what would reach past the sandbox: hidden
    files (GA_HOME's sessions too) and the host's /tmp, which the sandbox's own /tmp hides."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    key = home / ".ssh" / "id_ed25519"
    key.write_text("PRIVATE-KEY-do-not-leak\n")
    session = ga_home / "sessions" / "other.json"
    session.parent.mkdir(parents=True, exist_ok=True)
    session.write_text("SESSION-do-not-leak\n")
    host_tmp = tmp_path / "outside-the-workdir.txt"  # under the host's /tmp, not in the task's directory
    host_tmp.write_text("HOST-TMP-do-not-leak\n")
    thieves = "".join(f"         {{'tasks': [{{'id': 'thief{i}', 'prompt': 'x', 'inputs': ['{path}']}}], "
                      f"'allow_paths': ['{path.parent}']}},\n" for i, path in enumerate((session, host_tmp)))
    probe = ("from orchestrator import fanout\n"
             "specs = [{'tasks': [{'id': 'unboxed', 'prompt': 'x', 'sandbox': 'off'}]},\n" + thieves +
             f"         {{'tasks': [{{'id': 'thief', 'prompt': 'x', 'inputs': ['{key}']}}], 'allow_paths': ['{key.parent}']}}]\n"
             "for spec in specs:\n    try:\n        fanout(spec)\n        print('ran')\n"
             "    except Exception as exc:\n        print('refused:', exc)\n")
    with ScriptedServer({"tasks": [code_run_then_echo(probe, "python")]}, log_path=tmp_path / "r.jsonl") as server:
        result = ga_run(tmp_path, server, {"HOME": str(home)})
    answer = result["answer"]
    assert "refused: nested fan-out refused: task unboxed sets sandbox options" in answer, answer
    assert f"refused: nested fan-out refused: task thief's input {key} is hidden from sandboxes" in answer, answer
    assert f"task thief0's input {session} is hidden from sandboxes" in answer, answer
    assert f"task thief1's input {host_tmp} is in the host's /tmp" in answer, answer
    assert "ran" not in answer.split() and "do-not-leak" not in answer.replace("\\n", "")
    assert not list((tmp_path / "proj" / "runs").glob("*/tasks/*/workdir/id_ed25519"))


def test_the_network_setting_reads_old_booleans_and_names_a_bad_host_in_one_line(tmp_path: Path) -> None:
    from configs import load_settings
    from orchestrator.spec import from_data

    read = {str(v): load_settings({"sandbox.network": v}).sandbox.network
            for v in (True, False, "gateway", "open", "off", ["api.github.com", "*.pypi.org"])}
    assert read == {"True": "open", "False": "off", "gateway": "gateway", "open": "open", "off": "off",
                    "['api.github.com', '*.pypi.org']": ["*.pypi.org", "api.github.com"]}  # normalised, sorted
    assert load_settings().sandbox.network == "gateway"
    assert from_data({"tasks": [{"prompt": "x", "sandbox": {"network": False}}]}).tasks[0].sandbox == {"network": "off"}
    (tmp_path / "ga.yaml").write_text("sandbox:\n  network: [https://api.github.com]\n")
    done = run_ga("run", "x", "--model", "scripted:configs/examples/scripts/hello.yaml", cwd=tmp_path)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == (
        "error: ga.yaml:2: 'sandbox.network': 'https://api.github.com' is not a host name; list host names like "
        "api.github.com (no scheme, port or path), or use gateway, open or off; see configs/default.yaml for the "
        "allowed values")


# ---- issue 30, item 5: a gateway that is not a proxy ----

TASK_LIMIT = 20_000
MANY_CHOICES = """
import json, os, urllib.error, urllib.request
request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
    data=json.dumps({"model": "any", "n": 128, "messages": [{"role": "user", "content": "inner many"}]}).encode(),
    headers={"Content-Type": "application/json"})
try:
    reply = json.load(urllib.request.urlopen(request, timeout=60))
    print("CHOICES", len(reply["choices"]), "USAGE", reply["usage"]["total_tokens"])
except urllib.error.HTTPError as exc:
    print("REFUSED", exc.code, exc.read().decode())
"""


def asked(body: Any) -> Any:
    """The last message's content of a request the scripted server recorded (a script's own call: just its prompt)."""
    messages = body.get("messages") if isinstance(body, dict) else None
    return messages[-1].get("content") if isinstance(messages, list) and messages else None


def test_one_call_with_n_128_is_held_to_what_the_task_has_left(tmp_path: Path) -> None:
    """The attack charged 199,922 tokens against a 20,000 task limit in one call: `n` completions of the default
    max_tokens each. The gateway now holds n completions and cuts max_tokens to what the limit leaves."""
    script = {"completion_limits": True, "tasks": [
        {"match": "inner many", "turns": [{"content": "y" * 6_000}]},  # 1,500 tokens a choice unless cut
        code_run_then_echo(MANY_CHOICES, "python")]}
    with ScriptedServer(script, log_path=tmp_path / "requests.jsonl") as server:
        result = ga_run(tmp_path, server, {"GA_WORKER__MAX_TOKENS": str(TASK_LIMIT)})
        (forwarded,) = [r["body"] for r in server.records if asked(r["body"]) == "inner many"]
    output = next((tmp_path / "proj" / "runs").glob("*/tasks/*/history.jsonl")).read_text()
    assert "CHOICES 128" in output, output[-2000:]
    usage = re.search(r"USAGE (\d+)", output)
    inner = int(usage.group(1)) if usage else -1
    assert forwarded["n"] == 128 and forwarded["max_tokens"] * 128 < TASK_LIMIT, forwarded.get("max_tokens")
    assert inner <= TASK_LIMIT and result["usage"]["total"] <= TASK_LIMIT + 2_000, (inner, result["usage"])


def test_a_bad_n_is_refused_in_one_line(tmp_path: Path) -> None:
    bad = MANY_CHOICES.replace('"n": 128', '"n": "128"')
    script = {"tasks": [{"match": "inner many", "turns": [{"content": "never"}]}, code_run_then_echo(bad, "python")]}
    with ScriptedServer(script, log_path=tmp_path / "requests.jsonl") as server:
        result = ga_run(tmp_path, server)
        forwarded = [r for r in server.records if asked(r["body"]) == "inner many"]
    assert "REFUSED 400" in result["answer"] and "'n' must be a whole number" in result["answer"], result["answer"]
    assert not forwarded


class Reflector(http.server.BaseHTTPRequestHandler):
    """An endpoint that sends the request's key back in every form: as a chat completion's content (plain, and
    streamed with the key split across events), and as a 401 page."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802  (the http.server name)
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        bearer = self.headers.get("Authorization", "")
        key = bearer.removeprefix("Bearer ")
        forms = reflections(bearer, key)
        text = " ".join(f"{name}={value}" for name, value in forms.items())
        ask = request["messages"][-1]["content"]
        if "401" in ask:
            return self._send(401, "application/json", json.dumps({"error": {"message": text}}, ensure_ascii=False))
        if "unicode" in ask:  # every character of the key escaped in the JSON text: a client reads the key itself
            escaped = "".join(f"\\u{ord(c):04x}" for c in key)
            return self._send(200, "application/json", completion("KEY-HERE").replace("KEY-HERE", escaped))
        if request.get("stream"):
            pieces = [key[i:i + 3] for i in range(0, len(key), 3)] + [" B64=" + forms["B64"]]
            events = "".join("data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": p}}]}) + "\n\n"
                             for p in pieces) + "data: [DONE]\n\n"
            return self._send(200, "text/event-stream", events)
        return self._send(200, "application/json", completion(text))

    def _send(self, status: int, kind: str, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def reflections(bearer: str, key: str) -> dict[str, str]:
    import base64
    import urllib.parse

    return {"RAW": key, "B64": base64.b64encode(bearer.encode()).decode(),
            "B64URL": base64.urlsafe_b64encode(("x" + key).encode()).decode(), "HEX": key.encode().hex(),
            "URL": urllib.parse.quote(key + "/", safe="")}


def completion(content: str) -> str:
    return json.dumps({"id": "r", "object": "chat.completion", "model": "m", "usage": {"prompt_tokens": 1,
                       "completion_tokens": 1}, "choices": [{"index": 0, "finish_reason": "stop",
                                                               "message": {"role": "assistant", "content": content}}]})


REFLECTED = """
import json, os, urllib.error, urllib.request
for ask, stream in (("plain", False), ("streamed", True), ("401", False), ("unicode", False)):
    request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", headers={"Content-Type":
        "application/json"}, data=json.dumps({"model": "reflector", "stream": stream,
                                              "messages": [{"role": "user", "content": ask}]}).encode())
    try:
        body = urllib.request.urlopen(request, timeout=60).read().decode()
    except urllib.error.HTTPError as exc:
        body = exc.read().decode()
    if stream:
        events = [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: {")]
        text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events)
    else:
        reply = json.loads(body)
        text = reply["error"]["message"] if "error" in reply else reply["choices"][0]["message"]["content"]
    print("REPLY", ask, json.dumps(text))
"""


def test_a_key_the_endpoint_reflects_encoded_never_reaches_the_script(tmp_path: Path) -> None:
    """The attack: the key reflected base64-encoded passed the gateway's mask. Every form, in a plain reply, a
    stream (the key split across events), a 401 page and a JSON text escaping every character."""
    key = "gk-live-Reflect/Me+9xQ2Lp4Rt8Wz3Ny6Bc1"  # not sk-: only the gateway's own mask can catch it
    reflector = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Reflector)
    threading.Thread(target=reflector.serve_forever, daemon=True).start()
    user_models = tmp_path / "home" / ".config" / "ga" / "models.yaml"
    user_models.parent.mkdir(parents=True)
    user_models.write_text(f"models:\n  reflector:\n    base_url: http://127.0.0.1:{reflector.server_address[1]}/v1\n"
                           "    model: m\n    api_key_env: GA_REFLECTED_KEY\n")
    try:
        with ScriptedServer({"tasks": [code_run_then_echo(REFLECTED, "python")]}, log_path=tmp_path / "r.jsonl") as server:
            result = ga_run(tmp_path, server, {"HOME": str(tmp_path / "home"), "GA_REFLECTED_KEY": key})
    finally:
        reflector.shutdown()
        reflector.server_close()
    replies = {line.split()[1]: json.loads(line.split(" ", 2)[2]) for line in result["answer"].splitlines()
               if line.startswith("REPLY ")}
    assert sorted(replies) == ["401", "plain", "streamed", "unicode"], result["answer"]
    assert "[redacted]" in replies["plain"] and "[redacted]" in replies["streamed"], replies
    for ask, text in replies.items():
        for name, form in reflections(f"Bearer {key}", key).items():
            assert form[6:-6] not in text, (ask, name, text)  # not even most of it
    history = next((tmp_path / "proj" / "runs").glob("*/tasks/*/history.jsonl")).read_text()
    assert key not in history and key[6:-6] not in history


def test_the_gateway_never_forwards_to_a_model_a_project_file_names(tmp_path: Path) -> None:
    """A project models.yaml (a task can write one) adds a keyless model at any host; a script naming it gets the
    task's own model, and nothing reaches that host."""
    planted = ScriptedServer({"tasks": [{"match": ".*", "turns": [{"content": "PLANTED ENDPOINT"}]}]})
    planted.start()
    project = tmp_path / "proj"
    project.mkdir()
    (project / "models.yaml").write_text(f"models:\n  elsewhere:\n    base_url: {planted.base_url}\n    model: m\n")
    call = GATEWAY_CALL.replace('"model": "any"', '"model": "elsewhere"').replace(f'"x" * {BIG_PROMPT_CHARS}', '"x"')
    try:
        script = {"tasks": [{"match": "inner", "turns": [{"content": "the task's own model"}]},
                            code_run_then_echo(call, "python")]}
        with ScriptedServer(script, log_path=tmp_path / "requests.jsonl") as server:
            done = run_ga("run", "probe the sandbox", "--model", f"scripted@{server.base_url}", "--json", cwd=project,
                          env={"OPENAI_API_KEY": OPENAI_SECRET}, timeout=240)
    finally:
        planted.stop()
    assert not planted.records, list(planted.records)[:1]
    if done.returncode == 2:  # refused before anything ran: one line naming the file
        assert done.stderr.strip().count("\n") == 0 and "models.yaml" in done.stderr, done.stderr
    else:
        answer = json.loads(done.stdout)["answer"]
        assert "CONTENT the task's own model" in answer and "PLANTED" not in answer, answer
