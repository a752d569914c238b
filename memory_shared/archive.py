"""L4 session archive: raw histories of finished sessions, compressed by month, bounded, searchable.

Lives in <root>/archive/, outside the generations, and is append-only:
  raw/YYYY-MM/<date>_<task>.jsonl   a finished session's history.jsonl, copied as is
  YYYY-MM.jsonl.gz                  compact records (one per session) of that month
  summary.jsonl                     one line per month dropped past `keep_months`
A session is added under a shared flock on archive/.lock (workers finishing at once share it and one
group flush, memory_shared/groupsync.py) by write-temp + flush + link; every other change is made under
the exclusive flock and lands by write-temp + fsync + rename. A crash at any point loses no session (at
worst a session is in both raw and its month until the next compress, which then only deletes the raw copy).
"""
from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import ContextManager, Iterator, Optional, TypedDict
from urllib.parse import quote, unquote

from . import faults
from .fsutil import Folder, Unsafe, atomic_replace, flocked, unique, write_all
from .groupsync import durable
from .jsontypes import JSONObject


class ArchiveStatus(TypedDict):
    raw_sessions: int
    months: dict[str, int]  # month -> sessions archived
    summarized_months: list[str]


TEMP_MARK = ".tmp-"
HISTORY_CAP = 1 << 30  # bytes: a longer history is refused (a sparse file a task grew must not fill the disk)
ARG_CHARS = 40
LINE_CHARS = 200
USER_CHARS = 500
ANCHOR_TAGS = re.compile(r"<(history|key_info|earlier_context|tool_result)>.*?</\1>", re.S)
TEXT_TOOL_USE = re.compile(r"<tool_use>(.*?)</tool_use>", re.S)
MONTH = re.compile(r"^\d{4}-\d{2}$")
DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _write_lines(path: Path, lines: list[str], *, gz: bool) -> None:
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    atomic_replace(path, gzip.compress(data, mtime=0) if gz else data,
                   before_rename=lambda: faults.point("archive.before_rename"))


def _copy_history(source: Path, out: int) -> None:
    """Copy a history file that sits where the task's code could write (`ga run`) to the open fd `out`: never
    through a symlink, only a regular file, at most HISTORY_CAP bytes."""
    with contextlib.closing(Folder(source.parent)) as folder:
        src = folder.open(source.name)
    try:
        if os.fstat(src).st_size > HISTORY_CAP:
            raise Unsafe(f"{source}: larger than {HISTORY_CAP >> 20} MB; not archived")
        left = HISTORY_CAP  # a script still writing cannot make the copy longer than the cap
        while left and (chunk := os.read(src, min(left, 1 << 20))):
            write_all(out, chunk)
            left -= len(chunk)
    finally:
        os.close(src)


def _encode_task(task_id: str) -> str:
    """Reversible, filesystem-safe; '~' is kept free as the duplicate separator."""
    return quote(task_id, safe="").replace("~", "%7E")[:180]


