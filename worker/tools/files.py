"""file_read, file_patch, file_write: the workdir on disk, `memory/...` through the MemoryView."""
from __future__ import annotations

import difflib
import io
import os
from collections import deque
from pathlib import Path
from typing import BinaryIO, Iterable, Literal, Optional

from pydantic import BaseModel, Field

from memory_shared import fsutil
from worker.context import cut_head_tail, output_cap
from worker.paths import PathError, memory_rel, open_checked, open_plain, plain_rel, resolve_read, resolve_write
from worker.textpatch import patch_exact
from worker.tools.base import ToolContext, optional_str, tool
from worker.types import ToolResult

MAX_SUGGESTIONS = 5
SCAN_LIMIT = 3000  # files looked at when suggesting close names
LISTING_LIMIT = 200


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

@tool("file_read", "Read a file as numbered lines 'N|text'. keyword: show the lines around its first"
      " match (any case) from start on. memory/... is the memory tier.", FileReadArgs, answer_evidence=False)
def file_read(ctx: ToolContext, args: FileReadArgs) -> ToolResult:
    try:
        rel = memory_rel(args.path)
        if rel is not None:
            return _read_memory(ctx, rel, args)
        w = ctx.settings.worker
        path = resolve_read(args.path, ctx.workdir, w.allow_read, w.allow_write)
        if path.is_dir():
            names = sorted(p.name + ("/" if p.is_dir() else "") for p in path.iterdir())
            return ToolResult(_listing(args.path, names))
        if not path.is_file():
            return _error(_missing(args.path, _nearby_files(ctx.workdir.resolve(), path)))
        with os.fdopen(open_checked(path, ctx.workdir, [*w.allow_read, *w.allow_write]), "rb") as raw:
            if b"\0" in raw.read(8192):
                return _error(f"{args.path}: binary file ({os.fstat(raw.fileno()).st_size} bytes); inspect it with code_run")
            raw.seek(0)
            with io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="\n") as handle:
                return ToolResult(_render(args, handle, ctx))
    except (ValueError, OSError) as exc:
        return _failure(args.path, exc)


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
    return ToolResult(_render(args, io.StringIO(text), ctx), evidence=False)


def _render(args: FileReadArgs, lines: Iterable[str], ctx: ToolContext) -> str:
    """One pass: the page from start, or the window around the keyword's first match; total line count."""
    caps = ctx.settings.context.caps
    start, count = max(1, args.start), max(1, args.count)
    needle = args.keyword.lower() if args.keyword else None
    page: list[tuple[int, str]] = []
    before: deque[tuple[int, str]] = deque(maxlen=count // 3)
    window: list[tuple[int, str]] = []
    matches: list[int] = []
    total = 0
    for total, raw in enumerate(lines, 1):
        if total < start:
            continue
        line = raw.rstrip("\r\n")
        if len(page) < count:
            page.append((total, _cut_line(line, caps.file_read_line)))
        if needle is None:
            continue
        if needle in line.lower():
            matches.append(total)
        if not matches:
            before.append((total, _cut_line(line, caps.file_read_line)))
        elif len(before) + len(window) < count:
            window.append((total, _cut_line(line, caps.file_read_line)))
    shown, note = page, ""
    if needle is not None and matches:
        shown = [*before, *window]
        listed = ", ".join(map(str, matches[:20])) + (", ..." if len(matches) > 20 else "")
        note = f"; '{args.keyword}' on line{'s' if len(matches) > 1 else ''} {listed}"
    elif needle is not None:
        note = f"; '{args.keyword}' not found from line {start}"
    if not shown:
        span = f"; nothing from line {start}"
    elif shown[0][0] > 1 or shown[-1][0] < total:
        span = f"; showing {shown[0][0]}-{shown[-1][0]}"
    else:
        span = ""
    body = "\n".join(f"{i}|{line}" for i, line in shown)
    limit = output_cap(ctx.settings.context, "file_read", ctx.calls_in_turn)
    return cut_head_tail(f"[{args.path}: {total} lines{span}{note}]\n{body}", limit)


def _cut_line(line: str, cap: int) -> str:
    return line if len(line) <= cap else f"{line[:cap]} ...[+{len(line) - cap} chars]"


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

@tool("file_patch", "Replace old_content (exact text from file_read, no line numbers; must occur once)"
      " with new_content.", FilePatchArgs, answer_evidence=False)
def file_patch(ctx: ToolContext, args: FilePatchArgs) -> ToolResult:
    try:
        rel = memory_rel(args.path)
        if rel is not None:
            if ctx.memory is None:
                return _no_memory(args.path)
            ctx.memory.stage_patch(rel, args.old_content, args.new_content, **_staging(ctx))
            return ToolResult(f"staged patch of {args.path} (committed if the task succeeds)", evidence=False)
        path = resolve_write(args.path, ctx.workdir, ctx.settings.worker.allow_write)
        if not path.is_file():
            return _error(f"{args.path}: no such file; create it with file_write")
        allowed = ctx.settings.worker.allow_write
        with os.fdopen(open_checked(path, ctx.workdir, allowed), "rb") as handle:
            text = _read_text_strict(handle)
        updated, old_s, new_s = patch_exact(text, args.old_content, args.new_content)
        with os.fdopen(open_checked(path, ctx.workdir, allowed, os.O_WRONLY | os.O_TRUNC), "wb") as handle:
            handle.write(updated.encode("utf-8"))
    except (ValueError, OSError) as exc:  # PathError and PatchError are ValueErrors
        return _failure(args.path, exc)
    line = text[:text.find(old_s)].count("\n") + 1
    return ToolResult(f"patched {_display(path, ctx)} at line {line}"
                      f" ({old_s.count(chr(10)) + 1} lines -> {new_s.count(chr(10)) + 1})")


def _no_memory(path: str) -> ToolResult:
    return _error(f"{path}: this task has no memory tier")


def _staging(ctx: ToolContext) -> dict:
    """Where the loop is in the session: the gate orders staged changes against executions by it."""
    return {"seq": ctx.seq, "call_id": ctx.call_id}


def _read_text_strict(handle: BinaryIO) -> str:
    try:
        return handle.read().decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text; edit it with code_run") from None


# ---- file_write

@tool("file_write", "Create or overwrite a file, or append/prepend content. Prefer file_patch for edits.", FileWriteArgs,
      answer_evidence=False)
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
        fd = open_plain(ctx.workdir_fd(), rel, flags) if rel is not None else None
        if fd is not None:
            shown = rel
        else:
            path = resolve_write(args.path, ctx.workdir, ctx.settings.worker.allow_write)
            if path.is_dir():
                return _error(f"{args.path}: is a directory; give a file name")
            allowed = ctx.settings.worker.allow_write
            if args.mode == "prepend" and path.is_file():
                with os.fdopen(open_checked(path, ctx.workdir, allowed), "rb") as old:
                    data += old.read()
            fd = open_checked(path, ctx.workdir, allowed, flags, make_parents=True)
            shown = _display(path, ctx)
        try:
            fsutil.write_all(fd, data)
            size = len(data) if args.mode == "overwrite" else os.fstat(fd).st_size
        finally:
            os.close(fd)
    except (ValueError, OSError) as exc:
        return _failure(args.path, exc)
    return ToolResult(f"wrote {len(args.content)} chars to {shown} ({args.mode}); file is now {size} bytes")
