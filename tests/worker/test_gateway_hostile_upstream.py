"""The model gateway against a broken model endpoint: a script that calls it through every fault of the hostile
scripted server gets an answer (an error status or the endpoint's own reply) in bounded time, never the key, and
the gateway goes on serving. A real `ga run`, the scripted server over HTTP, real bubblewrap."""
from __future__ import annotations

import json
from pathlib import Path

from tests.ga_support import run_ga
from tests.worker.test_hostile_endpoint import KEY, MODES, REQUEST_TIMEOUT
from worker.scripted import ScriptedServer

PROBE = """
import json, os, time, urllib.error, urllib.request
for kind in %s:
    request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=json.dumps({"messages": [{"role": "user", "content": "mode " + kind + " please"}]}).encode(),
        headers={"Content-Type": "application/json"})
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            status, body = reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        status, body = exc.code, exc.read()
    except Exception as exc:
        status, body = "broken", repr(exc).encode()
    print("MODE", kind, status, round(time.monotonic() - started, 1), len(body), %r in body.decode(errors="replace"))
"""


def test_a_broken_endpoint_behind_the_gateway_gives_the_script_an_answer_and_never_the_key(tmp_path: Path) -> None:
    kinds = [kind for kind in MODES if kind != "giant_reply"] + ["giant_reply"]
    script = {"tasks": [
        {"match": "probe the gateway", "turns": [
            {"content": "probing", "tool_calls": [{"name": "code_run", "arguments": {
                "type": "python", "script": PROBE % (kinds, KEY), "timeout": 300}}]},
            {"content": "Output:", "echo_last_tool_result": True}]},
        *({"match": f"mode {kind}\\b", "turns": [{"content": "fine"}], "faults": [{"rate": 1.0, "kind": kind}]}
          for kind in kinds)]}
    with ScriptedServer(script) as server:
        user_models = tmp_path / "home" / ".config" / "ga" / "models.yaml"
        user_models.parent.mkdir(parents=True)
        user_models.write_text(f"models:\n  hostile:\n    base_url: {server.base_url}\n    model: scripted\n"
                               f"    api_key_env: GA_HOSTILE_KEY\n    request_timeout: {REQUEST_TIMEOUT}\n"
                               "    max_retries: 1\n    backoff_base: 0.05\n    backoff_max: 0.1\n"
                               "    max_reply_bytes: 1000000\n")
        work = tmp_path / "work"
        work.mkdir()
        done = run_ga("run", "probe the gateway", "--model", "hostile", "--json", "--no-preflight", cwd=work,
                      env={"HOME": str(tmp_path / "home"), "GA_HOSTILE_KEY": KEY, "OPENAI_API_KEY": None,
                           "GA_MODEL": None}, timeout=300)
    assert done.stdout.strip(), done.stderr[-2000:]
    answer = json.loads(done.stdout)["answer"]
    seen = {line.split()[1]: line.split()[2:] for line in answer.splitlines() if line.startswith("MODE ")}
    assert sorted(seen) == sorted(kinds), answer
    for kind, (status, seconds, _size, leaked) in seen.items():
        assert leaked == "False", f"{kind}: the key reached the script"
        assert status != "broken" and float(seconds) < 30, f"{kind}: {status} after {seconds}s"
    assert KEY not in done.stdout + done.stderr
