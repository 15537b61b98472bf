"""Host memory bandwidth (one large numpy copy), measured once per machine and cached with its date.

`bubblescope presets` judges what a CPU can decode by bytes per token / this bandwidth. Measuring
takes a second and varies between calls (263 vs 398 µs/step for the same preset in two calls on a
shared box), so the first measurement is kept in `$XDG_CACHE_HOME/bubblescope/host_bandwidth.json`
(`~/.cache/bubblescope/` without XDG_CACHE_HOME), keyed by host name and CPU model, and shown with the
date it was taken; `presets --remeasure` takes a new one. numpy only: no torch.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path

from bubblescope.files.atomic import write_json_atomic

CACHE_SCHEMA = "bubblescope.host_bandwidth/1"
CACHE_FILE_NAME = "host_bandwidth.json"
# Bytes copied (large enough to leave the caches, quick to copy).
HOST_COPY_BYTES = 256 << 20


@dataclass(frozen=True)
class HostBandwidth:
    """GB/s of one host copy (read + write), when it was measured (UTC, ISO 8601) and whether this call
    measured it ("measured") or read it from the cache ("cached")."""

    gbps: float
    measured_utc: str
    source: str


def cache_dir() -> Path:
    """bubblescope's per-user cache folder: $XDG_CACHE_HOME/bubblescope, else ~/.cache/bubblescope."""
    base = os.environ.get("XDG_CACHE_HOME") or ""
    # The XDG spec ignores a relative XDG_CACHE_HOME.
    root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    return root / "bubblescope"


def machine_key() -> str:
    """What makes a cached bandwidth this machine's: host name and CPU model."""
    return f"{platform.node()} / {_cpu_model()}"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def measure_host_copy_gbps(repeats: int = 3) -> float:
    """This machine's host memory bandwidth (GB/s, read + write of one large copy, best of `repeats`).

    A CPU decode step reads every active weight at least once, so bytes per token / this is a lower
    bound on its step time.
    """
    import numpy as np

    # [HOST_COPY_BYTES / 8] float64, copied into a second buffer: each copy reads one, writes the other.
    source = np.ones(HOST_COPY_BYTES // 8, dtype=np.float64)
    target = np.empty_like(source)
    best_s = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(target, source)
        best_s = min(best_s, time.perf_counter() - start)
    return 2 * HOST_COPY_BYTES / best_s / 1e9


def host_bandwidth(*, remeasure: bool = False) -> HostBandwidth:
    """The cached host bandwidth of this machine, or a new measurement (then cached) when there is none
    for this machine, the cache is unreadable, or `remeasure` is set. A cache that cannot be written
    (read-only home) leaves the measurement uncached: the next call measures again."""
    path = cache_dir() / CACHE_FILE_NAME
    machines = _read_cache(path)
    entry = machines.get(machine_key())
    if not remeasure and entry is not None and _valid(entry):
        return HostBandwidth(float(entry["gbps"]), str(entry["measured_utc"]), "cached")
    measured = HostBandwidth(
        measure_host_copy_gbps(),
        _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "measured",
    )
    machines[machine_key()] = {"gbps": measured.gbps, "measured_utc": measured.measured_utc}
    try:
        write_json_atomic(path, {"schema": CACHE_SCHEMA, "machines": machines})
    except OSError:
        pass
    return measured


def _read_cache(path: Path) -> dict[str, dict]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict) or doc.get("schema") != CACHE_SCHEMA:
        return {}
    machines = doc.get("machines")
    return dict(machines) if isinstance(machines, dict) else {}


def _valid(entry: object) -> bool:
    if not isinstance(entry, dict) or not isinstance(entry.get("measured_utc"), str):
        return False
    gbps = entry.get("gbps")
    return isinstance(gbps, (int, float)) and not isinstance(gbps, bool) and 0 < gbps < float("inf")
