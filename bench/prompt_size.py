"""How big is the first request of a worker with 20 installed skills, for the task "Hello"?

Builds a real memory store (20 L3 SOPs and their 20 L1 pointer lines) in a temporary directory,
renders the prompt exactly as the worker does, adds the registered tool schemas and the user
message, and prints characters and tokens against the goal (2,000 tokens) and the reference
figures (GenericAgent 2,298; Claude Code 22,821).

    python bench/prompt_size.py
"""
from __future__ import annotations

import datetime as dt
import json
import sys
import tempfile
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory_shared import MemoryStore, format_sop, render_l1  # noqa: E402
from worker.model.textproto import protocol_block  # noqa: E402
from worker.prompt import build_first_user_message, build_system_prompt  # noqa: E402
from worker.tools import REGISTRY  # noqa: E402

GOAL = 2000
REFERENCES = {"GenericAgent": 2298, "Claude Code": 22821}
TASK = "Hello"

# (category, name, L1 pointer, description, steps, pitfalls)
SKILLS = [
    ("web", "deploy-flask", "Flask app behind gunicorn+nginx", "serve a Flask app with gunicorn behind nginx",
     ["pip install gunicorn; check `gunicorn --version`", "gunicorn -w 2 -b 127.0.0.1:8000 app:app --daemon",
      "nginx site: proxy_pass http://127.0.0.1:8000; `nginx -t` then reload", "curl -sI localhost | head -1 shows 200"],
     ["502: gunicorn not running or wrong module path", "port taken: see ops/port-in-use"]),
    ("data", "hf-dataset", "download an HF dataset, check rows", "fetch a Hugging Face dataset and verify its row count",
     ["pip install datasets", "load_dataset(name, split='train') with HF_HUB_OFFLINE unset", "print(len(ds), ds.features)",
      "save_to_disk('data/<name>') for reuse"], ["gated datasets need a token: ask_user", "disk full: ops/disk-cleanup"]),
    ("data", "csv-dedupe", "clean and dedupe a CSV", "normalize headers, trim cells, drop duplicate rows of a CSV",
     ["pandas.read_csv(path, dtype=str, keep_default_na=False)", "df.columns = df.columns.str.strip().str.lower()",
      "df = df.apply(lambda c: c.str.strip()).drop_duplicates()", "write to <name>.clean.csv; print before/after counts"],
     ["wrong encoding: retry with encoding='latin-1'", "huge file: chunksize=100_000"]),
    ("devops", "docker-build", "build and push a Docker image", "build, tag and push an image, verify it runs",
     ["docker build -t <repo>:<tag> .", "docker run --rm <repo>:<tag> --version", "docker push <repo>:<tag>"],
     ["denied: docker login first (ask_user for credentials)", "no space: docker system prune -f"]),
    ("devops", "systemd-service", "run a script as a systemd service", "install a long-running script as a systemd unit",
     ["write /etc/systemd/system/<name>.service (ExecStart, Restart=on-failure)", "systemctl daemon-reload",
      "systemctl enable --now <name>", "systemctl status <name> shows active (running)"],
     ["exit 203: ExecStart path not absolute or not executable", "logs: journalctl -u <name> -n 50"]),
    ("git", "bisect", "find a regression with git bisect", "find the commit that broke a test with git bisect run",
     ["git bisect start <bad> <good>", "git bisect run pytest -x -q tests/test_x.py", "git bisect reset; report the hash"],
     ["flaky test: run it 3 times in the script", "build step needed: wrap it in a script"]),
    ("python", "pin-requirements", "venv with pinned requirements", "create a venv and pin exact dependency versions",
     ["python -m venv .venv && .venv/bin/pip install -r requirements.in", ".venv/bin/pip freeze > requirements.txt",
      "fresh venv: pip install -r requirements.txt and run the tests"], ["compiler errors: install build-essential"]),
    ("python", "flaky-tests", "triage flaky pytest tests", "find and quarantine flaky tests",
     ["pytest -q -p no:randomly --count 20 -x <test> (pytest-repeat)", "record failures with -rA", "mark xfail(strict=False) with an issue link"],
     ["order dependence: run with -p randomly to confirm"]),
    ("web", "scrape-pages", "scrape a paginated site politely", "collect records from a paginated listing",
     ["web_scan the first page; find the next-page selector", "loop pages with a 1 s delay; stop when no next link",
      "save JSON lines; print count and one sample"], ["robots.txt disallows: stop and ask_user", "JS-rendered: web_execute_js"]),
    ("web", "form-login", "log in through a web form", "log in to a site with a form and keep the session",
     ["web_scan the login page; find the user/password inputs", "fill and submit with web_execute_js", "verify a logged-in element"],
     ["captcha: ask_user", "2FA: ask_user for the code"]),
    ("data", "sqlite-backup", "back up and restore SQLite", "take a consistent SQLite backup and test the restore",
     ["sqlite3 db.sqlite \".backup backup.sqlite\"", "sqlite3 backup.sqlite 'PRAGMA integrity_check' prints ok",
      "restore: copy over while the app is stopped"], ["database locked: use .backup, never cp while writing"]),
    ("ops", "disk-cleanup", "free disk space safely", "find what fills a disk and free space safely",
     ["df -h; du -xh / --max-depth=2 | sort -h | tail", "clean caches: pip cache purge, apt-get clean, docker prune",
      "rotate big logs with logrotate -f"], ["never delete files of a running database"]),
    ("ops", "port-in-use", "free a port in use", "find and stop the process holding a TCP port",
     ["ss -ltnp | grep :<port>", "check it is ours before kill <pid>", "verify with ss again"], ["system service: systemctl stop, not kill"]),
    ("docs", "pdf-to-text", "extract text from PDFs", "extract text and tables from a PDF",
     ["pdftotext -layout in.pdf out.txt", "tables: pdfplumber page.extract_tables()", "scanned: ocrmypdf first"],
     ["empty text means a scanned PDF"]),
    ("media", "ffmpeg-compress", "compress a video with ffmpeg", "shrink a video to a target size with ffmpeg",
     ["ffprobe for duration and bitrate", "ffmpeg -i in.mp4 -c:v libx264 -crf 28 -preset medium -c:a aac -b:a 96k out.mp4",
      "check size and play the first seconds"], ["green frames: add -pix_fmt yuv420p"]),
    ("net", "api-retry", "HTTP API client with retries", "call an HTTP API with retries, backoff and timeouts",
     ["requests.Session with urllib3 Retry(total=5, backoff_factor=0.5, status_forcelist=[429,500,502,503])",
      "timeout=(5, 30) on every call", "log status and latency"], ["429 with Retry-After: honour it"]),
    ("ml", "small-classifier", "fine-tune a small text classifier", "fine-tune a small text classifier on CPU",
     ["sklearn TfidfVectorizer + LogisticRegression baseline", "report accuracy/F1 on a held-out split",
      "save with joblib; reload and predict one example"], ["class imbalance: class_weight='balanced'"]),
    ("office", "xlsx-report", "Excel report with a pivot table", "build an Excel report with a pivot and a chart",
     ["pandas pivot_table(index, columns, values, aggfunc='sum')", "to_excel with openpyxl; add a BarChart",
      "reopen the file and check the sheet names"], ["dates as text: pd.to_datetime first"]),
    ("mail", "smtp-report", "send a report by SMTP", "send an email report with an attachment over SMTP",
     ["smtplib.SMTP_SSL(host, 465) with credentials from the environment", "EmailMessage with add_attachment",
      "send to yourself first and check delivery"], ["never write credentials to memory"]),
    ("sched", "cron-job", "schedule a script with cron and logs", "run a script on a schedule with logs",
     ["crontab -l > cron.bak", "add '*/15 * * * * cd /path && ./run.sh >> run.log 2>&1'", "wait for a run; tail run.log"],
     ["cron has a minimal PATH: use absolute paths"]),
]


