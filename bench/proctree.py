"""Memory of a whole process tree, sampled from /proc (Linux), for the benchmarks.

    with TreeSampler(lambda: {proc.pid}) as tree:
        ...
    tree.peak_rss_mb, tree.hwm_sum_mb, tree.peak_pss_mb, tree.first_seen("ray::WorkerActor")

Every `every` seconds (default 50 ms) it lists the processes under the roots (by parent pid, plus every
process once seen in the tree: Ray's daemons outlive their parent for a moment) and adds up their
resident set (VmRSS). Reported:
  peak_rss_mb   the largest sum seen: shared pages (libraries, Ray's plasma store) count once per process
  hwm_sum_mb    the sum over all processes of each one's own peak (VmHWM): an upper bound of the above
  peak_pss_mb   the largest sum of proportional set sizes (shared pages divided among their users),
                read every `pss_every` seconds only (the kernel walks every mapping to compute it)
Process titles (Ray sets `ray::WorkerActor`, `ray::IDLE`, ...) are kept with the time each process first showed each.
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Optional

PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20


def _stat(pid: int) -> Optional[tuple[int, int, int, int]]:
    """(parent pid, start time in ticks, resident pages, CPU ticks user+system), or None when the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) ": state is field 3
    return int(fields[1]), int(fields[19]), int(fields[21]), int(fields[11]) + int(fields[12])


def _status_kb(pid: int, key: str) -> Optional[int]:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _pss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _title(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()[:160]


class TreeSampler:
    def __init__(self, roots: Callable[[], Iterable[int]], exclude: Callable[[], Iterable[int]] = lambda: (),
                 every: float = 0.05, pss_every: float = 1.0):
        self.roots, self.exclude, self.every, self.pss_every = roots, exclude, every, pss_every
        self.members: dict[tuple[int, int], dict] = {}  # (pid, start ticks) -> {"hwm_kb", "title"}
        self.peak_rss_mb = 0.0
        self.peak_pss_mb = 0.0
        self.peak_count = 0
        self.peak_threads = 0  # the largest sum of the tree's threads (Threads: in /proc/PID/status)
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> "TreeSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    @property
    def hwm_sum_mb(self) -> float:
        return sum(m["hwm_kb"] for m in self.members.values()) / 1024

    def first_seen(self, prefix: str) -> Optional[float]:
        times = self.seen_times(prefix)
        return times[0] if times else None

    def seen_times(self, part: str) -> list[float]:
        """When each process first showed a title containing `part`, in order (one time per process)."""
        return sorted(min(t for title, t in m["titles"].items() if part in title)
                      for m in self.members.values() if any(part in title for title in m["titles"]))

    @property
    def cpu_seconds(self) -> float:
        """User + system CPU of every process of the tree, as last sampled (a process's last 50 ms or less
        before it exited are not seen: a lower bound)."""
        return sum(m["ticks"] for m in self.members.values()) / os.sysconf("SC_CLK_TCK")

    def alive(self) -> int:
        """Processes of the tree still running (after the roots exited: what was left behind)."""
        return sum(1 for pid, start in self.members if (_stat(pid) or (0, -1, 0, 0))[1] == start)

    def _loop(self) -> None:
        next_pss = 0.0
        while not self._stop.is_set():
            self.sample(pss=time.monotonic() >= next_pss)
            if time.monotonic() >= next_pss:
                next_pss = time.monotonic() + self.pss_every
            self._stop.wait(self.every)
        self.sample(pss=False)

    def sample(self, pss: bool = False) -> None:
        stats = {}
        for name in os.listdir("/proc"):
            if name.isdigit():
                found = _stat(int(name))
                if found:
                    stats[int(name)] = found
        excluded = set(self.exclude())
        tree = {pid for pid in self.roots() if pid in stats} | {
            pid for pid, start in self.members if pid in stats and stats[pid][1] == start}
        grew = True
        while grew:  # descendants by parent pid
            children = {pid for pid, (ppid, *_) in stats.items() if ppid in tree and pid not in tree}
            grew = bool(children)
            tree |= children
        tree -= excluded
        total_pages, total_pss, threads = 0, 0, 0
        now = time.time()
        for pid in tree:
            _, start, pages, ticks = stats[pid]
            member = self.members.setdefault((pid, start), {"hwm_kb": 0, "titles": {}, "ticks": 0})
            member["ticks"] = max(member["ticks"], ticks)
            total_pages += pages
            threads += _status_kb(pid, "Threads:") or 0
            hwm = _status_kb(pid, "VmHWM:")
            if hwm:
                member["hwm_kb"] = max(member["hwm_kb"], hwm)
            title = _title(pid)
            if title and title not in member["titles"]:
                member["titles"][title] = now
            if pss:
                total_pss += _pss_kb(pid)
        self.samples += 1
        self.peak_rss_mb = max(self.peak_rss_mb, total_pages * PAGE_MB)
        self.peak_count = max(self.peak_count, len(tree))
        self.peak_threads = max(self.peak_threads, threads)
        if pss:
            self.peak_pss_mb = max(self.peak_pss_mb, total_pss / 1024)
