"""Concurrent model calls through a task's gateway never overshoot its budget together: the gateway holds a bound
on each call before forwarding it (worker/gateway.py, Account.reserve_call).

Through a real `ga run`, real bubblewrap and the scripted model over real HTTP, whose every reply waits a
second, so that the script's calls are surely in flight together.
"""
from __future__ import annotations

import json
from pathlib import Path

from tests.ga_support import run_ga
from worker.scripted import ScriptedServer

CALLS = 6
PROMPT_CHARS = 40_000  # ~10,000 tokens each by the scripted server's count; held as ~20,000 (2 bytes a token)
BUDGET = 30_000

CONCURRENT_CALLS = f"""
import json, os, threading, urllib.error, urllib.request
said = []
def call(i):
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=json.dumps({{"model": "any", "messages": [{{"role": "user", "content": "inner " + "x" * {PROMPT_CHARS}}}]}}).encode(),
        headers={{"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}})
    try:
        reply = json.load(urllib.request.urlopen(request, timeout=120))
        said.append("INNER %d" % (reply["usage"]["prompt_tokens"] + reply["usage"]["completion_tokens"]))
    except urllib.error.HTTPError as exc:
        said.append("REFUSED %d" % exc.code)
threads = [threading.Thread(target=call, args=(i,)) for i in range({CALLS})]  # each line printed at the end
for t in threads: t.start()
for t in threads: t.join()
print("\\n".join(said))
"""


def test_concurrent_gateway_calls_overshoot_the_budget_by_one_call_at_most(tmp_path: Path) -> None:
    script = {"latency": 1.0, "tasks": [
        {"match": "inner", "turns": [{"content": "inner answer"}]},
        {"match": ".*", "turns": [
            {"content": "running", "tool_calls": [{"name": "code_run", "arguments": {
                "type": "python", "script": CONCURRENT_CALLS}}]},
            {"content": "done"}]}]}
    work = tmp_path / "proj"
    work.mkdir()
    with ScriptedServer(script, log_path=tmp_path / "requests.jsonl") as server:
        done = run_ga("run", "spend it", "--model", f"scripted@{server.base_url}", "--json", cwd=work,
                      env={"GA_WORKER__MAX_TOKENS": str(BUDGET)}, timeout=300)
        forwarded = [r for r in server.records if "inner x" in json.dumps(r["body"])]
    assert done.stdout.strip(), done.stderr[-2000:]
    result = json.loads(done.stdout)
    turns = [json.loads(line) for line in next(work.glob("runs/*/tasks/*/history.jsonl")).read_text().splitlines()]
    output = "".join(r["output"] for turn in turns for r in turn.get("tool_results", []))  # the script's, once
    spent = [int(line.split()[1]) for line in output.splitlines() if line.startswith("INNER ")]
    refused = output.count("REFUSED 402")
    assert spent and len(spent) + refused == CALLS, output[-3000:]
    assert len(forwarded) == len(spent)
    # the task had 30,000 tokens: the first call held ~21,500, so the others waited for it; what it then left
    # cannot hold another's bound, so the rest are refused
    assert len(spent) <= 2 and refused >= CALLS - 2, output[-3000:]
    assert result["usage"]["total"] <= BUDGET, result["usage"]
