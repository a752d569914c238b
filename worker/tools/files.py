"""file_read, file_patch, file_write: the workdir on disk, `memory/...` through the MemoryView."""
from __future__ import annotations

import difflib
import os
from collections import deque
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Literal, Optional

from pydantic import BaseModel, Field

from memory_shared import fsutil
from worker.context import cut_head_tail, output_cap
from worker.paths import PathError, memory_rel, open_checked, open_plain, plain_rel
from worker.textpatch import patch_exact
from worker.textscan import CappedText, Line, LineScan
from worker.tools.base import FunctionTool, ToolContext, ToolState, optional_str
from worker.types import ToolResult

MAX_SUGGESTIONS = 5
SCAN_LIMIT = 3000  # files looked at when suggesting close names
LISTING_LIMIT = 200
MATCHES_LISTED = 20  # keyword matches named in file_read's header line
READ_SCAN_BYTES = 64 << 20  # file_read reads at most this much of a file (its header says when it stopped)
PATCH_MAX_BYTES = 16 << 20  # file_patch (and file_write's prepend) edit files up to this size


class FileReadArgs(BaseModel):
    path: str
    start: int = 1
    count: int = 200
    keyword: Optional[str] = Field(None, json_schema_extra=optional_str)


class FilePatchArgs(BaseModel):
    path: str
    old_content: str
    new_content: str


class FileWriteArgs(BaseModel):
    path: str
    content: str
    mode: Literal["overwrite", "append", "prepend"] = "overwrite"


class OpenWorkdir(ToolState):
    """The task's directory, opened once per task: file_write walks below it from this handle, no link followed."""

    def __init__(self, ctx: ToolContext) -> None:
        super().__init__(ctx)
        self.folder = fsutil.Folder(ctx.workdir)
        self.fd = self.folder.fd

    def close(self) -> None:
        self.folder.close()


def _error(message: str) -> ToolResult:
    return ToolResult(message, ok=False, evidence=False)


def _failure(path: str, exc: Exception) -> ToolResult:
    """One line naming the path: PathError already does; OS errors give their plain reason."""
    if isinstance(exc, PathError):
        return _error(str(exc))
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return _error(f"{path}: {reason}")


def _display(path: Path, ctx: ToolContext) -> str:
    try:
        return path.relative_to(ctx.workdir.resolve()).as_posix()
    except ValueError:
        return str(path)


# ---- file_read

def file_read(ctx: ToolContext, args: FileReadArgs) -> ToolResult:
    try:
        rel = memory_rel(args.path)
        if rel is not None:
            return _read_memory(ctx, rel, args)
        rules = ctx.policy
        path = rules.check_read(args.path)
        if path.is_dir():
            names = sorted(p.name + ("/" if p.is_dir() else "") for p in path.iterdir())
            return ToolResult(_listing(args.path, names))
        if not path.is_file():
            return _error(_missing(args.path, _nearby_files(ctx.workdir.resolve(), path)))
        with os.fdopen(open_checked(path, rules.workdir, [*rules.writable[1:], *rules.readable]), "rb") as raw:
            if b"\0" in raw.read(8192):
                return _error(f"{args.path}: binary file ({os.fstat(raw.fileno()).st_size} bytes); inspect it with code_run")
            raw.seek(0)
            text = CappedText(raw, READ_SCAN_BYTES)
            return ToolResult(_render(args, text, ctx, lambda: _cut_note(text, os.fstat(raw.fileno()).st_size)))
    except (ValueError, OSError) as exc:
        return _failure(args.path, exc)


FILE_READ = FunctionTool("file_read", "Read a file as numbered lines 'N|text'. keyword: show the lines around its first"
                         " match (any case) from start on. memory/... is the memory tier.", FileReadArgs, file_read,
                         answer_evidence=False)


def _cut_note(text: CappedText, size: int) -> str:
    if not text.cut:
        return ""
    return (f"; read the first {READ_SCAN_BYTES >> 20} MiB of {size} bytes (file_read's limit): use start/keyword "
            "within them, or code_run (grep, sed -n) for the rest")


def _read_memory(ctx: ToolContext, rel: str, args: FileReadArgs) -> ToolResult:
    view = ctx.memory
    if view is None:
        return _error(f"{args.path}: this task has no memory tier")
    text = view.read(rel) if rel else None
    if text is None:
        prefix = rel.rstrip("/")
        inside = view.list(prefix)
        if inside:  # a directory of the memory tier: show what is in it
            depth = len(prefix.split("/")) if prefix else 0
            names = sorted({"/".join(p.split("/")[depth:depth + 1]) + ("/" if p.count("/") > depth else "")
                            for p in inside})
            return ToolResult(_listing(args.path, names), evidence=False)
        return _error(_missing(args.path, ["memory/" + p for p in view.list("")]))
    # Reading memory verifies nothing about the world, so it is no evidence for the gate.
    return ToolResult(_render(args, [text], ctx), evidence=False)


