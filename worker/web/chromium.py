"""Which Chromium to run and with which flags (a closed network: nothing phones home; no DevTools port: Playwright
talks to it over a pipe, see worker/web/launch.py)."""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Optional

INSTALL_HINT = ("install one with `apt-get install chromium` (Debian/Ubuntu), or `playwright install chromium`"
                " where downloads work, or set GA_CHROMIUM / web.chromium to a Chromium binary")
ON_PATH = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

NOWHERE = "updates.invalid"  # a name no resolver answers (.invalid is reserved)
CLOSED_NETWORK_FLAGS = [
    "--no-sandbox",  # workers usually run as root in containers, where the sandbox cannot start
    "--disable-gpu",
    "--disable-dev-shm-usage",  # containers often have a tiny /dev/shm
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--disable-breakpad",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication,CertificateTransparencyComponentUpdater",
    "--metrics-recording-only",
    "--password-store=basic",
    "--use-mock-keychain",
    "--mute-audio",
    "--hide-scrollbars",
    # --disable-component-update leaves Chromium's update checks on: send them to a name that resolves nowhere
    f"--component-updater=url-source=http://{NOWHERE}/",
]
PROFILE = "/tmp/ga-profile"  # the profile inside the sandbox: its private /tmp, which no other sandbox sees


def proxy_flags(port: int) -> list[str]:
    """Every request through the egress proxy relayed to 127.0.0.1:`port`, loopback included (Chromium would
    send loopback direct, to the sandbox's own loopback; the proxy lets it out only when it is listed). The
    update checks go direct, and fail quietly: the sandbox has no other network (through the proxy, each would
    be logged as a refused host)."""
    return [f"--proxy-server=http://127.0.0.1:{port}", f"--proxy-bypass-list=<-loopback>;{NOWHERE}"]


class ChromiumMissing(RuntimeError):
    """No usable browser; str() is one line saying where we looked and how to get one."""


def find_chromium(configured: Optional[Path]) -> Path:
    """The browser to run: configured (web.chromium / GA_CHROMIUM), else Playwright's own, else one on PATH."""
    configured = configured or (Path(os.environ["GA_CHROMIUM"]) if os.environ.get("GA_CHROMIUM") else None)
    if configured:
        path = Path(configured).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ChromiumMissing(f"web.chromium (GA_CHROMIUM) is {path}, which is not an executable file;"
                                  f" point it at a Chromium binary or unset it; or {INSTALL_HINT}")
        return path
    found = _playwright_chromium() or next((Path(p) for p in map(shutil.which, ON_PATH) if p), None)
    if found is None:
        raise ChromiumMissing(f"no Chromium found (looked for Playwright's browser and {', '.join(ON_PATH)} on PATH);"
                              f" {INSTALL_HINT}")
    return found


def _playwright_chromium() -> Optional[Path]:
    """The newest browser `playwright install chromium` downloaded, if any."""
    root = Path(os.environ.get("PLAYWRIGHT_BROWSERS_PATH") or Path.home() / ".cache" / "ms-playwright")
    candidates = [*root.glob("chromium-*/chrome-linux*/chrome"), *root.glob("chromium-*/chrome-mac*/Chromium.app/Contents/MacOS/Chromium")]
    candidates = [c for c in candidates if c.is_file() and os.access(c, os.X_OK)]
    return max(candidates, key=lambda c: int(re.sub(r"\D", "", c.parts[len(root.parts)]) or 0), default=None)
