"""What reading a reply costs the loop: tool calls from the text, the invented-result cut, and the
repeated-output guard, per reply, on the recorded real-model replies and on long replies.

    python bench/reply_reading.py
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from worker.model.replies import interpret, repetition

ROOT = Path(__file__).resolve().parent.parent
KNOWN = ["code_run", "file_read", "file_write", "file_patch", "web_scan", "web_execute_js",
         "update_working_checkpoint", "start_long_term_update", "ask_user"]


def recorded() -> list[str]:
    texts = []
    for path in sorted((ROOT / "tests" / "real_model").glob("*.history.jsonl")):
        for line in path.read_text().splitlines():
            content = json.loads(line)["received"].get("content")
            if content:
                texts.append(content)
    return texts


def per_reply_ms(texts: list[str], rounds: int) -> float:
    started = time.perf_counter()
    for _ in range(rounds):
        for text in texts:
            repetition(text)
            interpret(text, [], "native", KNOWN)
    return (time.perf_counter() - started) / rounds / len(texts) * 1000


def main() -> None:
    code = "\n".join(f"    total += compute({i}) * weight_{i % 7}" for i in range(150))  # ~6 KB: a 1,536-token reply
    long = "\n".join(f"line {i}: value = compute({i}) + offset_{i % 7}" for i in range(1500))  # ~60 KB
    loop = "I will now print the number.\n" * 200
    triple = ('```json\n{"name": "code_run", "arguments": {"script": """\n' + code + '\n""", "timeout": 60}}\n```')
    broken = '```json\n{"name": "code_run", "arguments": {"script": "' + code.replace("\n", "\\n") + '"\n```'
    cases = [("recorded real-model replies", recorded(), 200),
             ("6 KB call, strict JSON", [json.dumps({"name": "code_run", "arguments": {"script": code}})], 100),
             ("6 KB call, triple-quoted (Python literal)", [triple], 100),
             ("6 KB call, braces missing (json-repair)", [broken], 20),
             ("6 KB reply (about max_tokens 1536)", [f"```python\n{code}\n```"], 100),
             ("60 KB reply", [long], 10),
             ("6 KB runaway loop", [loop], 100)]
    for name, texts, rounds in cases:
        print(f"{name:38s} {per_reply_ms(texts, rounds):8.3f} ms per reply ({len(texts)} replies)")
    print("load average (1, 5, 15 min):", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
