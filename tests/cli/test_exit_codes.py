"""The one rule of exit codes (orchestrator/exitcodes.py, the README's table), through real `ga` processes and the scripted
model: a question answered is 0, a claim its tools do not back is 1, a failed check is 1, a parent none of whose
workers got done is 1; and one count of tokens for a parent and its nested fan-out."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import yaml

from tests.ga_support import on_terminal, run_ga

ROOT = Path(__file__).resolve().parents[2]
NO_SECOND_CHANCE = {"GA_WORKER__SECOND_CHANCE": "0", "OPENAI_API_KEY": None, "GA_MODEL": None}


def code(script: str, kind: str = "python") -> dict:
    return {"name": "code_run", "arguments": {"type": kind, "script": script}}


def script_file(folder: Path, tasks: list[dict]) -> str:
    path = folder / f"script-{len(list(folder.glob('script-*')))}.yaml"
    path.write_text(yaml.safe_dump({"tasks": tasks}))
    return f"scripted:{path}"


def test_a_claim_its_tool_does_not_back_exits_1_and_a_question_answered_exits_0(tmp_path: Path) -> None:
    model = script_file(tmp_path, [
        {"match": "compute", "turns": [{"content": "Running it.", "tool_calls": [code("raise SystemExit(3)")]},
                                       {"content": "It is 42."}]},
        {"match": ".*", "turns": [{"content": "Paris is the capital of France."}]}])
    claimed = run_ga("run", "compute the answer", "--model", model, "--json", cwd=tmp_path, env=NO_SECOND_CHANCE)
    assert claimed.returncode == 1, claimed.stderr
    result = json.loads(claimed.stdout)
    assert result["status"] == "unverified" and result["exit_code"] == 1 and "code_run failed" in result["reason"]
    asked = run_ga("run", "What is the capital of France?", "--model", model, "--json", cwd=tmp_path,
                   env=NO_SECOND_CHANCE)
    assert asked.returncode == 0, asked.stderr
    assert json.loads(asked.stdout)["status"] == "unverified"  # the label says what it is; the exit says done


def test_a_fanout_of_questions_exits_0_and_a_failed_check_exits_1(tmp_path: Path) -> None:
    model = script_file(tmp_path, [{"match": ".*", "turns": [{"content": "Paris is the capital of France."}]}])
    questions = tmp_path / "questions.yaml"
    questions.write_text(yaml.safe_dump({"version": 1, "name": "questions", "defaults": {"model": model},
                                         "tasks": [{"id": f"q{i}", "prompt": "What is the capital of France?"}
                                                   for i in range(2)]}))
    done = run_ga("fanout", str(questions), "--out", str(tmp_path / "runs"), "--json", cwd=tmp_path,
                  env=NO_SECOND_CHANCE)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "unverified" and result["exit_code"] == 0
    summary = json.loads((Path(result["run_dir"]) / "summary.json").read_text())
    assert summary["exit_code"] == 0  # the run's record says what the process said (one rule, in the driver too)
    checked = tmp_path / "checked.yaml"
    checked.write_text(yaml.safe_dump({"version": 1, "name": "checked", "retries": 0, "defaults": {"model": model},
                                       "tasks": [{"id": "q", "prompt": "What is the capital of France?",
                                                  "check": {"pattern": "Berlin"}}]}))
    failed = run_ga("fanout", str(checked), "--out", str(tmp_path / "runs"), "--json", cwd=tmp_path,
                    env=NO_SECOND_CHANCE)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert json.loads(failed.stdout)["results"][0]["status"] == "failed"


def test_a_parent_none_of_whose_workers_got_done_exits_1(tmp_path: Path) -> None:
    fan_out = ("from orchestrator import fanout\n"
               "run = fanout(['count the words in alpha', 'count the words in beta'], display='quiet')\n"
               "print('workers:', [r['status'] for r in run.results])\n")
    model = script_file(tmp_path, [
        {"match": "one worker each", "turns": [{"content": "Fanning out.", "tool_calls": [code(fan_out)]},
                                               {"content": "The workers said:", "echo_last_tool_result": True}]},
        {"match": "count the words", "turns": [{"content": "Counting.", "tool_calls": [code("exit 1", "bash")]},
                                               {"content": "There are 12 words."}]}])
    done = run_ga("run", "Count the words, one worker each", "--model", model, cwd=tmp_path,
                  env={**NO_SECOND_CHANCE, "GA_FANOUT__RUNS_DIR": str(tmp_path / "runs")})
    assert "workers: ['unverified', 'unverified']" in done.stdout, done.stdout + done.stderr
    assert done.returncode == 1, done.stdout + done.stderr  # its own code_run ran; none of its workers got done
    said = " ".join(done.stderr.split())
    assert "succeeded after 2 turns" in said and "none of the workers it started got done" in said, said


def test_one_count_of_tokens_for_a_parent_and_its_nested_fanout(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "configs" / "examples" / "data", tmp_path / "configs" / "examples" / "data")
    env = {"GA_FANOUT__RUNS_DIR": str(tmp_path / "runs"), "OPENAI_API_KEY": None, "GA_MODEL": None}
    lines, status = on_terminal("run", "Count the words in the example files, one worker each", "--model",
                                f"scripted:{ROOT / 'configs/examples/scripts/parent.yaml'}", cwd=tmp_path, env=env)
    assert status == 0, lines
    text = "\n".join(lines)
    turn = int(re.search(r"t1\s+code_run .* -> ok [\d,]+ chars · ([\d,]+) tokens", text).group(1).replace(",", ""))
    final = re.search(r"succeeded after 2 turns, ([\d,]+) tokens \(([\d,]+) its own, ([\d,]+) in 1 fan-out\)", text)
    assert final, lines
    total, own, nested = (int(group.replace(",", "")) for group in final.groups())
    [summary] = [json.loads(p.read_text()) for p in (tmp_path / "runs").glob("*parent-example*/summary.json")]
    assert nested == summary["usage"]["total"] and total == own + nested  # the nested run counted, once
    assert nested < turn <= total  # the turn line counted it too
    [session] = json.loads(run_ga("sessions", "list", "--json", cwd=tmp_path, env=env).stdout)
    assert session["usage"]["total"] == total  # what /cost and `ga sessions` say
