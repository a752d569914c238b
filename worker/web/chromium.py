"""Which Chromium to run and with which flags (a closed network: nothing phones home)."""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Optional

INSTALL_HINT = ("install one with `apt-get install chromium` (Debian/Ubuntu), or `playwright install chromium`"
                " where downloads work, or set GA_CHROMIUM / web.chromium to a Chromium binary")
ON_PATH = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

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
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",  # the chosen port is read back from DevToolsActivePort in the profile
    "--no-startup-window",  # no default tab: every worker opens its own context
]


class ChromiumMissing(RuntimeError):
    """No usable browser; str() is one line saying where we looked and how to get one."""


def launch_args(binary: Path, profile: Path, headless: bool) -> list[str]:
    return [str(binary), *(["--headless"] if headless else []), *CLOSED_NETWORK_FLAGS,
            f"--user-data-dir={profile}"]


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
