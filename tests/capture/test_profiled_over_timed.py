"""How far the profiled steps (gaps, reads) describe the timed ones (TPOT): the ratio and its report row."""

from __future__ import annotations

from bubblescope.capture.measure import PROFILED_SLOWDOWN_NOTICE, profiled_over_timed
from bubblescope.report.run_rows import run_summary_items

US = 1000


def test_ratio_is_median_profiled_gpu_step_over_median_timed_step() -> None:
    full = {"summary": {"gpu_step_ns_median": 5578 * US}}
    # two repeats; the median timed step is 4912 µs whatever the outliers
    samples = [[4900 * US, 4912 * US, 90000 * US], [4912 * US, 4950 * US]]
    assert profiled_over_timed(full, samples) == round(5578 / 4912, 3)
    assert profiled_over_timed(full, samples) > PROFILED_SLOWDOWN_NOTICE


def test_no_ratio_without_a_gpu_step_or_samples() -> None:
    assert profiled_over_timed(None, [[1]]) is None
    assert profiled_over_timed({"summary": {"gpu_step_ns_median": 0}}, [[1]]) is None
    assert profiled_over_timed({"summary": {"gpu_step_ns_median": 5}}, [[]]) is None


def test_report_shows_the_ratio_only_when_measured() -> None:
    record = {
        "summary": {"tpot_ms": 3.8},
        "analysis": {"gpu_measured": True, "profiled_step_over_timed": 1.136},
    }
    items = dict(run_summary_items(record, None))
    assert items["profiled step ÷ timed step"] == "1.14×"
    record["analysis"].pop("profiled_step_over_timed")
    assert "profiled step ÷ timed step" not in dict(run_summary_items(record, None))
