"""Issue 35, item 3: ga distils a task itself (worker/distill.py), without the model calling start_long_term_update,
and the next rounds of the same task reuse what it kept: fewer turns and tokens, equal success. What ga distils
passes issue 31's rules: it is kept only when ga's own re-run in a fresh sandbox prints the answer again, with its
provenance, under memory.admit. Everything runs through a real `ga fanout` with the scripted model."""
from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any, Optional

import yaml

from tests.ga_support import run_ga
from tests.memory_shared.memory_attack_support import NO_MODEL, code, first_request, script_file, write
from tests.store_support import store_in_ga_home  # noqa: F401  (fixture)
from worker.distill import Ran, distil

EXAMPLE = Path(__file__).resolve().parents[2] / "configs" / "examples" / "distill_reuse.yaml"
SOP = "L3/distilled/prime-numbers-below-number.md"
SCRIPT = "L3/scripts/distilled/prime-numbers-below-number.py"
DISTILLED = ["L1/index.md", SOP, SCRIPT]  # sorted
OFFLINE: dict[str, Optional[str]] = dict(NO_MODEL)


def fanout(spec: Path, out: Path, cwd: Path, **env: str) -> dict[str, dict[str, Any]]:
    done = run_ga("fanout", str(spec), "--json", "--out", str(out), cwd=cwd, env={**OFFLINE, **env})
    assert done.returncode in (0, 1), done.stdout + done.stderr
    run_dir = Path(json.loads(done.stdout)["run_dir"])
    return {r["task_id"]: r for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}


def one_task(tmp_path: Path, turns: list[dict[str, Any]], inputs: Optional[list[str]] = None,
             **env: str) -> dict[str, Any]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    model = script_file(tmp_path, [{"match": "Count it", "turns": turns}])
    task: dict[str, Any] = {"id": "t", "prompt": "Count it and answer with the number."}
    if inputs:
        task["inputs"] = inputs
    spec = tmp_path / "tasks.yaml"
    spec.write_text(yaml.safe_dump({"version": 1, "defaults": {"model": f"scripted:{model}", "max_turns": 8},
                                    "tasks": [task], "memory": {"commit": True}}), encoding="utf-8")
    return fanout(spec, tmp_path / "runs", tmp_path, **env)["t"]


def test_ga_distils_the_task_and_later_rounds_reuse_it(tmp_path: Path, store_root: Path) -> None:
    rounds = fanout(EXAMPLE, tmp_path / "runs", tmp_path)
    first, second, third = rounds["round-1"], rounds["round-2"], rounds["round-3"]
    assert [r["status"] for r in (first, second, third)] == ["succeeded"] * 3
    assert all(r["check"]["passed"] for r in (first, second, third))
    assert first["memory"]["committed"] == DISTILLED and first["memory"]["distilled"] == SOP
    assert second["turns"] < first["turns"] and second["usage"]["total"] < first["usage"]["total"]
    assert third["turns"] == second["turns"] and not third.get("memory")  # reuse distils nothing again
    system = first_request(second["history_path"])[0]["content"]
    assert f"{SOP} (a verified script" in system and "verified: task round-1" in system
    with open(second["history_path"], encoding="utf-8") as handle:
        calls = [c["function"] for line in handle for c in (json.loads(line)["received"].get("tool_calls") or [])]
    assert [c["name"] for c in calls] == ["file_read", "code_run"] and SCRIPT in calls[1]["arguments"]
    shown = run_ga("memory", "show", "--provenance", SOP, cwd=tmp_path, env=OFFLINE).stdout
    words = " ".join(shown.split())  # the table wraps where the path of the store makes it
    assert "verified (file): task round-1" in words and "fresh sandbox" in words
    stored = (store_root / "generations" / str(first["memory"]["generation"]) / SCRIPT).read_text()
    assert "sieve" in stored  # the file the task ran (python3 primes.py), not the command


def test_with_memory_distill_off_every_round_works_it_out_again(tmp_path: Path, store_root: Path) -> None:
    rounds = fanout(EXAMPLE, tmp_path / "runs", tmp_path, GA_MEMORY__DISTILL="false")
    assert {r["status"] for r in rounds.values()} == {"succeeded"}
    assert {r["turns"] for r in rounds.values()} == {rounds["round-1"]["turns"]}
    assert not any(r.get("memory") for r in rounds.values())


def test_under_review_the_distilled_procedure_waits_for_a_person(tmp_path: Path, store_root: Path) -> None:
    rounds = fanout(EXAMPLE, tmp_path / "runs", tmp_path, GA_MEMORY__ADMIT="review")
    first, second = rounds["round-1"], rounds["round-2"]
    assert first["memory"]["proposed"] == DISTILLED and not first["memory"]["committed"]
    assert second["turns"] == first["turns"] and SOP not in first_request(second["history_path"])[0]["content"]


