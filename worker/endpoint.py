"""Is a model endpoint there at all? One `GET BASE/models` before work starts (fan-out pre-flight, `ga run`),
so a dead endpoint is one line at once instead of a request retried for ~16 s (worker/model/client.py backs off on
connection errors, as it should in the middle of a task). Any HTTP reply counts: the key and the path are
the run's business."""
from __future__ import annotations

import urllib.error
import urllib.request
from typing import Optional

PROBE_SECONDS = 5.0


def probe(base: str, timeout: float = PROBE_SECONDS) -> Optional[str]:
    """None when `GET base/models` gets any HTTP reply; else why not (one line). ValueError: not a URL."""
    request = urllib.request.Request(base.rstrip("/") + "/models", method="GET")
    try:
        with urllib.request.urlopen(request, timeout=timeout):  # noqa: S310 (the user's own endpoint)
            return None
    except urllib.error.HTTPError:
        return None  # it answered (401, 404, ...): reachable
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        return " ".join(str(reason).split())[:160] or type(exc).__name__


def unreachable(name: Optional[str], base: str, reason: str) -> str:
    return (f"model {name or '(default)'}: endpoint {base} does not answer ({reason}); start it or fix base_url, "
            "or pass --no-preflight to skip this check (nothing was started)")


def invalid_url(name: Optional[str], base: str, exc: Exception) -> str:
    return f"model {name or '(default)'}: base_url {base!r} is not a valid URL ({exc}); fix it in models.yaml or the scripted@URL"
