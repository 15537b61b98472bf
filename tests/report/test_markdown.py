"""Markdown report (CI summaries): the HTML's numbers, in cells that cannot inject markup or break tables."""

from __future__ import annotations

import pytest

from bubblescope.report.cells import md_cell, md_table
from bubblescope.report.load_inputs import load_inputs, read_json_document
from bubblescope.report.markdown import (
    ablation_markdown,
    render_inputs_markdown,
    run_markdown,
    trace_markdown,
)
from tests.report.helpers import ABLATION_DIR, HOSTILE_NAME, HOSTILE_RUN_DIR, MINIMAL_RUN_FILE


def _table_widths(markdown: str) -> set[int]:
    """Column counts of every table row (unescaped pipes), per table block."""
    widths = set()
    for line in markdown.splitlines():
        if line.startswith("|"):
            widths.add(line.replace("\\|", "").count("|"))
    return widths


def test_md_cell_escapes_markup_and_pipes() -> None:
    cell = md_cell(HOSTILE_NAME + " a|b *c* [d](e) `f`\nnext")
    assert "<" not in cell and ">" not in cell
    assert "&lt;/script&gt;" in cell
    assert "a\\|b" in cell and "\\*c\\*" in cell and "\\[d\\]" in cell and "\\`f\\`" in cell
    assert "\n" not in cell


def test_md_table_shape() -> None:
    table = md_table((["a", "b"], [["1", "x|y"], ["2", "z"]]))
    lines = table.splitlines()
    # A numeric column is right-aligned (`---:`).
    assert lines[0] == "| a | b |" and lines[1] == "| ---: | --- |"
    assert lines[2] == "| 1 | x\\|y |"
    assert md_table((["a"], []), "nothing here") == "_nothing here_"


def test_ablation_markdown_has_attribution_and_waterfall() -> None:
    (item,) = load_inputs([ABLATION_DIR])
    text = ablation_markdown(item.ablation, item.records, item.warnings)
    assert text.startswith("## Ablation: ling3 · ling3-flash-e256")
    assert "| total saving ms \\[95% CI\\] | 5.120 \\[5.060, 5.180\\] |" in text
    assert "| fused\\_moe | 3.520 \\[3.460, 3.580\\] |" in text
    assert "| +fused\\_moe | 2.810\u00a0ms | -3.520\u00a0ms |" in text
    assert "| all\\_minus\\_pdl | no\\_readback, fused\\_moe | all\\_minus | pending | — |" in text
    assert len(_table_widths(text)) >= 3


def test_run_markdown_escapes_hostile_names() -> None:
    record = read_json_document(HOSTILE_RUN_DIR / "record.json")
    analysis = read_json_document(HOSTILE_RUN_DIR / "analysis.json")
    text = run_markdown(record, analysis)
    assert "<script" not in text.lower() and "</script" not in text.lower()
    assert "&lt;/script&gt;&lt;script&gt;document.title='x'" in text
    assert "| TPOT (95% CI) | 7.590\u00a0ms \\[" in text
    assert "### Host-blocking reads" in text and "cudaStreamSynchronize" in text


def test_minimal_run_and_trace_markdown() -> None:
    text = run_markdown(read_json_document(MINIMAL_RUN_FILE), None)
    assert "| speed-of-light floor | — |" in text and "_no host-blocking reads_" in text
    trace = trace_markdown(
        {"schema": "bubblescope.analysis/1", "gpu_measured": False, "inputs": [{"path": "t.json"}]}
    )
    assert trace.startswith("## Trace: t.json") and "GPU bubbles are not measured" in trace


@pytest.mark.parametrize("paths", [[ABLATION_DIR], [HOSTILE_RUN_DIR, HOSTILE_RUN_DIR / "analysis.json"]])
def test_inputs_markdown_has_one_section_per_input(paths: list) -> None:
    items = load_inputs(paths)
    text = render_inputs_markdown(items)
    assert sum(line.startswith("## ") for line in text.splitlines()) == len(items)


def test_number_formats() -> None:
    from bubblescope.report.cells import fmt_bytes, fmt_duration_ns, fmt_interval, fmt_ms

    nbsp = "\u00a0"
    assert fmt_ms(2.4651) == f"2.465{nbsp}ms" and fmt_ms(0.00228) == f"0.00228{nbsp}ms"
    assert fmt_ms(None) == fmt_ms("x") == fmt_ms(True) == "—"
    # µs below a millisecond, ms above, one unit spelling, never four decimals of ms.
    assert fmt_duration_ns(1_876_000) == f"1.88{nbsp}ms" and fmt_duration_ns(812_400) == f"812.4{nbsp}µs"
    assert fmt_duration_ns(None) == "—" and fmt_duration_ns(2_400_000_000) == f"2,400{nbsp}ms"
    # An interval holding zero, or wider than the effect, is flagged as noise (issue 16 §1).
    assert fmt_interval({"est": 0.2, "lo": -0.1, "hi": 0.5}).startswith("not resolved (noise)")
    assert fmt_interval({"est": 500.0, "lo": 56.0, "hi": 2002.0}).startswith("not resolved (noise)")
    assert fmt_bytes(10_207_000_000) == "10.21\u00a0GB" and fmt_bytes(512) == "512\u00a0B"
    assert fmt_interval({"est": 1.6, "lo": 1.5, "hi": 1.7}) == "1.60 [1.50, 1.70]"
    assert fmt_interval({"est": 1.6}) == "1.600" and fmt_interval(None) == "—"
