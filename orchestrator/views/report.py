"""`ga runs report`: one self-contained HTML page for a run (opens from a file, loads nothing from the
network) and a report.md beside it with the same facts in text.

What tasks wrote (answers, reasons, conversations) is hostile text: the page embeds it as JSON that cannot close
its <script> element and shows it escaped, under a Content-Security-Policy that loads nothing; report.md escapes
what would make a link, an image or HTML in a Markdown viewer (`md_text`), so none of a task's renders
there.

The page embeds a compact table of tasks and attempts, drawn as a timeline (one row per worker slot),
and every conversation, compressed in chunks of CHUNK tasks and inflated in the browser only when a
task is opened, so a run of 10,000 tasks stays a page of a few MB.
"""
from __future__ import annotations

import base64
import html
import json
import re
import time
import zlib
from importlib import resources
from pathlib import Path

from memory_shared.fsutil import atomic_replace
from orchestrator.views.runview import RunView, TaskView, first_user_message
from worker.context import cut_head_tail

CHUNK = 64  # tasks per compressed block of conversations
TEXT_CHARS = 2000  # of each text, argument and tool result kept in the page; full sizes are shown
MIN_TEXT_CHARS = 160
CONVERSATIONS_BUDGET = 4_000_000  # bytes of embedded conversations; big runs keep less of each text
MARKUP = re.compile(r"([\\\[\]<>|])")  # what makes a link, an image or HTML, or ends a table cell


def md_text(text: object) -> str:
    """Task-written text as one line of Markdown text that makes no link, image or HTML and closes no table cell
    (emphasis and code spans stay: they load nothing)."""
    return MARKUP.sub(r"\\\1", " ".join(str(text).split()))


