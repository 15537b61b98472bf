"""A bare trace gets a floor only from numbers the user gives; steps counted per rank (issue 16 §2, §5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bubblescope.cli import app
from bubblescope.errors import ConfigError
from bubblescope.floor.trace_floor import trace_floor
from tests.trace import scenarios

runner = CliRunner()


def test_floor_needs_both_numbers_and_compares_the_median_gpu_step(tmp_path: Path) -> None:
    trace = scenarios.item_sync().write(tmp_path / "trace.json")
    bare = runner.invoke(app, ["analyze", str(trace)])
    assert bare.exit_code == 0 and "floor: not measured" in bare.stdout
    # 2 MB at 4000 GB/s = 0.5 µs; item_sync's one step has a GPU interval of 80 µs (its docstring,
    # from the raw events: B_0 = 0, E_0 = end of kC at 80 µs) -> 160x the floor.
    given = runner.invoke(
        app, ["analyze", str(trace), "--format", "json", "--bytes-per-token", "2e6", "--bandwidth", "4000"]
    )
    assert given.exit_code == 0, given.output
    floor = json.loads(given.stdout)["floor"]
    assert floor["floor_ms"] == pytest.approx(0.0005) and floor["gpu_step_over_floor"] == pytest.approx(160.0)
    # 2 MB in 80 µs: 25 GB/s achieved, 1/160 of the given 4000 GB/s.
    assert floor["achieved_gbps"] == pytest.approx(25.0)
    md = runner.invoke(app, ["report", str(trace), "--format", "markdown", "--bytes-per-token", "2e6"])
    assert md.exit_code == 0 and "give --bandwidth of the GPU that ran the trace" in md.stdout
    with pytest.raises(ConfigError):
        trace_floor({}, -1.0, 4000.0)


def test_steps_are_counted_per_rank(tmp_path: Path) -> None:
    ranks = [scenarios.item_sync().write(tmp_path / f"rank{r}" / "trace.json") for r in (0, 1)]
    result = runner.invoke(app, ["analyze", *map(str, ranks)])
    assert result.exit_code == 0, result.output
    assert "1 step on each of 2 ranks" in " ".join(result.stdout.split())