class Archive:
    """The L4 archive of one memory root; safe to use from many processes at once."""

    def __init__(self, root: Path | str, *, keep_months: int = 12):
        if keep_months < 1:
            raise ValueError(f"keep_months must be at least 1 (got {keep_months})")
        self.dir = Path(root) / "archive"
        self.raw_dir = self.dir / "raw"
        self.keep_months = keep_months

    # ---- writing -------------------------------------------------------------------------------

    def store_session(self, task_id: str, history_path: Path | str, when: Optional[datetime] = None) -> Path:
        """Copy a finished session's history.jsonl into raw/; returns the archived path."""
        source = Path(history_path)
        if not source.is_file() and not source.is_symlink():
            raise FileNotFoundError(f"{source}: no such history file to archive")
        when = when or datetime.now().astimezone()
        day = when.strftime("%Y-%m-%d")
        month_dir = self.raw_dir / day[:7]
        stem = f"{day}_{_encode_task(task_id)}"
        with self._locked(shared=True):  # writers share it; compress holds it alone, so the temps it sees are orphans
            with contextlib.closing(Folder(month_dir, create=True)) as month:
                tmp = f"{stem}{TEMP_MARK}{unique()}"
                out = month.create(tmp, os.O_WRONLY)
                try:
                    _copy_history(source, out)
                    os.utime(out, (when.timestamp(), when.timestamp()))
                    durable(out)  # one flush shared with the other workers finishing now
                finally:
                    os.close(out)
                target = self._link_free(month, tmp, stem)
                os.unlink(tmp, dir_fd=month.fd)
                durable(month.fd)
        return target

    def compress(self, older_than_days: int = 7, *, now: Optional[datetime] = None) -> dict[str, list[str]]:
        """Fold raw sessions older than N days into their monthly archive, then drop old months."""
        now = now or datetime.now().astimezone()
        cutoff = (now - timedelta(days=older_than_days)).strftime("%Y-%m-%d")
        compressed: list[str] = []
        with self._locked():
            self._remove_temps()
            by_month: dict[str, list[Path]] = {}
            for raw in self._raw_files():
                if raw.name[:10] < cutoff:
                    by_month.setdefault(raw.name[:7], []).append(raw)
            for month, raws in sorted(by_month.items()):
                compressed += self._fold_month(month, raws)
            dropped = self._drop_old_months(now)
        return {"compressed": compressed, "months_dropped": dropped}

    def _fold_month(self, month: str, raws: list[Path]) -> list[str]:
        path = self.dir / f"{month}.jsonl.gz"
        records = self._read_month(path)
        known = {record["source"] for record in records}
        added = [compact_session(raw) for raw in raws if raw.name not in known]
        if added:
            records += added
            records.sort(key=lambda record: (record["date"], record["source"]))
            _write_lines(path, [json.dumps(record, ensure_ascii=False) for record in records], gz=True)
        faults.point("archive.after_month_write")
        for raw in raws:
            raw.unlink()
            faults.point("archive.after_raw_unlink")
        with contextlib.suppress(OSError):  # the month's raw directory, once empty
            raws[0].parent.rmdir()
        return [str(record["source"]) for record in added]

    def _drop_old_months(self, now: datetime) -> list[str]:
        first_kept = _month_minus(now.strftime("%Y-%m"), self.keep_months - 1)
        old = [p for p in self._month_files() if p.name[:7] < first_kept]
        if not old:
            return []
        summary_path = self.dir / "summary.jsonl"
        summaries = _summaries(summary_path)
        done = {entry["month"] for entry in summaries}
        for path in old:
            month = path.name[:7]
            if month not in done:
                records = self._read_month(path)
                summaries.append({
                    "month": month, "state": "summarized", "sessions": len(records),
                    "task_ids": sorted({r["task_id"] for r in records})[:200],
                })
        _write_lines(summary_path, [json.dumps(entry, ensure_ascii=False) for entry in summaries], gz=False)
        faults.point("archive.after_summary_write")
        for path in old:
            path.unlink()
        return [path.name[:7] for path in old]

    # ---- reading -------------------------------------------------------------------------------

    def search(self, date: Optional[str] = None, task_id: Optional[str] = None,
               text: Optional[str] = None) -> list[JSONObject]:
        """Sessions matching every given filter: date "YYYY-MM-DD" or "YYYY-MM", exact task id,
        case-insensitive text in the user lines, step summaries or final answer."""
        if date is not None and not (DAY.match(date) or MONTH.match(date)):
            raise ValueError(f"date {date!r}: expected YYYY-MM-DD or YYYY-MM")
        needle = text.lower() if text else None
        found: list[JSONObject] = []
        if not self.dir.is_dir():
            return found
        with self._locked(shared=True):
            candidates = [r for p in self._month_files() if _month_matches(p.name[:7], date)
                          for r in self._read_month(p)]
            folded = {record["source"] for record in candidates}  # a crash can leave both copies
            candidates += [compact_session(p, state="raw") for p in self._raw_files()
                           if _month_matches(p.name[:7], date) and p.name not in folded]
            summaries = _summaries(self.dir / "summary.jsonl")
        for record in candidates:
            if date and not record["date"].startswith(date):
                continue
            if task_id is not None and record["task_id"] != task_id:
                continue
            if needle and needle not in _searchable(record):
                continue
            found.append(record)
        for entry in summaries:  # dropped months: only their task ids are left
            if needle or not _month_matches(entry["month"], date):
                continue
            if task_id is not None and task_id not in entry["task_ids"]:
                continue
            found.append(entry)
        return sorted(found, key=lambda r: (r.get("date", r.get("month", "")), r.get("task_id", "")))

    def status(self) -> ArchiveStatus:
        """Counts for display: raw sessions, months archived, months summarized."""
        if not self.dir.is_dir():
            return {"raw_sessions": 0, "months": {}, "summarized_months": []}
        with self._locked(shared=True):
            months = {p.name[:7]: len(self._read_month(p)) for p in self._month_files()}
            return {
                "raw_sessions": len(list(self._raw_files())),
                "months": months,
                "summarized_months": [e["month"] for e in _summaries(self.dir / "summary.jsonl")],
            }

    # ---- plumbing ------------------------------------------------------------------------------

    def _locked(self, shared: bool = False) -> ContextManager[None]:
        self.dir.mkdir(parents=True, exist_ok=True)
        return flocked(self.dir / ".lock", shared)

    def _raw_files(self) -> Iterator[Path]:
        if self.raw_dir.is_dir():
            for month_dir in sorted(self.raw_dir.iterdir()):
                yield from sorted(p for p in month_dir.glob("*.jsonl*") if TEMP_MARK not in p.name)

    def _month_files(self) -> list[Path]:
        return sorted(p for p in self.dir.glob("????-??.jsonl.gz"))

    def _read_month(self, path: Path) -> list[JSONObject]:
        """A month's session records as the archive holds them (written by this ga or an older one)."""
        if not path.exists():
            return []
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]

    def _remove_temps(self) -> None:
        """Temps are only ever written under the exclusive lock, so any seen here are orphans."""
        for tmp in list(self.dir.glob(f"*{TEMP_MARK}*")) + list(self.raw_dir.glob(f"*/*{TEMP_MARK}*")):
            tmp.unlink(missing_ok=True)

    @staticmethod
    def _link_free(month: Folder, source: str, stem: str) -> Path:
        """Link `source` as <stem>.jsonl, or <stem>~N.jsonl with the first free N: an archived session is never
        overwritten, also when two workers archive the same task at once."""
        n = 1
        while True:
            name = f"{stem}.jsonl" if n == 1 else f"{stem}~{n}.jsonl"
            try:
                os.link(source, name, src_dir_fd=month.fd, dst_dir_fd=month.fd)
                return month.path / name
            except FileExistsError:
                n += 1


