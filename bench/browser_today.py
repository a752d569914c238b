"""The browser as ga started it before issue 30, kept for the benchmarks' baseline: Chromium outside any sandbox,
with a TCP DevTools port read back from DevToolsActivePort in its profile, joined over CDP (as worker/web/browser.py
did at 12d7bd2, less the node-wide sharing). It serves a WebSession like the task's own browser does.

Never use it for anything but a measurement: it is the launch path the attack tests break.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Optional

from playwright.async_api import Browser

from worker.web.browser import driver, quietly

FLAGS = [  # worker/web/chromium.py's CLOSED_NETWORK_FLAGS at 12d7bd2
    "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic",
    "--disable-breakpad", "--disable-domain-reliability", "--disable-client-side-phishing-detection",
    "--disable-default-apps", "--disable-extensions",
    "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication,"
    "CertificateTransparencyComponentUpdater",
    "--metrics-recording-only", "--password-store=basic", "--use-mock-keychain", "--mute-audio", "--hide-scrollbars",
    "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "--no-startup-window"]


class TodaysBrowser:
    external = False

    def __init__(self, binary: Path) -> None:
        self.binary = binary
        self.browser: Optional[Browser] = None
        self.proc: Optional[subprocess.Popen] = None
        self.profile: Optional[Path] = None
        self.launches = 0

    async def connect(self) -> Browser:
        if self.browser is not None and self.browser.is_connected():
            return self.browser
        self.profile = Path(tempfile.mkdtemp(prefix="bench-today-profile-"))
        self.proc = subprocess.Popen([str(self.binary), "--headless", *FLAGS, f"--user-data-dir={self.profile}"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.is_file() and port_file.read_text().count("\n") >= 1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.binary} gave no DevTools port")
            await asyncio.sleep(0.02)  # the old launcher's poll
        port, path = port_file.read_text().split("\n")[:2]
        self.browser = await (await driver()).chromium.connect_over_cdp(f"ws://127.0.0.1:{int(port)}{path}",
                                                                         timeout=20000)
        self.launches += 1
        return self.browser

    async def close(self) -> None:
        if self.browser is not None:
            await quietly(self.browser.close())
        self.browser = None

    def stop(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self.profile is not None:
            shutil.rmtree(self.profile, ignore_errors=True)

    def kill(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def processes(self) -> list[int]:
        if self.proc is None:
            return []
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                except (OSError, IndexError):
                    continue
                if int(fields[2]) == self.proc.pid and fields[0] not in ("Z", "X"):  # its process group
                    found.append(int(entry.name))
        return found
