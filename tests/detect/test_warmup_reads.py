"""The warm-up/outlier step never enters a headline number (issue 23 §4): reads per step are counted over
the typical steps, as step times are."""

from __future__ import annotations

from pathlib import Path

from bubblescope.analysis.traces import analyze_traces
from tests.trace.builder import US, TraceBuilder


def test_warm_up_reads_stay_out_of_reads_per_step(tmp_path: Path) -> None:
    """Step 0 runs 1000 µs (lazy init) with three item reads; steps 1-4 run 50 µs with one each. Step 0
    is over 10x the median step: left out of per-step figures, so 1.0 read/step (not 7/5 = 1.4), while
    the read site's `count` still holds all seven."""
    b = TraceBuilder()
    starts = [0, 1000, 1050, 1100, 1150]
    ends = [1000, 1050, 1100, 1150, 1200]
    for index, (start, end) in enumerate(zip(starts, ends, strict=True)):
        b.annotation("bubblescope.step", start * US, end * US)
        b.frame("/home/u/app.py(12): step", start * US, end * US)
        for k in range(3 if index == 0 else 1):
            # Step 0's reads sit at its end, so step 1's GPU interval is a normal one.
            t = (end - 45 + 12 * k) * US
            b.kernel("k", (t, t + 1 * US), (t + 2 * US, t + 4 * US))
            b.blocking_read(
                ["aten::item", "aten::_local_scalar_dense"],
                (t + 5 * US, t + 11 * US),
                (t + 6 * US, t + 7 * US),
                (t + 7 * US, t + 8 * US),
                (t + 8 * US, t + 10 * US),
            )
    result = analyze_traces([b.write(tmp_path / "t.json.gz")])
    assert result["summary"]["outlier_steps"] == 1
    assert result["summary"]["blocking_reads_per_step"] == 1.0
    syncs = result["syncs"]
    assert sum(s["count"] for s in syncs) == 7
    assert sum(s["per_step"] for s in syncs) == 1.0
