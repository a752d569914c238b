"""Load a user's Python file (a reflect trigger, an idle trigger) as a fresh module, errors as one line."""
from __future__ import annotations

import itertools
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Optional

_loads = itertools.count()


class PyFileError(ValueError):
    """A user's Python file that cannot be used; str() is one line naming the file, the line and the fix."""


def load_python_file(path: Path, what: str, required: Optional[dict[str, str]] = None) -> ModuleType:
    """Execute `path` as a new module (never cached: each call sees the file as it is now).

    `required` maps a callable's name to how to define it, for the error message."""
    path = Path(path)
    if not path.is_file():
        raise PyFileError(f"{path}: no such {what} file; give the path of a .py file")
    try:
        source = path.read_text(encoding="utf-8")
        code = compile(source, str(path), "exec")
    except SyntaxError as exc:
        raise PyFileError(f"{path}:{exc.lineno or 1}: syntax error in the {what}: {exc.msg}; "
                          "fix the Python at that line") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PyFileError(f"{path}: cannot read the {what} ({exc}); check the file") from None
    module = ModuleType(f"ga_{what.replace(' ', '_')}_{path.stem}_{next(_loads)}")
    module.__file__ = str(path)
    sys.path.insert(0, str(path.parent.resolve()))  # the file may import its neighbours
    try:
        exec(code, module.__dict__)
    except Exception as exc:
        line = _line_in(exc, path)
        raise PyFileError(f"{path}:{line}: the {what} raised {type(exc).__name__} while loading: {exc}; "
                          "fix the file so it imports cleanly") from None
    finally:
        sys.path.remove(str(path.parent.resolve()))
    for name, how in (required or {}).items():
        if not callable(getattr(module, name, None)):
            raise PyFileError(f"{path}: the {what} has no {name}() function; add `{how}`")
    return module


def _line_in(exc: BaseException, path: Path) -> int:
    frames = [frame for frame in traceback.extract_tb(exc.__traceback__) if frame.filename == str(path)]
    return frames[-1].lineno or 1 if frames else 1

