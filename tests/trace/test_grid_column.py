"""The GPU table's `grid_x` column against the raw kernel events of a real public trace."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from bubblescope.trace.load import stream_trace
from bubblescope.trace.tables import TraceTables, build_tables_streamed

REAL = "data/real_traces/hta_a100_param_alexnet.json.gz"


def load_trace(path: Path) -> TraceTables:
    streamed = stream_trace(path)
    return build_tables_streamed(streamed.chunks(), lambda: streamed.meta, path, rank=0)


def test_grid_x_is_the_first_grid_member_of_each_kernel(shared_dir: Path) -> None:
    path = shared_dir / REAL
    raw = json.loads(gzip.decompress(path.read_bytes()))
    expected = sorted(
        (round(e["ts"] * 1000), e["args"]["grid"][0])
        for e in raw["traceEvents"]
        if e.get("cat") == "kernel" and e.get("ph") == "X"
    )
    tables = load_trace(path)
    kernels = tables.gpu[tables.gpu["kind"] == "kernel"]
    assert len(kernels) == len(expected) > 0
    assert sorted(kernels["grid_x"].tolist()) == sorted(grid for _, grid in expected)


def test_odd_grids_are_unknown_not_refused(tmp_path: Path) -> None:
    grids = [[5, 1, 1], "7", [], [-3], [2.5], None, [2**63], {"x": 1}]
    events = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": f"k{i}",
            "ts": 10 * i,
            "dur": 1,
            "args": {"device": 0, "stream": 7, "correlation": i, "grid": grid},
        }
        for i, grid in enumerate(grids)
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    gpu = load_trace(path).gpu.sort_values("start_ns")
    assert gpu["grid_x"].tolist() == [5, -1, -1, -1, -1, -1, -1, -1]
