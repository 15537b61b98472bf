"""Reports of what the other parts really write: the toy workload through `bubblescope ablate` (CPU),
then `bubblescope report` on the ablation folder, one of its RunRecords and its raw trace."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bubblescope.cli import app
from tests.report.helpers import chromium_path, load_in_chromium

runner = CliRunner(env={"COLUMNS": "400"})
TOY_WORKLOAD = "bubblescope.examples.toy_workload:make_workload"

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None
    or importlib.util.find_spec("bubblescope.analysis.traces") is None,
    reason="needs torch and bubblescope.analysis.traces to produce real records",
)


@pytest.fixture(scope="module")
def toy_ablation(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("toy") / "ablation"
    args = [
        "ablate",
        "--workload",
        TOY_WORKLOAD,
        "--toggles",
        "no_readback,planted_sync",
        "--steps",
        "4",
        "--warmup",
        "1",
        "--repeats",
        "1",
        "--profile-steps",
        "1",
        "--out",
        str(out),
        "--format",
        "json",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert (out / "ablation.json").is_file()
    return out


def test_report_of_real_ablation_run_and_trace(toy_ablation: Path, tmp_path: Path) -> None:
    base_record = toy_ablation / "runs" / "base.json"
    traces = sorted((toy_ablation / "runs").glob("*.trace.json.gz"))
    assert base_record.is_file() and traces
    out = tmp_path / "real.html"
    result = runner.invoke(
        app, ["report", str(toy_ablation), str(base_record), str(traces[0]), "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert page.count("<h1>") == 3
    for text in ("TPOT waterfall", "no_readback", "planted_sync", "toy_workload.py(", "aten::item"):
        assert text in page, text
    md = runner.invoke(app, ["report", str(toy_ablation), "--format", "markdown"])
    assert md.exit_code == 0 and "| no\\_readback |" in md.output and "### TPOT waterfall" in md.output
    if chromium_path() is None:
        pytest.skip("chromium not installed: page content checked, browser load skipped")
    loaded = load_in_chromium(out)
    assert loaded.html_attr("data-js-errors") == "0", loaded.html_attr("data-js-first-error")
    assert loaded.body_attr("data-figures-rendered") == str(page.count('<div class="figure" id="bs-fig-'))
