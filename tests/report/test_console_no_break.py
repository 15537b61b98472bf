"""A number and its unit (joined by cells.NBSP) never wrap apart on the console: tables, their stacked
blocks at narrow widths, and prose."""

from __future__ import annotations

import io

import pytest

from bubblescope.report.cells import NBSP
from bubblescope.report.console import make_console, print_rows
from bubblescope.report.tp_rows import ablation_tp_rows, slowest_rank_text

RANKS = [
    {"rank": 0, "tpot_ms": 12.3456, "gpu_busy_ns_per_step": 1_234_567.0},
    {"rank": 1, "tpot_ms": 12.5, "gpu_busy_ns_per_step": 1_434_567.0},
]
KEYS = ["base", "bf16_gate+bf16_lm_head+fused_moe", "fused_mla_glue+graph_metadata+no_readback+pdl"]


def _render(width: int, draw) -> str:
    stream = io.StringIO()
    draw(make_console(file=stream, width=width))
    return stream.getvalue()


@pytest.mark.parametrize("width", [80, 64, 56, 48, 40])
def test_tp_range_keeps_numbers_with_units(width: int) -> None:
    records = {key: {"tp": {"world_size": 2, "slowest_rank": 1, "ranks": RANKS}} for key in KEYS}
    headers, rows = ablation_tp_rows({"configs": [{"key": key} for key in KEYS]}, records)
    assert f"1.43{NBSP}ms" in rows[0][4], rows[0][4]
    text = _render(
        width, lambda console: print_rows(console, "Slowest rank per configuration", headers, rows)
    )
    # Every range in one piece per row: "1.23 ms" and "1.43 ms" (no-break spaces) each on one line.
    for quantity in (f"1.23{NBSP}ms", f"1.43{NBSP}ms", f"12.500{NBSP}ms"):
        assert text.count(quantity) == len(KEYS), f"{quantity!r} split at {width} columns:\n{text}"


def test_prose_keeps_numbers_with_units() -> None:
    sentence = slowest_rank_text({"slowest_rank": 1, "timing_rank": 0, "ranks": RANKS})
    for width in range(20, 80):
        text = _render(width, lambda console, s=sentence: console.print(s))
        assert text.count(f"1.43{NBSP}ms") == 1 and text.count(f"1.23{NBSP}ms") == 1, text
        assert max(len(line) for line in text.splitlines()) <= width, text
