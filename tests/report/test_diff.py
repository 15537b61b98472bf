"""`bubblescope diff`: expected answers read from the raw events and samples, never from the tool's output."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from bubblescope.cli import app
from bubblescope.diff import run_diff
from tests.trace import scenarios

runner = CliRunner()
GATE = Path(__file__).resolve().parent.parent / "data" / "gate"
US = 1000


def _item_sync(path: Path, rename: dict[str, str] | None = None) -> Path:
    doc = scenarios.item_sync().trace()
    for event in doc["traceEvents"]:
        if event.get("cat") == "kernel" and event.get("name") in (rename or {}):
            event["name"] = rename[event["name"]]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def _kernel_ns(path: Path, name: str) -> float:
    """Total ns of kernel `name` in the trace (one step), from its raw events (ts/dur in µs)."""
    events = json.loads(path.read_text())["traceEvents"]
    return sum(e["dur"] * US for e in events if e.get("cat") == "kernel" and e.get("name") == name)


def test_kernels_added_and_removed_by_name(tmp_path: Path) -> None:
    base = _item_sync(tmp_path / "a" / "trace.json")
    cur = _item_sync(tmp_path / "b" / "trace.json", {"kC": "kC_fused"})
    diff = run_diff(base, cur)
    kernels = diff["kernels"]
    assert [k["name"] for k in kernels["added"]] == ["kC_fused"]
    assert [k["name"] for k in kernels["removed"]] == ["kC"]
    assert kernels["added"][0]["ns_per_step"] == _kernel_ns(cur, "kC_fused") == 13 * US
    assert kernels["changed"] == []
    # The same reads at the same site on both sides: nothing added or removed, TPOT not timed.
    assert diff["reads"]["added"] == diff["reads"]["removed"] == []
    assert diff["tpot"]["status"] == "skipped"
    assert diff["idle_per_step"]["sync"]["delta_ns"] == 0


def test_read_sites_added_and_removed(tmp_path: Path) -> None:
    base = scenarios.regained_lead().write(tmp_path / "a" / "trace.json")
    cur = _item_sync(tmp_path / "b" / "trace.json")
    diff = run_diff(base, cur)
    assert [(r["site"], r["op"]) for r in diff["reads"]["added"]] == [("app.py(12): step", "aten::item")]
    assert [(r["site"], r["op"]) for r in diff["reads"]["removed"]] == [("app.py(30): step", "aten::item")]


def _median_tpot_ms(record: dict) -> float:
    """Pooled median of step ns / mean tokens per step of each repeat, straight from the samples."""
    samples = []
    for steps_ns, tokens in zip(record["samples_ns"], record["tokens_per_step"], strict=True):
        mean_tokens = sum(tokens) / len(tokens)
        samples += [ns / mean_tokens for ns in steps_ns]
    return float(np.median(samples)) / 1e6


def test_records_give_delta_tpot_with_interval() -> None:
    base, cur = GATE / "baseline.json", GATE / "tpot_regression.json"
    diff = run_diff(base, cur)
    tpot = diff["tpot"]
    expected = _median_tpot_ms(json.loads(cur.read_text())) - _median_tpot_ms(json.loads(base.read_text()))
    assert abs(tpot["delta_ms"]["est"] - expected) < 1e-9
    assert tpot["delta_ms"]["lo"] <= tpot["delta_ms"]["est"] <= tpot["delta_ms"]["hi"]
    assert tpot["change"] == "regression" and "two-level" in tpot["interval"]
    # The reverse direction is an improvement, said as one.
    assert run_diff(cur, base)["tpot"]["change"] == "improvement"


def test_cli_formats_and_bad_input(tmp_path: Path) -> None:
    base = _item_sync(tmp_path / "a" / "trace.json")
    cur = _item_sync(tmp_path / "b" / "trace.json", {"kC": "kC_fused"})
    as_json = runner.invoke(app, ["diff", str(base), str(cur), "--format", "json"])
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout)["schema"] == "bubblescope.diff/1"
    md = runner.invoke(app, ["diff", str(base), str(cur), "--format", "markdown"])
    assert md.exit_code == 0 and "| added | kC\\_fused |" in md.stdout
    table = runner.invoke(app, ["diff", str(base), str(cur)], env={"COLUMNS": "300"})
    assert table.exit_code == 0 and "kC_fused" in table.stdout and "TPOT not compared" in table.stdout
    page = tmp_path / "diff.html"
    html = runner.invoke(app, ["diff", str(base), str(cur), "--format", "html", "-o", str(page)])
    assert html.exit_code == 0 and "<h2>Kernels added, removed" in page.read_text()
    # Wide enough for the whole path: under pytest-xdist tmp_path is longer, and typer's error panel
    # (CliRunner's standalone mode; `bubblescope` itself prints one line) cuts what does not fit.
    missing = runner.invoke(app, ["diff", str(base), str(tmp_path / "nope.json")], env={"COLUMNS": "400"})
    assert missing.exit_code == 2 and "nope.json" in missing.output
    assert "Traceback" not in missing.output


def test_gate_verdict_embeds_the_same_diff() -> None:
    from bubblescope.gate import run_gate
    from bubblescope.report.gate_markdown import render_gate_markdown

    base, cur = GATE / "baseline.json", GATE / "tpot_regression.json"
    verdict = run_gate(str(base), str(cur))
    assert verdict["diff"]["tpot"]["delta_ms"] == run_diff(base, cur)["tpot"]["delta_ms"]
    assert "### bubblescope diff" in render_gate_markdown(verdict)


def test_two_ablations_compare_each_switch_alone() -> None:
    ablation = Path(__file__).resolve().parent.parent / "data" / "report" / "ablation_3switch"
    manifest = json.loads((ablation / "ablation.json").read_text())
    want = {s["name"]: s["alone_ms"] for s in manifest["attribution"]["switches"]}
    diff = run_diff(ablation, ablation)
    assert {s["name"]: s["current_alone_ms"] for s in diff["switches"]} == want
    assert diff["tpot"]["change"] == "unresolved" and diff["tpot"]["delta_ms"]["est"] == 0.0


def test_headline_uses_one_minus_sign() -> None:
    """'Δ −36.29 ms [...] (-53.9%...' mixed a minus sign and a hyphen in one line."""
    from bubblescope.report.diff_render import headline

    base, cur = GATE / "baseline.json", GATE / "tpot_regression.json"
    faster = headline(run_diff(cur, base))
    assert "Δ −" in faster and re.search(r"\(−\d+\.\d%;", faster), faster
    assert "-" not in faster.split("(", 1)[1].split(";", 1)[0]
    slower = headline(run_diff(base, cur))
    assert re.search(r"\(\+\d+\.\d%;", slower), slower
