"""The detectors bubblescope runs, in dependency order (idle gaps need the host-blocking reads).

A new detector is one file in `detect/` and one entry here; `analysis/traces.py` runs them through this list.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bubblescope.detect.host_syncs import find_host_syncs
from bubblescope.detect.idle_gaps import find_idle_gaps_and_leads
from bubblescope.detect.plausibility import check_plausibility
from bubblescope.detect.stream_idle import stream_idle


@dataclass(frozen=True)
class Detector:
    """One detector: its name, what it finds, and its pure function."""

    name: str
    finds: str
    run: Callable[..., object]


DETECTORS: tuple[Detector, ...] = (
    Detector("plausibility", "traces whose GPU numbers would mislead", check_plausibility),
    Detector(
        "host_syncs", "host-blocking device reads with ATen op, Python site and fix hint", find_host_syncs
    ),
    Detector(
        "idle_gaps",
        "GPU idle gaps per device, classified sync/host/launch/dependency/outside, and each read's lost lead",
        find_idle_gaps_and_leads,
    ),
    Detector(
        "stream_idle", "HTA-compatible per-stream idle breakdown (host/kernel wait, other)", stream_idle
    ),
)


def detector(name: str) -> Detector:
    """The registered detector called `name` (KeyError for an unknown one)."""
    for entry in DETECTORS:
        if entry.name == name:
            return entry
    raise KeyError(name)
