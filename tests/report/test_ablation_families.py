"""The ablation report's "Kernel families against the floor, per configuration" (ablation_bandwidth.py).

Checked on the committed H200 round-3 sample: the cells of `norm_epilogue` against `base` are the numbers
in the two runs' analysis JSON (read here, not through the renderer), the fused norm's family fell and the
GEMV that took the norm in grew; an ablation whose analyses have no `bandwidth` block has no such section.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from bubblescope.report.ablation_bandwidth import FAMILIES_TITLE, family_table
from bubblescope.report.cells import NBSP, NOT_MEASURED
from bubblescope.report.html import render_ablation_html
from bubblescope.report.load_inputs import load_inputs
from bubblescope.report.markdown import render_inputs_markdown
from bubblescope.report.run_console import print_ablation_summary
from tests.report.helpers import ABLATION_DIR, chromium_path, load_in_chromium

SAMPLE = Path(__file__).resolve().parents[2] / "reports/samples/ablation-issue27-round3-e256-h200"
NUMBER = re.compile(r"[−+-]?[\d,]+\.\d+")


@pytest.fixture(scope="module")
def sample() -> object:
    (item,) = load_inputs([SAMPLE])
    return item


def _families(key: str) -> dict[str, dict]:
    doc = json.loads((SAMPLE / "runs" / f"{key}.analysis.json").read_text(encoding="utf-8"))
    return {row["family"]: row for row in doc["bandwidth"]["families"]}


def _numbers(cell: str) -> list[float]:
    return [float(text.replace(",", "").replace("−", "-")) for text in NUMBER.findall(cell)]


def _row(rows: list[list[str]], label_start: str) -> list[str]:
    (row,) = [row for row in rows if row[0].startswith(label_start)]
    return row


def test_norm_epilogue_cells_are_the_runs_own_family_numbers(sample) -> None:
    headers, rows = family_table(sample.ablation, sample.analyses, "base")
    assert headers[:4] == ["family", "base", "norm_epilogue", "Δ norm_epilogue"]
    base, fused = _families("base"), _families("norm_epilogue")
    # The GEMV of 640 blocks is the one the switch fuses the next add + RMSNorm into (it is renamed).
    (gemv_base,) = [row for row in base.values() if row["grid_x"] == 640]
    (gemv_fused,) = [row for row in fused.values() if row["grid_x"] == 640]
    assert gemv_fused["family"].startswith(gemv_base["family"] + " + ")
    norm_name = "add + RMSNorm"
    checked = {norm_name: (base[norm_name], fused[norm_name]), gemv_base["family"]: (gemv_base, gemv_fused)}
    experts = "MoE experts (routed + shared)"
    checked[experts] = (base[experts], fused[experts])
    for name, (before, after) in checked.items():
        row = _row(rows, name)
        for cell, family in ((row[1], before), (row[2], after)):
            us, tbps = _numbers(cell)
            assert us == pytest.approx(family["critical_ns"] / 1e3, abs=0.05)
            assert cell.count(f"{NBSP}µs") == 1 and cell.endswith(f"{NBSP}TB/s")
            if family["achieved_gbps"] >= 10:
                assert tbps == pytest.approx(family["achieved_gbps"] / 1e3, abs=0.005)
            else:
                assert f"<0.01{NBSP}TB/s" in cell
        (change,) = _numbers(row[3])
        assert change == pytest.approx((after["critical_ns"] - before["critical_ns"]) / 1e3, abs=0.05)
    assert _numbers(_row(rows, norm_name)[3])[0] < -100
    assert _numbers(_row(rows, gemv_base["family"])[3])[0] > 100
    # Ordered by the baseline's excess over the ceiling, largest first.
    excess = [base[row[0]]["excess_ns"] for row in rows if row[0] in base]
    assert excess == sorted(excess, reverse=True)


def test_markdown_and_html_carry_the_section_and_the_3switch_sample_has_none(sample) -> None:
    markdown = render_inputs_markdown([sample])
    assert f"### {FAMILIES_TITLE}" in markdown
    section = markdown.split(f"### {FAMILIES_TITLE}")[1]
    assert "| family | base | norm\\_epilogue | Δ norm\\_epilogue |" in section
    page = render_ablation_html(sample.ablation, sample.records, sample.analyses)
    assert f"<h2>{FAMILIES_TITLE}</h2>" in page
    assert f"−135.8{NBSP}µs" in page or "−135.8&nbsp;µs" in page
    (plain,) = load_inputs([ABLATION_DIR])
    assert FAMILIES_TITLE not in render_inputs_markdown([plain])
    assert FAMILIES_TITLE not in render_ablation_html(plain.ablation, plain.records, plain.analyses)


def test_a_configuration_without_the_block_is_not_measured(sample) -> None:
    analyses = dict(sample.analyses)
    analyses["routing_in_experts"] = {
        k: v for k, v in analyses["routing_in_experts"].items() if k != "bandwidth"
    }
    headers, rows = family_table(sample.ablation, analyses, "base")
    at = headers.index("routing_in_experts")
    assert all(row[at] == row[at + 1] == NOT_MEASURED for row in rows)
    assert not any(NOT_MEASURED in cell for row in rows for cell in row[1:at])


def test_console_at_80_columns_keeps_every_cell_whole(sample) -> None:
    console = Console(width=80, record=True, force_terminal=False, color_system=None)
    print_ablation_summary(
        console,
        sample.ablation["attribution"],
        [],
        manifest=sample.ablation,
        records=sample.records,
        analyses=sample.analyses,
    )
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    section = text[text.index(FAMILIES_TITLE) :]
    flat = " ".join(section.replace(NBSP, " ").split())
    _, rows = family_table(sample.ablation, sample.analyses, "base")
    for row in rows:
        for cell in row[1:]:
            assert " ".join(cell.replace(NBSP, " ").split()) in flat, cell
    assert "kernel launches / step" in section and "launch gap / step" in section


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.skipif(chromium_path() is None, reason="chromium not installed")
def test_sample_page_with_the_section_loads_clean(sample, tmp_path: Path) -> None:
    page = render_ablation_html(sample.ablation, sample.records, sample.analyses)
    path = tmp_path / "ablation.html"
    path.write_text(page, encoding="utf-8")
    loaded = load_in_chromium(path)
    assert loaded.html_attr("data-js-errors") == "0", loaded.html_attr("data-js-first-error")
    assert loaded.uncaught_console_errors() == []
    assert loaded.body_attr("data-figures-rendered") == str(page.count('<div class="figure" id="bs-fig-'))
    assert FAMILIES_TITLE in loaded.dom
