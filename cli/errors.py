"""Which exceptions a user can cause (a bad file, path, URL or disk), and their one-line description.

`ga`'s command line turns these into `error: ...` and exit 2 in one place (cli.root._UserErrors); anything
else is a bug and keeps its traceback. GA_TRACEBACK=1 shows the traceback for these too.
"""
from __future__ import annotations

import errno
from typing import Optional

HINTS = {
    errno.ENOSPC: "the disk is full; free some space and run again",
    errno.EDQUOT: "the disk quota is used up; free some space and run again",
    errno.EFBIG: "the file grew past the size this process may write; raise the limit or free space",
    errno.EACCES: "permission denied; fix the permissions or choose another path (GA_HOME, --out, fanout.runs_dir)",
    errno.EPERM: "not permitted; fix the permissions or choose another path (GA_HOME, --out, fanout.runs_dir)",
    errno.EROFS: "the file system is read-only; choose a writable path (GA_HOME, --out, fanout.runs_dir)",
    errno.ENOTDIR: "a part of the path is a file, not a directory; check GA_HOME, --out and fanout.runs_dir",
    errno.EISDIR: "this is a directory; give a file",
    errno.ENOENT: "no such file or directory; check the path",
    errno.ENAMETOOLONG: "the path is too long; use a shorter one",
    errno.ELOOP: "too many symbolic links; check the path",
    errno.EMFILE: "too many open files; raise `ulimit -n`",
}


def describe_user_error(exc: BaseException) -> Optional[str]:
    """One line (or one per problem for our own multi-problem errors) if `exc` is user-caused, else None."""
    if isinstance(exc, OSError):
        where = " -> ".join(str(name) for name in (exc.filename, exc.filename2) if name is not None)
        reason = exc.strerror or str(exc) or type(exc).__name__
        hint = HINTS.get(exc.errno or 0, "check the path and try again")
        return f"{where + ': ' if where else ''}{reason}; {hint}"
    if isinstance(exc, UnicodeDecodeError):
        return (f"input is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                "save the file as UTF-8")
    if isinstance(exc, RecursionError):
        return "the input is nested too deeply to read; flatten it"
    if type(exc).__name__ == "InvalidURL":  # httpx: a bad --model scripted@URL or base_url
        return f"invalid URL ({exc}); fix --model scripted@URL or base_url in models.yaml"
    if isinstance(exc, ValueError):
        text = "\n".join(" ".join(line.split()) for line in str(exc).splitlines() if line.strip())
        return text or type(exc).__name__
    return None