def _render(args: FileReadArgs, chunks: Iterable[str], ctx: ToolContext,
            cut_note: Callable[[], str] = lambda: "") -> str:
    """One pass: the page from start, or the window around the keyword's first match; the total line count
    (counted without building lines once nothing more can be shown)."""
    caps = ctx.settings.context.caps
    start, count = max(1, args.start), max(1, args.count)
    scan = LineScan(chunks, caps.file_read_line, args.keyword)
    page: list[tuple[int, str]] = []
    before: deque[tuple[int, str]] = deque(maxlen=count // 3)
    window: list[tuple[int, str]] = []
    matches: list[int] = []
    total = 0
    for line in scan.lines():
        total = line.number
        if total < start:
            continue
        shown = _cut_line(line, caps.file_read_line)
        if len(page) < count:
            page.append((total, shown))
        if scan.needle is None:
            if len(page) >= count:
                total += scan.count_rest()
                break
            continue
        if line.hit:
            matches.append(total)
        if not matches:
            before.append((total, shown))
        elif len(before) + len(window) < count:
            window.append((total, shown))
        elif len(matches) > MATCHES_LISTED:
            total += scan.count_rest()
            break
    shown_lines, note = page, ""
    if scan.needle is not None and matches:
        shown_lines = [*before, *window]
        listed = ", ".join(map(str, matches[:MATCHES_LISTED])) + (", ..." if len(matches) > MATCHES_LISTED else "")
        note = f"; '{args.keyword}' on line{'s' if len(matches) > 1 else ''} {listed}"
    elif scan.needle is not None:
        note = f"; '{args.keyword}' not found from line {start}"
    if not shown_lines:
        span = f"; nothing from line {start}"
    elif shown_lines[0][0] > 1 or shown_lines[-1][0] < total:
        span = f"; showing {shown_lines[0][0]}-{shown_lines[-1][0]}"
    else:
        span = ""
    body = "\n".join(f"{i}|{line}" for i, line in shown_lines)
    limit = output_cap(ctx.settings.context, "file_read", ctx.calls_in_turn)
    return cut_head_tail(f"[{args.path}: {total} lines{span}{note}{cut_note()}]\n{body}", limit)


def _cut_line(line: Line, cap: int) -> str:
    return line.head if line.length <= cap else f"{line.head} ...[+{line.length - cap} chars]"


def _listing(shown_as: str, names: list[str]) -> str:
    more = f"\n... {len(names) - LISTING_LIMIT} more" if len(names) > LISTING_LIMIT else ""
    return f"[{shown_as}: directory, {len(names)} entries]\n" + "\n".join(names[:LISTING_LIMIT]) + more


def _nearby_files(root: Path, wanted: Path) -> list[str]:
    """Files in the wanted path's nearest existing parent and the workdir, relative to the workdir."""
    parent = wanted.parent
    while not parent.is_dir() and parent != parent.parent:
        parent = parent.parent
    found: list[str] = []
    for base in dict.fromkeys([parent, root]):
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            depth = len(Path(dirpath).relative_to(base).parts)
            if depth >= 3:
                dirnames[:] = []
            found.extend(_display_rel(Path(dirpath) / f, root) for f in filenames)
            if len(found) >= SCAN_LIMIT:
                return list(dict.fromkeys(found))
    return list(dict.fromkeys(found))


def _display_rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _missing(asked: str, candidates: list[str]) -> str:
    want = asked.replace("\\", "/")
    while want.startswith("./"):
        want = want[2:]
    scored = sorted(((max(difflib.SequenceMatcher(None, want.lower(), c.lower()).ratio(),
                          difflib.SequenceMatcher(None, os.path.basename(want).lower(),
                                                  os.path.basename(c).lower()).ratio()), c)
                     for c in candidates), key=lambda sc: (-sc[0], sc[1]))
    close = [c for score, c in scored[:MAX_SUGGESTIONS] if score >= 0.5]
    hint = f"; closest: {', '.join(close)}" if close else "; no similar names nearby"
    return f"{asked}: no such file{hint}"


# ---- file_patch

def file_patch(ctx: ToolContext, args: FilePatchArgs) -> ToolResult:
    try:
        rel = memory_rel(args.path)
        if rel is not None:
            if ctx.memory is None:
                return _no_memory(args.path)
            ctx.memory.stage_patch(rel, args.old_content, args.new_content, **_staging(ctx))
            return ToolResult(f"staged patch of {args.path} (committed if the task succeeds)", evidence=False)
        rules = ctx.policy
        path = rules.check_write(args.path)
        if not path.is_file():
            return _error(f"{args.path}: no such file; create it with file_write")
        allowed = rules.writable[1:]
        with os.fdopen(open_checked(path, rules.workdir, allowed), "rb") as handle:
            text = _read_text_strict(handle)
        updated, old_s, new_s = patch_exact(text, args.old_content, args.new_content)
        with os.fdopen(open_checked(path, rules.workdir, allowed, os.O_WRONLY | os.O_TRUNC), "wb") as handle:
            handle.write(updated.encode("utf-8"))
    except (ValueError, OSError) as exc:  # PathError and PatchError are ValueErrors
        return _failure(args.path, exc)
    line = text[:text.find(old_s)].count("\n") + 1
    return ToolResult(f"patched {_display(path, ctx)} at line {line}"
                      f" ({old_s.count(chr(10)) + 1} lines -> {new_s.count(chr(10)) + 1})")


FILE_PATCH = FunctionTool("file_patch", "Replace old_content (exact text from file_read, no line numbers; must occur"
                          " once) with new_content.", FilePatchArgs, file_patch, answer_evidence=False)


def _no_memory(path: str) -> ToolResult:
    return _error(f"{path}: this task has no memory tier")


def _staging(ctx: ToolContext) -> dict:
    """Where the loop is in the session: the gate orders staged changes against executions by it."""
    return {"seq": ctx.seq, "call_id": ctx.call_id}


def _read_capped(handle: BinaryIO) -> bytes:
    """The whole file, refused past PATCH_MAX_BYTES (an edit holds the whole file in memory, twice)."""
    size = os.fstat(handle.fileno()).st_size
    data = handle.read(PATCH_MAX_BYTES + 1) if size <= PATCH_MAX_BYTES else b""
    if size > PATCH_MAX_BYTES or len(data) > PATCH_MAX_BYTES:
        raise ValueError(f"{max(size, len(data))} bytes, over the {PATCH_MAX_BYTES >> 20} MiB file_patch and "
                         "file_write's prepend edit; edit it with code_run (sed, python)")
    return data


def _read_text_strict(handle: BinaryIO) -> str:
    data = _read_capped(handle)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text; edit it with code_run") from None


# ---- file_write

def file_write(ctx: ToolContext, args: FileWriteArgs) -> ToolResult:
    try:
        rel = memory_rel(args.path)
        if rel is not None:
            if ctx.memory is None:
                return _no_memory(args.path)
            full = ctx.memory.stage_write(rel, args.content, args.mode, **_staging(ctx))
            return ToolResult(f"staged {args.mode} of {args.path}, now {len(full)} chars"
                              " (committed if the task succeeds)", evidence=False)
        flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if args.mode == "append" else os.O_TRUNC)
        data = args.content.encode("utf-8")
        rel = plain_rel(args.path) if args.mode != "prepend" else None
        rules = ctx.policy
        if rel is not None and (refusal := rules.write_refusal(rules.workdir / rel)):
            return _error(f"{args.path}: {refusal}")
        fd = open_plain(ctx.state(OpenWorkdir).fd, rel, flags) if rel is not None else None
        if fd is not None:
            shown = rel
        else:
            path = rules.check_write(args.path)
            if path.is_dir():
                return _error(f"{args.path}: is a directory; give a file name")
            allowed = rules.writable[1:]
            if args.mode == "prepend" and path.is_file():
                with os.fdopen(open_checked(path, rules.workdir, allowed), "rb") as old:
                    data += _read_capped(old)
            fd = open_checked(path, rules.workdir, allowed, flags, make_parents=True)
            shown = _display(path, ctx)
        try:
            fsutil.write_all(fd, data)
            size = len(data) if args.mode == "overwrite" else os.fstat(fd).st_size
        finally:
            os.close(fd)
    except (ValueError, OSError) as exc:
        return _failure(args.path, exc)
    return ToolResult(f"wrote {len(args.content)} chars to {shown} ({args.mode}); file is now {size} bytes")


FILE_WRITE = FunctionTool("file_write", "Create or overwrite a file, or append/prepend content. Prefer file_patch for"
                          " edits.", FileWriteArgs, file_write, answer_evidence=False)
