"""`bubblescope analyze` end to end: formats, annotation output, exit codes."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from bubblescope.cli import app
from tests.trace import scenarios

runner = CliRunner()


def _trace(tmp_path: Path) -> Path:
    return scenarios.item_sync().write(tmp_path / "trace.json.gz")


def test_json_output_is_the_schema(tmp_path: Path) -> None:
    result = runner.invoke(app, ["analyze", str(_trace(tmp_path)), "--format", "json", "--timeline"])
    assert result.exit_code == 0, result.output
    analysis = json.loads(result.stdout)
    assert analysis["schema"] == "bubblescope.analysis/1"
    for key in (
        "inputs",
        "warnings",
        "step_source",
        "devices",
        "steps",
        "syncs",
        "gaps_top",
        "summary",
        "timeline",
    ):
        assert key in analysis
    device = analysis["devices"][0]
    assert set(device["idle_by_class_ns"]) == {"sync", "host", "launch", "dependency", "outside"}
    assert {"stream", "busy_ns", "idle_ns", "host_wait_ns", "kernel_wait_ns", "other_ns"} <= set(
        device["streams"][0]
    )
    timeline = analysis["timeline"]
    assert {s["cat"] for s in timeline["slices"]} >= {"cpu_op", "cuda_runtime", "kernel", "gpu_memcpy"}
    assert [g["class"] for g in timeline["gaps"]].count("sync") == 1


def test_json_leaves_the_drawing_timeline_out_unless_asked(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    plain = json.loads(runner.invoke(app, ["analyze", str(trace), "--format", "json"]).stdout)
    drawn = json.loads(runner.invoke(app, ["analyze", str(trace), "--format", "json", "--timeline"]).stdout)
    assert plain["timeline"] is None and plain["rank_timelines"] == []
    assert drawn["timeline"]["slices"]
    # Everything else is the same analysis.
    for key in ("timeline", "rank_timelines"):
        plain.pop(key), drawn.pop(key)
    assert plain == drawn


def test_table_output_names_the_site_and_fix(tmp_path: Path) -> None:
    result = runner.invoke(app, ["analyze", str(_trace(tmp_path))])
    assert result.exit_code == 0, result.output
    assert "app.py(12): step" in result.stdout and "aten::item" in result.stdout
    assert "keep the value on device" in result.stdout


def test_markdown_output(tmp_path: Path) -> None:
    result = runner.invoke(app, ["analyze", str(_trace(tmp_path)), "--format", "markdown"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("## bubblescope analyze")
    assert "| 1 | app.py(12): step | aten::item | 1 | 1 |" in result.stdout
    # The fix-first list opens the report, and the read is its first finding: its bubble is bounded by the
    # 21 µs it held the host while the device drained (the annotated sync slice below), not the 26 µs gap.
    body = result.stdout
    assert body.index("What to fix first") < body.index("Host-blocking reads by site")
    # A bare trace has no timed step: the saving is an estimate and says so (issue 23 §2).
    assert (
        "| 1 | blocking read: aten::item, 1 per step | app.py(12): step | 21.0\u00a0µs (estimate) |" in body
    )
    assert "no timed step: savings are estimates" in body


def test_json_output_has_the_findings_and_their_bound(tmp_path: Path) -> None:
    result = runner.invoke(app, ["analyze", str(_trace(tmp_path)), "--format", "json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    (read, *_) = body["findings"]
    assert (read["kind"], read["site"], read["estimate"], read["bound"]) == (
        "blocking read",
        "app.py(12): step",
        True,
        "idle",
    )
    assert body["idle_bound"]["source"] == "model"
    assert sum(f["saving_ns_per_token"] for f in body["findings"]) <= body["idle_bound"]["timed_idle_ns"]


def test_annotate_writes_original_plus_findings(tmp_path: Path) -> None:
    out = tmp_path / "annotated.json.gz"
    args = ["analyze", str(_trace(tmp_path)), "--annotate", str(out), "--format", "json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(gzip.decompress(out.read_bytes()))
    original = scenarios.item_sync().trace()["traceEvents"]
    # The findings come first in the array; the original events follow unchanged.
    assert doc["traceEvents"][-len(original) :] == original
    added = [e for e in doc["traceEvents"][: -len(original)] if e["ph"] == "X"]
    assert {e["name"] for e in added} >= {"idle: sync", "idle: host", "blocking read: aten::item", "step 0"}
    sync_gap = next(e for e in added if e["name"] == "idle: sync")
    assert sync_gap["args"]["blame"] == "app.py(12): step"
    assert sync_gap["dur"] == 21.0


def test_bad_trace_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    done = subprocess.run(
        [sys.executable, "-m", "bubblescope", "analyze", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "not valid JSON" in done.stderr and "Traceback" not in done.stderr


def test_bad_format_and_bad_regex_exit_2(tmp_path: Path) -> None:
    trace = str(_trace(tmp_path))
    for args in (["--format", "yaml"], ["--step-marker", "("]):
        done = subprocess.run(
            [sys.executable, "-m", "bubblescope", "analyze", trace, *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
