"""One truth on every surface of an ablation (issue 23 §3-§4), on the committed H200 ablation.

The same configuration's interval in every table; the removed-idle column with intervals and, where the
switch alone was slower, the reason beside it; the predicted-vs-measured table with the same cells on
the console, the Markdown and the HTML page.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from rich.console import Console

from bubblescope.report.load_inputs import load_inputs
from bubblescope.report.markdown import render_inputs_markdown
from bubblescope.report.predicted_rows import predicted_rows
from bubblescope.report.run_console import print_ablation_summary

SAMPLE = Path(__file__).resolve().parents[2] / "reports" / "samples" / "ablation-ling3-flash-e256-h200"


@pytest.fixture(scope="module")
def surfaces() -> dict[str, object]:
    if not (SAMPLE / "ablation.json").is_file():
        pytest.skip("the committed H200 ablation sample is absent")
    (item,) = load_inputs([SAMPLE])
    console = Console(record=True, width=400)
    print_ablation_summary(console, item.ablation["attribution"], [])
    from bubblescope.report.html import render_ablation_html

    page = re.sub(r"<script\b.*?</script>", "", render_ablation_html(item.ablation, item.records), flags=re.S)
    return {
        "item": item,
        "markdown": render_inputs_markdown([item]),
        "console": console.export_text(),
        "html": html.unescape(re.sub(r"<[^>]+>", " ", page)),
    }


def _md_rows(markdown: str, heading: str) -> list[list[str]]:
    section = markdown.split(heading, 1)[1].split("###", 1)[0]
    rows = [line.strip("|").split("|") for line in section.splitlines() if line.startswith("| ")]
    return [[cell.strip().replace("\\", "") for cell in row] for row in rows[1:]]


def test_baseline_interval_is_the_same_in_the_waterfall_and_the_configuration_table(surfaces) -> None:
    markdown = surfaces["markdown"]
    waterfall = {row[0]: row[3] for row in _md_rows(markdown, "### TPOT waterfall")}
    configs = {row[0]: row[5].split(" (")[0] for row in _md_rows(markdown, "### Configurations")}
    assert waterfall["baseline"] == configs["base"]


def test_a_removal_beside_a_slower_switch_carries_its_reason(surfaces) -> None:
    rows = {row[0]: row for row in _md_rows(surfaces["markdown"], "### Per-switch")}
    gate = rows["bf16_gate"]
    # bf16_gate alone is 0.59 ms slower, yet its profiled window lost ~1 ms of host idle.
    assert gate[1].startswith("-0.59")
    assert "host " in gate[-1] and "slower" in gate[-1], gate[-1]
    assert re.search(r"host [\d.]+\s?µs \[[\d.]+, [\d.]+\]", gate[-1]), "an interval beside the removal"
    assert "steps 0, 1, 2, 3" in surfaces["markdown"], "which profiled steps the column describes"
    # Per timed step, the slower switch shows idle added, not removed.
    assert gate[-2].startswith("-") and "µs" in gate[-2], gate[-2]


def test_predicted_vs_measured_reads_the_same_on_every_surface(surfaces) -> None:
    attribution = surfaces["item"].ablation["attribution"]
    _headers, rows = predicted_rows(attribution["predicted_vs_measured"])
    assert {row[0] for row in rows} == set(surfaces["item"].ablation["toggles"])
    for row in rows:
        switch, predicted, verdict = row[0], row[2], row[5]
        for name in ("markdown", "console", "html"):
            text = surfaces[name].replace("\\", "")
            assert predicted.split(" (")[0] in text, (name, switch, predicted)
            assert verdict in " ".join(text.split()), (name, switch, verdict)
    verdicts = {row[0]: row[5] for row in rows}
    assert verdicts["pdl"].startswith("agrees") and verdicts["fused_moe"].startswith("off")
