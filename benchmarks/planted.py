"""Planted slowdowns for any workload, so the gate's trust can be measured on a real decoder too.

The toy workload has `planted_sync` and `planted_sleep` built in; a real decoder (the reference
Ling model) should not carry test switches in the product. `with_plants(workload)` wraps it and adds
the two, leaving every other switch and attribute to the wrapped workload:
  * `planted_sync`: after each step, one extra blocking read of a device value (`.item()` of a
    one-element tensor touched on the current stream), so the host waits for the step's GPU work
    exactly as a stray `.item()` in a serving loop would.
  * `planted_sleep`: the host busy-waits `set_planted_sleep_ns(ns)` before each step (`time.sleep` is
    too coarse for tens of microseconds).
"""

from __future__ import annotations

import time
from typing import Any

from bubblescope.workload import SwitchInfo

PLANTED = (
    SwitchInfo("planted_sync", "(test) one extra .item() per step", "nothing: it adds a sync"),
    SwitchInfo("planted_sleep", "(test) stall the host before each step", "nothing: it adds host time"),
)
PLANTED_NAMES = frozenset(info.name for info in PLANTED)


class PlantedWorkload:
    """`inner` plus the two planted switches; everything else is delegated to `inner`."""

    def __init__(self, inner: Any) -> None:
        import torch

        self._inner = inner
        self._enabled: frozenset[str] = frozenset()
        self._sleep_ns = 0
        # A device scalar: reading it after the step's launches waits for all of them.
        self._probe = torch.zeros(1, device=str(getattr(inner, "device", "cpu")))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def switches(self) -> list[SwitchInfo]:
        return [*self._inner.switches(), *PLANTED]

    def prepare(self, enabled: frozenset[str]) -> None:
        self._inner.prepare(frozenset(enabled) - PLANTED_NAMES)
        self._enabled = frozenset(enabled) & PLANTED_NAMES

    def set_planted_sleep_ns(self, sleep_ns: int) -> None:
        self._sleep_ns = max(0, int(sleep_ns))

    def step(self) -> int:
        if "planted_sleep" in self._enabled and self._sleep_ns:
            deadline_ns = time.perf_counter_ns() + self._sleep_ns
            while time.perf_counter_ns() < deadline_ns:
                pass
        emitted = self._inner.step()
        if "planted_sync" in self._enabled:
            _ = float(self._probe.add_(1.0).item())  # the extra blocking read the gate must catch
        return emitted

    def bytes_per_token(self, enabled: frozenset[str]) -> int:
        return self._inner.bytes_per_token(frozenset(enabled) - PLANTED_NAMES)


def with_plants(workload: Any) -> Any:
    """The workload itself when it already has both planted switches, else a PlantedWorkload."""
    names = {info.name for info in workload.switches()}
    has_sleep = callable(getattr(workload, "set_planted_sleep_ns", None))
    return workload if PLANTED_NAMES <= names and has_sleep else PlantedWorkload(workload)
