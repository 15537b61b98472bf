"""`ablate --reanalyze`: stale trace-derived fields are rebuilt from the stored traces, timings kept."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from bubblescope.ablate.plan import plan_ablation
from bubblescope.ablate.reanalyze import plan_of, reanalyze_ablation
from bubblescope.ablate.runner import run_ablation
from bubblescope.ablate.store import AblationStore, load_ablation
from bubblescope.capture.measure import RunSettings
from bubblescope.cli import app
from bubblescope.examples.toy_workload import make_workload

SETTINGS = RunSettings(steps=4, warmup=1, repeats=2, profile_steps=2)
INFO = {"name": "toy", "factory": "bubblescope.examples.toy_workload:make_workload", "preset": "tiny"}


def _ablation(tmp_path: Path) -> Path:
    plan = plan_ablation(["no_readback", "planted_sync"])
    run_ablation(
        make_workload("tiny"),
        plan,
        AblationStore(tmp_path),
        settings=SETTINGS,
        workload_info=INFO,
        bandwidth=None,
    )
    return tmp_path


def test_plan_is_rebuilt_from_the_manifest(tmp_path: Path) -> None:
    root = _ablation(tmp_path)
    manifest, _records = load_ablation(root)
    rebuilt = plan_of(manifest)
    assert [c.key for c in rebuilt.configs] == [c["key"] for c in manifest["configs"]]


def test_stale_analysis_is_rebuilt_and_samples_are_kept(tmp_path: Path) -> None:
    root = _ablation(tmp_path)
    manifest, records = load_ablation(root)
    before_reads = {key: r["analysis"]["blocking_reads_per_step"] for key, r in records.items()}
    before_samples = {key: r["samples_ns"] for key, r in records.items()}
    before_attribution = manifest["attribution"]
    # Corrupt what the analysis derived, as an older, buggy analysis would have written it.
    for key in records:
        path = root / "runs" / f"{key}.json"
        data = json.loads(path.read_text())
        data["analysis"]["blocking_reads_per_step"] = 99.0
        data["analysis"]["syncs"] = []
        path.write_text(json.dumps(data))
    attribution = reanalyze_ablation(root)
    _manifest, after = load_ablation(root)
    assert {key: r["analysis"]["blocking_reads_per_step"] for key, r in after.items()} == before_reads
    assert {key: r["samples_ns"] for key, r in after.items()} == before_samples
    assert attribution["switches"] == before_attribution["switches"]
    # The planted sync's read is back in the attribution: turning it on adds one read per step.
    planted = next(s for s in attribution["switches"] if s["name"] == "planted_sync")
    assert sum(planted["removed_reads_per_step"].values()) == -1.0


def test_cli_reanalyze_needs_out_and_rewrites_the_report(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["ablate", "--reanalyze"])
    assert result.exit_code != 0
    root = _ablation(tmp_path)
    result = CliRunner().invoke(app, ["ablate", "--reanalyze", "--out", str(root)])
    assert result.exit_code == 0, result.output
    assert "re-analysed" in result.output
    # The same page as `bubblescope report`: the baseline's and all-on's one-step timelines included.
    assert (root / "report.html").read_text().count("<h2>One decode step") == 2