def test_a_script_that_needs_the_task_files_is_not_kept(tmp_path: Path, store_root: Path) -> None:
    data = tmp_path / "words.txt"
    data.write_text("one two three four five six seven\n", encoding="utf-8")
    result = one_task(tmp_path, [{"tool_calls": [code("ls", "bash")]},
                                 {"tool_calls": [code("print(len(open('words.txt').read().split()))")]},
                                 {"content": "7 words"}], inputs=[str(data)])
    assert result["status"] == "succeeded" and result["answer"] == "7 words"
    assert not result.get("memory")  # ga's re-run, without the task's files, fails: nothing kept, nothing proposed
    assert not (store_root / "proposals").exists() or not any((store_root / "proposals").iterdir())


def test_an_answer_the_script_only_spells_out_is_not_distilled(tmp_path: Path, store_root: Path) -> None:
    failed = {"tool_calls": [code("print(seven)")]}  # a first try that fails: three turns in all
    spelled = one_task(tmp_path / "a", [failed, {"tool_calls": [code("x = 7\nprint(7)")]}, {"content": "7"}])
    echoed = one_task(tmp_path / "b", [failed, {"tool_calls": [code("echo 7", "bash")]}, {"content": "7"}])
    written = one_task(tmp_path / "c", [{"tool_calls": [write("n.py", "print(3 + 4)\n")]},
                                        {"tool_calls": [code("python3 n.py", "bash")]}, {"content": "7"}])
    assert spelled["status"] == echoed["status"] == "succeeded"
    assert not spelled.get("memory") and not echoed.get("memory")
    assert written["memory"]["committed"] == ["L1/index.md", "L3/distilled/count-number.md",
                                           "L3/scripts/distilled/count-number.py"]


def test_a_task_done_in_two_turns_is_not_distilled(tmp_path: Path, store_root: Path) -> None:
    """Reusing a stored procedure takes two turns (run it, answer): a task done in two has nothing to gain, and
    one-off calls would fill the L1 index."""
    result = one_task(tmp_path, [{"tool_calls": [code("print(6 * 7)")]}, {"content": "42"}])
    assert result["status"] == "succeeded" and result["turns"] == 2 and not result.get("memory")


def test_with_no_room_in_l1_the_procedure_is_kept_without_its_pointer() -> None:
    ran = [Ran("code_run", {"script": "print(seven)", "type": "python"}, False, "exit code 1\nNameError"),
           Ran("code_run", {"script": "print(3 + 4)", "type": "python"}, True, "exit code 0\n7")]
    found, why = distil("Count it and answer with the number.", "7", ran, turns=3, today=date(2026, 1, 1),
                        exists=lambda path: False)
    assert found is not None and not why and found.claim == "7"
    index = "- a line\n" * 5
    roomy = found.changes(index, 3, (30, 2000))
    assert [c.path for c in roomy][-1] == "L1/index.md" and roomy[-1].text == index + found.pointer + "\n"
    full = found.changes(index, 3, (5, 2000))
    assert [c.path for c in full] == [found.script_path, found.sop_path] and not found.pointer


def test_tasks_that_distil_the_same_procedure_at_once_all_land_as_one(tmp_path: Path, store_root: Path) -> None:
    """Three copies of round 1 at once: each distils the same procedure from its own pinned snapshot. The texts
    do not depend on the task (its provenance names it), so the commits merge: one SOP, one pointer, no proposal."""
    prompt = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))["tasks"][0]["prompt"]
    model = EXAMPLE.parent / "scripts" / "distill_reuse.yaml"
    spec = tmp_path / "tasks.yaml"
    spec.write_text(yaml.safe_dump({"version": 1, "defaults": {"model": f"scripted:{model}", "max_turns": 8},
                                    "concurrency": 3, "tasks": [{"id": f"c{i}", "prompt": prompt} for i in range(3)],
                                    "memory": {"commit": True}}), encoding="utf-8")
    results = fanout(spec, tmp_path / "runs", tmp_path)
    assert {r["status"] for r in results.values()} == {"succeeded"}
    assert not any(r.get("memory", {}).get("proposed") for r in results.values()), results
    assert any(r.get("memory", {}).get("committed") == DISTILLED for r in results.values())
    head = max(int(p.name) for p in (store_root / "generations").iterdir())
    index = (store_root / "generations" / str(head) / "L1" / "index.md").read_text()
    assert index.count(SOP) == 1
