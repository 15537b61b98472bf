"""The user-facing examples work: the minimal workload runs, the CI workflow calls real options."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from bubblescope.cli import app
from bubblescope.records.run_record import load_record
from bubblescope.workload import Workload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_minimal_user_workload_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES / "my_workload"))
    sys.modules.pop("my_workload", None)
    import my_workload

    assert isinstance(my_workload.make_workload(device="cpu"), Workload)
    args = [
        "run",
        "--workload",
        "my_workload:make_workload",
        "--steps",
        "4",
        "--warmup",
        "1",
        "--repeats",
        "2",
        "--profile-steps",
        "2",
        "--out",
        str(tmp_path / "r"),
    ]
    # On CUDA the baseline blocks twice a step: `.item()`, then the pageable host-to-device copy of the
    # next input (torch.tensor(..., device="cuda")), which waits for the stream as well.
    baseline_reads = 2.0 if torch.cuda.is_available() else 1.0
    for toggle, reads in ((None, baseline_reads), ("keep_on_device", 0.0)):
        # --force: the second configuration replaces the first run in the same folder.
        result = CliRunner().invoke(app, args + (["--toggles", toggle, "--force"] if toggle else []))
        assert result.exit_code == 0, result.output
        assert load_record(tmp_path / "r")["analysis"]["blocking_reads_per_step"] == reads


def test_workflow_uses_existing_options() -> None:
    workflow = (EXAMPLES / "github-actions" / "bubblescope-gate.yml").read_text()
    assert "$GITHUB_STEP_SUMMARY" in workflow and "--format markdown" in workflow
    gate_help = CliRunner().invoke(app, ["gate", "--help"]).output
    run_help = CliRunner().invoke(app, ["run", "--help"]).output
    for option in set(re.findall(r"bubblescope gate .*?(--[a-z-]+)", workflow, flags=re.S)):
        assert option in gate_help
    for option in ("--workload", "--steps", "--warmup", "--repeats", "--profile-steps", "--out"):
        assert option in workflow and option in run_help
    for option in ("--baseline", "--current", "--max-regression", "--format"):
        assert option in workflow and option in gate_help
