"""The host op table, kernel categories and utilisation on every surface; --top, --min-gap and
--format csv on `analyze` and `diff` (issue 25 §views)."""

from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path

from typer.testing import CliRunner

from bubblescope.analysis.traces import analyze_traces
from bubblescope.cli import app
from bubblescope.errors import BubblescopeError
from bubblescope.report.html import render_trace_html

DATA = Path(__file__).resolve().parents[1] / "data"
CPU_TRACE = DATA / "gate" / "sync_cpu.trace.json.gz"
H200_BASE = DATA / "ling3_tiny_h200" / "base.trace.json.gz"
H200_ALL_ON = DATA / "ling3_tiny_h200" / "all_on.trace.json.gz"
runner = CliRunner(env={"COLUMNS": "80"})


def _raw_item_durations_us() -> list[float]:
    with gzip.open(CPU_TRACE, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    return [e["dur"] for e in events if e.get("cat") == "cpu_op" and e.get("name") == "aten::item"]


def test_plain_cpu_trace_shows_its_host_ops_on_the_console_at_80_columns() -> None:
    """A CPU trace used to print only "not detectable" lines although it holds aten::item calls."""
    result = runner.invoke(app, ["analyze", str(CPU_TRACE)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    item = next(line for line in lines if "aten::item" in line)
    # Two steps (bubblescope.step), four aten::item ranges in the raw JSON: 2 calls per step.
    assert len(_raw_item_durations_us()) == 4
    assert item.split("│")[2].strip() == "2"
    assert "Host ops by self time" in result.stdout
    assert "GPU utilisation per step: not measured (no GPU)" in result.stdout


def test_host_ops_csv_carries_raw_values_read_from_the_json() -> None:
    result = runner.invoke(app, ["analyze", str(CPU_TRACE), "--format", "csv", "--table", "host-ops"])
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in csv.DictReader(io.StringIO(result.stdout))}
    item = rows["aten::item"]
    assert (item["kind"], int(item["calls"]), float(item["calls_per_step"])) == ("op", 4, 2.0)
    # total = the sum of the four ranges' `dur` (µs in the JSON, ns in the CSV).
    assert int(item["total_ns"]) == round(sum(_raw_item_durations_us()) * 1000)
    assert int(item["self_ns"]) < int(item["total_ns"]), "aten::_local_scalar_dense runs inside it"


def _refused(result, text: str) -> bool:
    """What `bubblescope.cli.main` turns into one line and exit code 2 (CliRunner shows the exception)."""
    exc = result.exception
    return isinstance(exc, BubblescopeError) and exc.exit_code == 2 and text in str(exc)


def test_csv_needs_one_named_table_and_refuses_a_table_without_csv() -> None:
    result = runner.invoke(app, ["analyze", str(CPU_TRACE), "--format", "csv"])
    assert _refused(result, "give --table, one of steps, kernels")
    assert _refused(
        runner.invoke(app, ["analyze", str(CPU_TRACE), "--table", "kernels"]), "goes with --format csv"
    )


def test_kernel_csv_keeps_full_names_beside_short_names_and_categories() -> None:
    result = runner.invoke(
        app, ["analyze", str(H200_BASE), "--format", "csv", "--table", "kernels", "--top", "3"]
    )
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert len(rows) == 3
    assert {"name", "short_name", "category", "total_ns", "ns_per_step"} <= set(rows[0])
    assert all(
        row["category"]
        in {"GEMM", "attention", "MoE", "norm", "elementwise", "copy", "communication", "other"}
        for row in rows
    )


def test_top_and_min_gap_limit_every_format() -> None:
    full = json.loads(runner.invoke(app, ["analyze", str(H200_BASE), "--format", "json"]).stdout)
    assert len(full["kernels"]) > 3 and len(full["host_ops"]) > 3
    limited = json.loads(
        runner.invoke(
            app, ["analyze", str(H200_BASE), "--format", "json", "--top", "3", "--min-gap", "20"]
        ).stdout
    )
    assert len(limited["kernels"]) == 3 and len(limited["host_ops"]) == 3
    assert limited["gaps_top"] and all(g["dur_ns"] >= 20_000 for g in limited["gaps_top"])
    assert len(limited["gaps_top"]) < len(full["gaps_top"])
    # Totals still count every gap.
    assert limited["summary"] == full["summary"]
    markdown = runner.invoke(app, ["analyze", str(H200_BASE), "--format", "markdown", "--top", "2"]).stdout
    host_section = markdown.split("### Host ops by self time")[1]
    assert host_section.count("\n| ") == 4, "header, rule and two rows"


def test_html_and_markdown_show_the_three_views() -> None:
    analysis = analyze_traces(H200_BASE)
    page = render_trace_html(analysis)
    for heading in ("GPU utilisation per step", "Kernel time by category", "Host ops by self time"):
        assert heading in page
    util = analysis["summary"]["gpu_utilization"]
    assert 0 < util <= 1 and f"{util:.1%}" in page
    result = runner.invoke(app, ["report", str(H200_BASE), "--format", "markdown"])
    assert (
        result.exit_code == 0
        and "### Kernel time by category" in result.stdout
        and "| MoE |" in result.stdout
    )


def test_diff_tables_as_csv() -> None:
    result = runner.invoke(
        app, ["diff", str(H200_BASE), str(H200_ALL_ON), "--format", "csv", "--table", "kernels"]
    )
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    changes = {(row["change"], row["name"]) for row in rows}
    # all_on swaps the reference MoE's gate_up/down kernels for one fused experts kernel.
    assert ("added", "fused_experts_kernel") in changes and ("removed", "gate_up_kernel") in changes
    bad = runner.invoke(app, ["diff", str(H200_BASE), str(H200_ALL_ON), "--format", "csv", "--table", "x"])
    assert bad.exit_code == 2 and "one of reads, kernels, idle, switches" in bad.output
    bad = runner.invoke(app, ["diff", str(H200_BASE), str(H200_ALL_ON), "--table", "kernels"])
    assert bad.exit_code == 2 and "--table goes with --format csv" in bad.output


def test_report_takes_top_and_min_gap() -> None:
    result = runner.invoke(
        app, ["report", str(H200_BASE), "--format", "markdown", "--top", "1", "--min-gap", "400"]
    )
    assert result.exit_code == 0, result.output
    host_section = result.stdout.split("### Host ops by self time")[1].split("###")[0]
    assert host_section.count("\n| ") == 3, "header, rule and one row"
    gaps = result.stdout.split("### Largest GPU idle gaps")[1].split("###")[0]
    # --min-gap 400 µs keeps only the cudaGraphLaunch gaps (554.4 and 491.7 µs), and --top 1 the first.
    assert gaps.count("\n| ") == 3 and "554.4" in gaps