def build_store(root: Path) -> MemoryStore:
    store = MemoryStore(root, create=True)
    with store.snapshot() as snap:
        index = (snap.path / "L1" / "index.md").read_text(encoding="utf-8").rstrip("\n")
    pointers = [f"- {pointer}: L3/{cat}/{name}.md" for cat, name, pointer, *_ in SKILLS]
    with store.transaction(message="bench: 20 skills", author="bench") as txn:
        for cat, name, _pointer, description, steps, pitfalls in SKILLS:
            front = {"name": name, "category": cat, "description": description,
                     "created": dt.date(2025, 1, 31).isoformat(), "evidence": f"task bench-{name}, tool calls c1 c2"}
            body = ("\n## Preconditions\n- a shell on the target machine\n\n## Steps\n"
                    + "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))
                    + "\n\n## Common failures\n" + "\n".join(f"- {p}" for p in pitfalls) + "\n")
            txn.write(f"L3/{cat}/{name}.md", format_sop(front, body))
        txn.write("L1/index.md", index + "\n## Skills (L3)\n" + "\n".join(pointers) + "\n")
    return store


def real_tokenizers() -> tuple[list[tuple[str, Callable[[str], int]]], str]:
    """Offline tokenizers, or why there are none."""
    try:
        import bpe_openai  # ships the cl100k/o200k tables inside the package: no download
    except ImportError:
        pass
    else:
        found = []
        for name in ("o200k_base", "cl100k_base"):
            enc = bpe_openai.get_encoding(name)
            found.append((f"{name} (bpe-openai)", lambda text, enc=enc: len(enc.encode(text))))
        return found, ""
    try:
        import tiktoken
    except ImportError:
        return [], "no offline tokenizer installed (tiktoken is absent; `pip install bpe-openai` ships its tables)"
    try:
        enc = tiktoken.get_encoding("o200k_base")  # works only if the table is already cached locally
    except Exception as exc:  # no network here: tiktoken cannot download its tables
        return [], f"tiktoken is installed but its tables are not cached offline ({type(exc).__name__})"
    return [("o200k_base (tiktoken)", lambda text: len(enc.encode(text)))], ""


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = build_store(Path(tmp) / "memory")
        with store.snapshot() as snap:
            l1 = render_l1(snap.path)
            sops = sorted(p for p in (snap.path / "L3").rglob("*.md") if p.name != "README.md")
            sop_chars = sum(len(p.read_text(encoding="utf-8")) for p in sops)
    system = build_system_prompt(l1)
    user = build_first_user_message(TASK)
    schemas = [t.schema() for t in REGISTRY.values()]
    tools_json = json.dumps(schemas, ensure_ascii=False)
    text_mode_tools = protocol_block(schemas)
    parts = {"system prompt": system, "  of which L1 index": l1, "tool schemas (native, JSON)": tools_json,
             "user message": user}
    total_native = system + tools_json + user
    total_text = system + "\n\n" + text_mode_tools + user

    print(f"memory: {len(sops)} L3 SOPs ({sop_chars} chars, read on demand, not in the prompt); "
          f"L1 index {len(l1.splitlines())} lines / {len(l1)} chars (bound 30 / 2000)")
    print(f"tools registered: {len(schemas)} ({', '.join(REGISTRY)})")
    tokenizers, why_not = real_tokenizers()
    header = f"{'part':32} {'chars':>7} {'chars/4':>8}" + "".join(f" {n.split()[0]:>12}" for n, _ in tokenizers)
    print(header)
    rows = list(parts.items()) + [("total, native tool mode", total_native), ("total, text tool mode", total_text)]
    results: dict[str, list[int]] = {}
    for name, text in rows:
        counts = [count(text) for _, count in tokenizers]
        results[name] = [len(text), len(text) // 4] + counts
        print(f"{name:32} {len(text):>7} {len(text) // 4:>8}" + "".join(f" {c:>12}" for c in counts))
    if why_not:
        print(f"real tokenizer: none ({why_not}); figures below use chars/4")
    else:
        print("real tokenizers: " + ", ".join(n for n, _ in tokenizers))
    native = results["total, native tool mode"]
    best = native[2] if len(native) > 2 else native[1]
    basis = tokenizers[0][0] if tokenizers else "chars/4"
    verdict = "meets" if best <= GOAL else "MISSES"
    print(f"\nfirst request ('{TASK}', native tools, {basis}): {best} tokens; goal <= {GOAL}: {verdict} "
          f"({best / GOAL:.2f} of the goal)")
    for ref, tokens in REFERENCES.items():
        print(f"  vs {ref} {tokens}: {best / tokens:.2f}x ({tokens / best:.1f}x smaller)")
    print("note: a provider adds its own template around the tool schemas, so its count can differ slightly")


if __name__ == "__main__":
    main()
