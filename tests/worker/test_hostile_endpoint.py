"""A hostile endpoint over real HTTP (the scripted server's fault kinds) through `ga run` and `ga fanout`:
each mode ends in one clear line, in bounded time, and leaves no part of the key anywhere."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.fanout_support import result_lines
from tests.ga_support import run_ga
from worker.scripted import ScriptedServer

KEY = "gk_live_7Qm2Xv9Lp4Rt8Wz3Ny6Bc1Hd5Fj0Ks"  # not sk-: only the configured-key redaction can catch it
REQUEST_TIMEOUT = 2
# mode -> (what the one line must say, requests the endpoint should see: 2 = retried once, 1 = not retried)
MODES = {
    "garbage_json": ("not a chat completion: invalid JSON", 2),
    "html": ("not a chat completion: an HTML page", 2),
    "empty_body": ("not a chat completion: an empty body", 2),
    "wrong_shape": ("not a chat completion: JSON of the wrong shape", 2),
    "giant_reply": ("the reply is over max_reply_bytes", 1),
    "slow_loris": (f"no complete reply within {REQUEST_TIMEOUT}s", 2),
    "echo_key": ("HTTP 401, the key was refused; check GA_HOSTILE_KEY", 1),
}


def _script() -> dict:
    return {"tasks": [{"match": f"mode {kind}\\b", "turns": [{"content": "fine"}], "faults": [{"rate": 1.0, "kind": kind}]}
                      for kind in MODES]}


def _project(tmp_path: Path, server: ScriptedServer) -> dict[str, str | None]:
    """The user's models.yaml (a project one may not send a key to a new endpoint) naming the endpoint with a key;
    the environment's changes holding it and pointing HOME there."""
    user_models = tmp_path / "home" / ".config" / "ga" / "models.yaml"
    user_models.parent.mkdir(parents=True, exist_ok=True)
    user_models.write_text(
        "models:\n  hostile:\n"
        f"    base_url: {server.base_url}\n    model: scripted\n    api_key_env: GA_HOSTILE_KEY\n"
        f"    request_timeout: {REQUEST_TIMEOUT}\n    max_retries: 1\n    backoff_base: 0.05\n    backoff_max: 0.1\n")
    ray_token = Path.home() / ".ray" / "auth_token"  # HOME moves; a local Ray's token stays where ray put it
    return {"OPENAI_API_KEY": None, "GA_MODEL": None, "GA_HOSTILE_KEY": KEY, "HOME": str(tmp_path / "home"),
            **({"RAY_AUTH_TOKEN_PATH": str(ray_token)} if ray_token.is_file() else {})}


def _key_pieces() -> set[str]:
    """Every 6-character piece of the key: a cut key leaves one of them behind."""
    return {KEY[i:i + 6] for i in range(len(KEY) - 5)}


def _largest_file(root: Path) -> int:
    return max((p.stat().st_size for p in root.rglob("*") if p.is_file()), default=0)


def _leaks(root: Path, *texts: str) -> list[str]:
    found = []
    pieces = [p.encode() for p in _key_pieces()]
    for path in [p for p in root.rglob("*") if p.is_file()]:
        data = path.read_bytes()
        found += [f"{path}: {p.decode()}" for p in pieces if p in data]
    for text in texts:
        found += [f"output: {p.decode()}" for p in pieces if p.decode() in text]
    return found


@pytest.mark.parametrize("kind", list(MODES))
def test_ga_run_against_a_hostile_endpoint(tmp_path: Path, kind: str) -> None:
    said, requests = MODES[kind]
    with ScriptedServer(_script()) as server:
        env = _project(tmp_path, server)
        started = time.monotonic()
        done = run_ga("run", f"mode {kind} please", "--model", "hostile", "--json", cwd=tmp_path, env=env, timeout=120)
        elapsed = time.monotonic() - started
        seen = len(server.requests)
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "failed"
    reason = result["reason"]
    assert "\n" not in reason and said in reason and reason.startswith("model error: model 'hostile'")
    assert "Traceback" not in done.stderr
    assert seen == requests
    # bounded: at most two requests of REQUEST_TIMEOUT each plus start-up, never the 200 s a trickle would take
    assert elapsed < 60
    assert _largest_file(tmp_path / "runs") < 1_000_000  # the giant reply landed nowhere (history.jsonl included)
    assert not _leaks(tmp_path, done.stdout, done.stderr)


def test_ga_fanout_against_a_hostile_endpoint(tmp_path: Path, ray_session: dict) -> None:
    tasks = {"name": "hostile", "concurrency": len(MODES), "retries": 0, "defaults": {"model": "hostile"},
             "tasks": [{"id": kind, "prompt": f"mode {kind} please"} for kind in MODES]}
    (tmp_path / "tasks.yaml").write_text(json.dumps(tasks))
    with ScriptedServer(_script(), log_path=tmp_path / "requests.jsonl") as server:
        env = _project(tmp_path, server)
        started = time.monotonic()
        done = run_ga("fanout", "tasks.yaml", "--address", ray_session["address"], "--out", "runs", "--json",
                      cwd=tmp_path, env=env)
        elapsed = time.monotonic() - started
        records = list(server.records)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    [run_dir] = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    by_id = {r["task_id"]: r for r in result_lines(run_dir)}
    assert sorted(by_id) == sorted(MODES)
    for kind, (said, requests) in MODES.items():
        reason = by_id[kind]["reason"]
        assert by_id[kind]["status"] == "failed"
        assert "\n" not in reason and said in reason, (kind, reason)
        assert sum(1 for r in records if r["fault"] == kind) == requests, kind
    assert elapsed < 240
    assert _largest_file(run_dir) < 1_000_000
    assert not _leaks(tmp_path, done.stdout, done.stderr)