def write_report(view: RunView, out_dir: Path) -> tuple[Path, Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    html_path, md_path = out_dir / "report.html", out_dir / "report.md"
    atomic_replace(html_path, render_html(view).encode("utf-8"))
    atomic_replace(md_path, render_markdown(view).encode("utf-8"))
    return html_path, md_path


def page_data(view: RunView) -> dict[str, object]:
    models = sorted({t.model for t in view.tasks})
    end = view.finished or time.time()
    return {
        "run": {"id": view.run_id, "name": view.name, "status": view.status, "started": view.started, "end": end,
                "counts": _counts(view), "usage": _usage_total(view), "governors": view.summary.get("governors") or []},
        "models": models,
        # one row per task: id, status, model index, turns, prompt, completion, cached, cost, seconds, reason, attempts
        "tasks": [[t.task_id, t.status, models.index(t.model), t.turns, *(_usage_row(t)), round(t.seconds, 2),
                   t.reason[:300], [[a.slot, round(a.start - view.started, 3),
                                     None if a.end is None else round(a.end - view.started, 3), a.status,
                                     a.reason[:200], a.killed] for a in t.attempts]]
                  for t in view.tasks],
        "marks": [{"at": round(m["time"] - view.started, 3), "event": m["event"],
                   "note": str(m.get("reason") or m.get("note") or m.get("status") or "")} for m in view.marks],
        "failures": [[reason, ids[:200], len(ids)] for reason, ids in view.failures_by_reason().items()],
        "usage_by_model": view.usage_by_model(),
        **_conversations(view),
    }


def render_html(view: RunView) -> str:
    template = resources.files("orchestrator.views").joinpath("report_page.html").read_text(encoding="utf-8")
    data = json.dumps(page_data(view), ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    return (template.replace("{{title}}", html.escape(f"{view.name or 'run'} · {view.run_id}"))
            .replace("{{data}}", data))


def render_markdown(view: RunView) -> str:
    counts, usage = _counts(view), _usage_total(view)
    wall = (view.finished or time.time()) - view.started
    lines = [f"# Run {view.run_id}", "",
             f"{view.name} · {view.status} · {wall:.1f} s · "
             + ", ".join(f"{n} {status}" for status, n in counts.items()),
             f"{usage['total']:,} tokens ({usage['prompt']:,} in, of which {usage['cached']:,} cached; "
             f"{usage['completion']:,} out) · ${usage['cost']:.4f}", "",
             "## Tokens and cost by model", "", "| model | uncached in | cached in | out | cost |", "|---|---|---|---|---|"]
    for model, u in view.usage_by_model().items():
        lines.append(f"| {model} | {int(u['prompt'] - u['cached']):,} | {int(u['cached']):,} | {int(u['completion']):,} "
                     f"| ${u['cost']:.4f} |")
    failures = view.failures_by_reason()
    lines += ["", "## Failures by reason", ""]
    lines += [f"- {len(ids)} × {md_text(reason)}: {', '.join(ids[:20])}{' …' if len(ids) > 20 else ''}"
              for reason, ids in failures.items()] or ["None."]
    lines += ["", "## Tasks", "", "| task | status | attempts | turns | tokens | cost | seconds | answer or reason |",
              "|---|---|---|---|---|---|---|---|"]
    for t in view.tasks:
        text = md_text(" ".join((t.answer if t.status == "succeeded" else t.reason or t.answer).split())[:120])
        lines.append(f"| {t.task_id} | {t.status} | {len(t.attempts)} | {t.turns} | {t.usage.get('total', 0):,} "
                     f"| ${t.usage.get('cost', 0):.4f} | {t.seconds:.1f} | {text} |")
    kept = view.summary.get("memory_kept") or {}
    if kept:  # what each task's memory commit committed, left for review, or could not keep
        lines += ["", "## Memory", "", "| task | committed | proposed | not kept | proposal |", "|---|---|---|---|---|"]
        lines += [f"| {task} | {k.get('committed', 0)} | {k.get('proposed', 0)} | {k.get('refused', 0)} "
                  f"| {k.get('proposal') or ''} |" for task, k in sorted(kept.items())]
    lines += ["", f"Conversations: `ga runs show {view.run_id} TASK`, or report.html beside this file.", ""]
    return "\n".join(lines)


def _conversations(view: RunView) -> dict[str, object]:
    """Every conversation in compressed chunks, each text cut to what keeps the page within its budget
    (estimated from the first chunks; `ga runs show RUN TASK` has every conversation whole)."""
    chunks = [view.tasks[k:k + CHUNK] for k in range(0, len(view.tasks), CHUNK)]
    limit = TEXT_CHARS
    for _ in range(4):  # the size does not fall in proportion to the cut: refine on a sample of chunks
        sample = [_chunk(view, tasks, limit) for tasks in chunks[:4]]
        estimate = sum(map(len, sample)) * len(chunks) / max(len(sample), 1)
        if estimate <= CONVERSATIONS_BUDGET or limit == MIN_TEXT_CHARS:
            break
        limit = max(MIN_TEXT_CHARS, int(limit * CONVERSATIONS_BUDGET / estimate))
    else:
        sample = []
    return {"chunks": sample + [_chunk(view, tasks, limit) for tasks in chunks[len(sample):]],
            "chunk_size": CHUNK, "text_chars": limit}


def _chunk(view: RunView, tasks: list[TaskView], limit: int) -> str:
    block = {t.task_id: _conversation_data(view, t, limit) for t in tasks}
    raw = json.dumps(block, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return base64.b64encode(zlib.compress(raw, 6)).decode("ascii")


def _conversation_data(view: RunView, task: TaskView, limit: int) -> dict[str, object]:
    path = view.history_path(task.task_id)

    def cut(text: str) -> str:
        return cut_head_tail(text or "", limit)

    return {"task": cut(first_user_message(path)), "answer": cut(task.answer), "reason": task.reason,
            "attempts": [[{"turn": t.turn, "text": cut(t.text), "seconds": round(t.seconds, 2),
                           "usage": {k: t.usage.get(k, 0) for k in ("prompt", "cached", "completion")},
                           "calls": [{"name": c.name, "args": cut(c.arguments), "output": cut(c.output),
                                      "size": len(c.output), "ok": c.ok} for c in t.calls]}
                          for t in turns] for turns in view.conversation(task.task_id)]}


def _counts(view: RunView) -> dict[str, int]:
    counts: dict[str, int] = {}
    for task in view.tasks:
        counts[task.status] = counts.get(task.status, 0) + 1
    return counts


def _usage_row(task: TaskView) -> list[float]:
    u = task.usage
    return [int(u.get("prompt", 0) or 0), int(u.get("completion", 0) or 0), int(u.get("cached", 0) or 0),
            round(float(u.get("cost", 0) or 0), 6)]


def _usage_total(view: RunView) -> dict[str, float]:
    keys = ("prompt", "completion", "cached", "cost")
    total = {k: sum(t.usage.get(k, 0) or 0 for t in view.tasks) for k in keys}
    return {**total, "total": total["prompt"] + total["completion"]}
