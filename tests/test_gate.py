"""Gate verdicts on fixture RunRecords and the CLI's exit codes (0 pass, 1 regression, 2 bad input)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bubblescope.errors import ConfigError, RecordError
from bubblescope.gate import parse_threshold, run_gate
from bubblescope.report.gate_markdown import render_gate_markdown

GATE = Path(__file__).parent / "data" / "gate"
BASE = str(GATE / "baseline.json")


def _check(verdict: dict, name: str) -> dict:
    return next(c for c in verdict["checks"] if c["name"] == name)


@pytest.mark.parametrize(
    ("current", "verdict", "reads", "tpot"),
    [
        ("baseline.json", "pass", "pass", "pass"),
        ("noise_only.json", "pass", "pass", "pass"),
        ("small_slowdown.json", "pass", "pass", "pass"),
        ("noisy_shift.json", "pass", "pass", "pass"),
        ("tpot_regression.json", "fail", "pass", "fail"),
        ("sync_regression.json", "fail", "fail", "pass"),
    ],
)
def test_gate_verdicts_on_fixture_records(current: str, verdict: str, reads: str, tpot: str) -> None:
    result = run_gate(BASE, str(GATE / current), "3%")
    assert result["verdict"] == verdict and result["exit_code"] == (1 if verdict == "fail" else 0)
    assert _check(result, "blocking_reads")["status"] == reads
    assert _check(result, "tpot")["status"] == tpot


def test_noisy_shift_passes_because_of_the_noise_not_the_threshold() -> None:
    tpot = _check(run_gate(BASE, str(GATE / "noisy_shift.json")), "tpot")
    assert tpot["ratio"]["est"] > 1.03 and tpot["ratio"]["lo"] <= 1.03
    assert "noise" in tpot["reason"]


def test_a_fix_is_not_a_regression() -> None:
    # Swapping sides: fewer reads and a faster TPOT must pass.
    assert run_gate(str(GATE / "sync_regression.json"), BASE)["verdict"] == "pass"
    assert run_gate(str(GATE / "tpot_regression.json"), BASE)["verdict"] == "pass"


def test_threshold_parsing() -> None:
    assert parse_threshold("3%") == pytest.approx(0.03)
    assert parse_threshold("0.05") == pytest.approx(0.05)
    with pytest.raises(ConfigError):
        parse_threshold("three")
    # A bare number above 1 could be 3% or 300%: refused, with a message saying how to write it.
    with pytest.raises(ConfigError, match="3%"):
        parse_threshold("3")
    assert parse_threshold("1") == pytest.approx(1.0) and parse_threshold("150%") == pytest.approx(1.5)
    # A 15% threshold lets the 10% regression through.
    assert run_gate(BASE, str(GATE / "tpot_regression.json"), "15%")["verdict"] == "pass"


def test_markdown_names_the_new_read_site_and_escapes_it() -> None:
    markdown = render_gate_markdown(run_gate(BASE, str(GATE / "sync_regression.json")))
    assert "regression" in markdown and "sampler.py(41): sample" in markdown
    assert "\\[aten::nonzero\\]" in markdown


def test_bad_inputs_are_record_errors(tmp_path: Path) -> None:
    with pytest.raises(RecordError):
        run_gate(BASE, str(tmp_path / "missing.json"))
    (tmp_path / "other.json").write_text(json.dumps({"schema": "bubblescope.diff/1"}))
    with pytest.raises(RecordError, match="schema"):
        run_gate(BASE, str(tmp_path / "other.json"))


def _main(monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    from bubblescope.cli import main

    monkeypatch.setattr(sys, "argv", ["bubblescope", "gate", *args])
    try:
        main()
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


@pytest.mark.parametrize(
    ("current", "code"),
    [("noise_only.json", 0), ("tpot_regression.json", 1), ("sync_regression.json", 1), ("missing.json", 2)],
)
def test_cli_exit_codes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], current: str, code: int
) -> None:
    assert (
        _main(monkeypatch, "--baseline", BASE, "--current", str(GATE / current), "--format", "json") == code
    )
    captured = capsys.readouterr()
    if code == 2:
        assert captured.err.startswith("bubblescope: error:") and len(captured.err.strip().splitlines()) == 1
    else:
        assert json.loads(captured.out)["exit_code"] == code


def test_cli_markdown_and_bad_options(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        _main(
            monkeypatch,
            "--baseline",
            BASE,
            "--current",
            str(GATE / "sync_regression.json"),
            "--format",
            "markdown",
        )
        == 1
    )
    assert capsys.readouterr().out.startswith("## ❌ bubblescope gate")
    assert _main(monkeypatch, "--baseline", BASE, "--current", BASE, "--max-regression", "lots") == 2
    capsys.readouterr()
    assert _main(monkeypatch, "--baseline", BASE, "--current", BASE, "--max-regression", "3") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ambiguous" in err
    assert _main(monkeypatch, "--baseline", BASE, "--current", BASE, "--format", "xml") == 2


def test_gate_on_cpu_traces_counts_reads_exactly_and_skips_tpot() -> None:
    verdict = run_gate(str(GATE / "base_cpu.trace.json.gz"), str(GATE / "sync_cpu.trace.json.gz"))
    reads, tpot = _check(verdict, "blocking_reads"), _check(verdict, "tpot")
    assert (
        verdict["exit_code"] == 1 and reads["baseline_per_step"] == 1.0 and reads["current_per_step"] == 2.0
    )
    assert tpot["status"] == "skipped"
    assert (
        run_gate(str(GATE / "sync_cpu.trace.json.gz"), str(GATE / "base_cpu.trace.json.gz"))["exit_code"] == 0
    )


def test_gate_mixes_a_record_and_a_trace() -> None:
    # A GPU record against a CPU trace counts reads two ways: refused (issue 18 §8). A CPU record
    # against a CPU trace is compared: tests/hostile/test_record_validation.py.
    with pytest.raises(RecordError, match="cannot be compared"):
        run_gate(str(GATE / "sync_regression.json"), str(GATE / "base_cpu.trace.json.gz"))


def test_gate_on_the_real_h200_trace_against_itself_passes(shared_dir: Path) -> None:
    trace = str(shared_dir / "data" / "h200_probe_trace.json.gz")
    verdict = run_gate(trace, trace)
    assert verdict["exit_code"] == 0 and _check(verdict, "blocking_reads")["baseline_per_step"] > 0


def test_cli_table_format(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code = _main(monkeypatch, "--baseline", BASE, "--current", str(GATE / "tpot_regression.json"))
    assert code == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "gate: fail" in out and "slower beyond the threshold and the noise" in out


def test_noise_wider_than_the_threshold_is_a_warning() -> None:
    noisy = run_gate(BASE, str(GATE / "noisy_shift.json"))
    assert any("exceeds the 3.0% threshold" in w for w in noisy["warnings"])
    quiet = run_gate(BASE, str(GATE / "noise_only.json"))
    assert not any("threshold" in w for w in quiet["warnings"])
