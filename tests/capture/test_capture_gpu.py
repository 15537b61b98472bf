"""GPU capture: CUDA-event step timing, sync detection in the trace, graph replay (run on a CUDA machine)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bubblescope.capture.measure import RunSettings, measure_config
from bubblescope.examples.toy_workload import make_workload

pytestmark = pytest.mark.gpu

CONFIGS = {
    "base": (),
    "no_readback": ("no_readback",),
    "graph": ("no_readback", "graph_replay"),
    "planted": ("planted_sync",),
}


def test_gpu_run_records(tmp_path: Path) -> None:
    toy = make_workload("small", device="cuda")
    reads = {}
    for key, enabled in CONFIGS.items():
        record, _notices = measure_config(
            toy,
            frozenset(enabled),
            settings=RunSettings(steps=32, warmup=4, repeats=2, profile_steps=3),
            record_path=tmp_path / f"{key}.json",
            workload_info={"name": "toy", "factory": "t", "preset": "small"},
            bandwidth=(4140.0, "assumed"),
        )
        assert record["settings"]["timing"] == "cuda-events"
        assert record["environment"]["gpu"]
        for device_ns, wall_ns in zip(record["samples_ns"], record["repeat_wall_ns"], strict=True):
            # Event deltas lie inside the host's repeat wall (which adds the first launch and the final sync).
            assert 0 < sum(device_ns) <= wall_ns
        assert record["analysis"]["gpu_measured"], record["analysis"].get("note")
        assert record["floor"]["tpot_over_floor"] > 0
        reads[key] = record["analysis"]["blocking_reads_per_step"]
    assert reads["base"] >= 1.0
    assert reads["planted"] == reads["base"] + 1.0
    assert reads["no_readback"] < reads["base"] and reads["graph"] == reads["no_readback"]