# ---- compaction of one session --------------------------------------------------------------


def compact_session(raw: Path, *, state: str = "compressed") -> dict[str, object]:
    """The compact record of a raw history: user lines, one line per agent turn, final answer."""
    stem = raw.name.split(".jsonl")[0]
    task_part = stem[11:].split("~")[0]
    users: list[str] = []
    seen_users: set[str] = set()
    steps: list[str] = []
    final = ""
    turns = 0
    for entry in _read_jsonl(raw, tolerant=True):
        turns += 1
        messages = list(_messages(entry))
        for message in messages:
            if message.get("role") == "user":
                line = _user_line(message.get("content"))
                if line and line not in seen_users:
                    seen_users.add(line)
                    users.append(line)
        replies = [m for m in messages if m.get("role") == "assistant"]
        if replies:
            step, answer = _agent_line(replies[-1])  # the reply received this turn is the last one
            steps.append(f"{turns}: {step}")
            final = answer or final
    return {
        "source": raw.name, "task_id": unquote(task_part), "date": stem[:10], "state": state,
        "turns": turns, "user": users, "steps": steps, "final": final,
    }


def _messages(node: object) -> Iterator[dict[str, object]]:
    """Every OpenAI-style message inside a history entry, in order, wherever it is nested."""
    if isinstance(node, dict):
        if isinstance(node.get("role"), str):
            yield node
            return
        for value in node.values():
            yield from _messages(value)
    elif isinstance(node, list):
        for value in node:
            yield from _messages(value)


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _user_line(content: object) -> str:
    return _one_line(ANCHOR_TAGS.sub("", _text(content)), USER_CHARS)


def _agent_line(message: dict[str, object]) -> tuple[str, str]:
    """(one-line summary, final answer if this turn answered without calling a tool)."""
    content = _text(message.get("content"))
    listed = message.get("tool_calls")
    calls = [_call_line(c.get("function", c)) for c in listed if isinstance(c, dict)] if isinstance(listed, list) else []
    for block in TEXT_TOOL_USE.findall(content):
        with contextlib.suppress(ValueError, AttributeError):
            calls.append(_call_line(json.loads(block)))
    if calls:
        return _one_line("; ".join(calls), LINE_CHARS), ""
    answer = content.strip()
    return _one_line(f"answer: {answer}", LINE_CHARS), answer


def _call_line(call: dict[str, object]) -> str:
    args: object = call.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return f"{call.get('name', '?')}({_one_line(args, ARG_CHARS)})"
    if not isinstance(args, dict):
        args = {"": args}
    shown = ", ".join(f"{k}={_one_line(str(v), ARG_CHARS)}" if k else _one_line(str(v), ARG_CHARS)
                      for k, v in args.items())
    return f"{call.get('name', '?')}({shown})"


def _read_jsonl(path: Path, *, tolerant: bool = False) -> list[object]:
    if not path.exists():
        return []
    entries: list[object] = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                entries.append(json.loads(line))
            except ValueError:
                if not tolerant:  # our own files are written atomically: a bad line is corruption
                    raise
    return entries


def _summaries(path: Path) -> list[JSONObject]:
    """The entries of summary.jsonl (dropped months), as written."""
    return [entry for entry in _read_jsonl(path) if isinstance(entry, dict)]


def _searchable(record: JSONObject) -> str:
    return "\n".join([*record.get("user", []), *record.get("steps", []), record.get("final", "")]).lower()


def _month_matches(month: str, date: Optional[str]) -> bool:
    return date is None or date[:7] == month


def _month_minus(month: str, n: int) -> str:
    year, mon = int(month[:4]), int(month[5:7])
    index = year * 12 + (mon - 1) - n
    return f"{index // 12:04d}-{index % 12 + 1:02d}"
