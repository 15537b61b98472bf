"""`bubblescope run` through typer's CliRunner: files written, exit codes, CPU messages."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bubblescope.cli import app
from bubblescope.cli.run import record_json
from bubblescope.errors import BubblescopeError
from bubblescope.records.run_record import load_record
from bubblescope.report.findings import fix_first
from bubblescope.report.run_rows import findings_analysis, tokens_per_step

TOY = ["--workload", "bubblescope.examples.toy_workload:make_workload", "--preset", "tiny"]
SAMPLE_RUNS = (
    Path(__file__).resolve().parents[1] / "reports" / "samples" / "ablation-ling3-flash-e256-h200" / "runs"
)
FAST = ["--steps", "6", "--warmup", "1", "--repeats", "2", "--profile-steps", "2"]


def _exit_code(result) -> int:
    """The code `bubblescope` exits with: BubblescopeError becomes its exit_code (2) in cli.main."""
    if isinstance(result.exception, BubblescopeError):
        return result.exception.exit_code
    return result.exit_code


@pytest.mark.cpu_only
def test_run_writes_record_and_trace(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", *TOY, *FAST, "--toggle", "planted_sync", "--out", str(out)])
    assert _exit_code(result) == 0, result.output
    record = load_record(out / "record.json")
    assert record["switches"]["enabled"] == ["planted_sync"]
    assert record["analysis"]["blocking_reads_per_step"] == 2.0
    assert record["analysis"]["gpu_measured"] is False
    assert (out / record["trace"]).is_file()
    assert "GPU bubbles not measured" in result.output
    assert "blocking reads / step: 2.00" in result.output
    assert not list(out.glob(".*.tmp")), "no temporary files left behind"


def test_run_json_prints_the_record(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["run", *TOY, *FAST, "--profile-steps", "0", "--format", "json", "--out", str(tmp_path / "r")]
    )
    assert _exit_code(result) == 0, result.output
    printed = json.loads(result.stdout)
    assert (
        printed["schema"] == "bubblescope.run/1" and printed["trace"] is None and printed["analysis"] is None
    )
    findings, bound = printed.pop("findings"), printed.pop("idle_bound")
    assert printed == json.loads((tmp_path / "r" / "record.json").read_text())
    # Without a profiled window nothing is found, and no GPU measurement bounds anything.
    assert findings == [] and bound is None


@pytest.mark.cpu_only
def test_run_json_lists_what_to_fix_first(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["run", *TOY, *FAST, "--toggle", "planted_sync", "--format", "json", "--out", str(tmp_path / "r")],
    )
    assert _exit_code(result) == 0, result.output
    findings = json.loads(result.stdout)["findings"]
    reads = [f for f in findings if f["kind"] == "blocking read"]
    # The planted reads, as the console's fix-first list names them; on CPU their saving is not measured.
    assert reads and all(f["saving_ns_per_token"] is None for f in reads), findings
    assert [f["rank"] for f in findings] == list(range(1, len(findings) + 1))


def test_run_json_findings_are_bounded_by_the_timed_step() -> None:
    """The committed H200 base run: the idle findings together stay within the timed idle per token."""
    record = json.loads((SAMPLE_RUNS / "base.json").read_text())
    printed = record_json(record)
    tokens = tokens_per_step(record)
    assert printed["idle_bound"]["source"] == "timed", printed["idle_bound"]
    idle = [f["saving_ns_per_token"] for f in printed["findings"] if f["bound"] == "idle"]
    assert idle, printed["findings"]
    assert sum(x for x in idle if x is not None) <= printed["idle_bound"]["timed_idle_ns"] / tokens + 1e-6
    # The same list the console prints for the run (one builder).
    assert printed["findings"] == fix_first(findings_analysis(record, None), tokens, limit=1_000_000)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--toggle", "nope"], "valid switches: no_readback, planted_sync, planted_sleep, graph_replay"),
        pytest.param(
            ["--toggle", "graph_replay"], "graph_replay needs a CUDA device", marks=pytest.mark.cpu_only
        ),
        (["--steps", "0"], "--steps >= 1"),
        (["--format", "xml"], "--format"),
        (["--toggle", "no_readback", "--all"], "either --toggles or --all"),
    ],
)
def test_run_bad_input_exits_2(tmp_path: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["run", *TOY, *FAST, *args, "--out", str(tmp_path / "r")])
    assert _exit_code(result) == 2
    # A bad --format is a usage error (its choices are listed), printed by click rather than raised.
    assert message in str(result.exception) or message in result.output
    assert not (tmp_path / "r" / "record.json").exists()


@pytest.mark.cpu_only
def test_run_all_on_cpu_leaves_out_gpu_switches(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["run", *TOY, *FAST, "--all", "--out", str(tmp_path / "r")])
    assert _exit_code(result) == 0, result.output
    assert load_record(tmp_path / "r")["switches"]["enabled"] == [
        "no_readback",
        "planted_sleep",
        "planted_sync",
    ]
    assert "leaves out switches that need a GPU: graph_replay" in result.output


def test_bad_workload_spec_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["run", "--workload", "no_such_module_xyz:make", "--out", str(tmp_path)])
    assert _exit_code(result) == 2 and "cannot import" in str(result.exception)


@pytest.mark.skipif(
    importlib.util.find_spec("bubblescope.reference_model.workload") is None,
    reason="reference workload not installed",
)
def test_default_run_on_cpu_uses_debug_preset_and_says_so(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("checks the CPU default")
    result = CliRunner().invoke(
        app,
        [
            "run",
            "--steps",
            "2",
            "--warmup",
            "1",
            "--repeats",
            "1",
            "--profile-steps",
            "1",
            "--out",
            str(tmp_path / "r"),
        ],
    )
    assert _exit_code(result) == 0, result.output
    assert "no CUDA device: running the tiny debug preset on CPU" in result.output
    assert load_record(tmp_path / "r")["preset"] == "debug"
