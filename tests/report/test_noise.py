"""Noise said out loud (issue 16 §1): unresolved savings are flagged, never drawn as savings."""

from __future__ import annotations

from bubblescope.report.ablation_rows import switch_rows, waterfall_noise_note
from bubblescope.report.figures import switch_deltas_figure, waterfall_figure


def _est(est: float, lo: float, hi: float) -> dict[str, float]:
    return {"est": est, "lo": lo, "hi": hi}


SWITCHES = [
    {
        "name": "fused_moe",
        "alone_ms": _est(3.52, 3.46, 3.58),
        "removed_from_all_ms": _est(3.1, 3.0, 3.2),
        "shapley_ms": _est(3.3, 3.2, 3.4),
        "cumulative_ms": _est(3.52, 3.46, 3.58),
        "removed_reads_per_step": {},
        "removed_idle_us_per_step": {"sync": 886.0, "host": 0.0},
    },
    {
        # A CPU run: the interval excludes zero but is four times wider than the effect.
        "name": "noisy",
        "alone_ms": _est(500.0, 56.0, 2002.0),
        "removed_from_all_ms": _est(-10.0, -900.0, 800.0),
        "shapley_ms": _est(200.0, -100.0, 900.0),
        "cumulative_ms": _est(500.0, 56.0, 2002.0),
        "removed_reads_per_step": {},
        "removed_idle_us_per_step": {},
    },
]


def test_tables_flag_noise_and_label_the_removed_columns() -> None:
    headers, rows = switch_rows(SWITCHES, "exact")
    assert headers[-3:] == [
        "alone: removed reads/step",
        "alone: removed GPU idle per timed step (µs, 95% CI)",
        "alone: removed GPU idle per profiled step (95% CI)",
    ]
    assert rows[0][1] == "3.520 [3.460, 3.580]"
    assert all(cell.startswith("not resolved (noise)") for cell in rows[1][1:5])
    # 886 µs of sync idle removed alone, in µs with one unit spelling; an ablation written before the
    # intervals existed says it has none.
    assert rows[0][-1] == "sync 886.0\u00a0µs (no interval: re-analyse with `ablate --reanalyze`)"


def test_single_ordering_shapley_is_not_a_separate_estimate() -> None:
    headers, _rows = switch_rows(SWITCHES, "sampled:1")
    assert "Shapley" not in headers and "cumulative (in order)" in headers
    fig = switch_deltas_figure(SWITCHES, "sampled:1")
    assert "Shapley" not in {trace.name for trace in fig.data}


def test_figure_draws_no_bar_for_an_unresolved_saving() -> None:
    fig = switch_deltas_figure(SWITCHES, "exact")
    labels = list(fig.data[0].y)
    assert labels[1] == "noisy (not resolved: noise)"
    for trace in fig.data:
        # The noisy switch's bar is zero length in every estimator: nothing plotted as a saving.
        assert trace.x[1] == 0.0


def test_waterfall_marks_unresolved_steps() -> None:
    rows = [
        {"step": "baseline", "tpot_ms": 10.0, "lo": 9.9, "hi": 10.1},
        {
            "step": "+a",
            "tpot_ms": 7.0,
            "lo": 6.9,
            "hi": 7.1,
            "delta_ms": -3.0,
            "delta_lo": -3.1,
            "delta_hi": -2.9,
        },
        {
            "step": "+b",
            "tpot_ms": 6.9,
            "lo": 6.0,
            "hi": 7.8,
            "delta_ms": -0.1,
            "delta_lo": -0.9,
            "delta_hi": 0.8,
        },
    ]
    assert waterfall_noise_note(rows[1]) == "" and waterfall_noise_note(rows[2]) == " (not resolved: noise)"
    texts = list(waterfall_figure(rows).data[0].text)
    assert texts[1] == "-3.00" and texts[2] == "-0.10 (noise)"


def test_a_wide_tpot_interval_is_called_noisy() -> None:
    from bubblescope.report.cells import tpot_noise_note
    from bubblescope.report.run_rows import run_summary_items

    # The CPU ablation of issue 16: steps from 62 ms to 2.4 s, an interval far wider than 5% of TPOT.
    assert tpot_noise_note(500.0, 62.0, 2400.0) == " (noisy: ±234%)"
    assert tpot_noise_note(7.59, 7.55, 7.63) == ""
    record = {"summary": {"tpot_ms": 500.0, "tpot_ci95_two_level_ms": [62.0, 2400.0]}}
    assert dict(run_summary_items(record, None))["TPOT (95% CI)"].endswith("(noisy: ±234%)")
