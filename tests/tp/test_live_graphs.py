"""Captured graphs are released before the process group is destroyed (pytorch#115388 hang)."""

from __future__ import annotations

import gc
import weakref

import pytest
from bubblescope.reference_model import live_graphs
from bubblescope.reference_model.tp import distributed


class FakeGraph:
    """Stands in for torch.cuda.CUDAGraph: records the order of reset() against the group's destroy."""

    def __init__(self, events: list[str], name: str) -> None:
        self.events = events
        self.name = name

    def reset(self) -> None:
        self.events.append(f"reset {self.name}")


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """A registry of this test's fakes only (a GPU run may hold real graphs from earlier tests)."""
    monkeypatch.setattr(live_graphs, "_live", weakref.WeakSet())


def test_release_all_resets_live_graphs_once_and_forgets_dropped_ones() -> None:
    events: list[str] = []
    kept = live_graphs.track(FakeGraph(events, "kept"))
    dropped = live_graphs.track(FakeGraph(events, "dropped"))
    del dropped
    gc.collect()
    assert live_graphs.release_all() == 1
    assert events == ["reset kept"]
    assert live_graphs.release_all() == 0, "a released graph is not reset twice"
    assert kept.name == "kept"


def test_shutdown_resets_graphs_before_destroying_the_group(monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    graph = live_graphs.track(FakeGraph(events, "decode step"))
    monkeypatch.setattr(distributed.dist, "is_initialized", lambda: True)
    monkeypatch.setattr(distributed.dist, "destroy_process_group", lambda: events.append("destroy"))
    distributed.shutdown()
    assert events == ["reset decode step", "destroy"]
    assert graph.name == "decode step"


def test_shutdown_after_an_error_waits_on_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Leaving on an error: no device sync, no graph reset, no destroy (a peer may never join)."""
    events: list[str] = []
    graph = live_graphs.track(FakeGraph(events, "decode step"))
    monkeypatch.setattr(distributed.dist, "is_initialized", lambda: True)
    monkeypatch.setattr(distributed.dist, "destroy_process_group", lambda: events.append("destroy"))
    distributed.shutdown(clean=False)
    assert events == []
    assert graph.name == "decode step"
