"""CLI habits (issue 25): --version, one spelling per option, outputs that never destroy, stderr for
notes, a closed pipe exits 0, Ctrl-C says what was saved and exits 130, honest hints."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import bubblescope.cli as cli
from bubblescope.cli import app, main
from bubblescope.cli.outputs import OutputError, check_out_folder

runner = CliRunner()
REPO = Path(__file__).resolve().parent.parent
GATE = REPO / "tests" / "data" / "gate"
ITEM_SYNC = REPO / "tests" / "data" / "item_sync" / "trace.json"


def _main(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> int:
    """`bubblescope ARGS` through the real entry point; returns the exit status."""
    monkeypatch.setattr(sys, "argv", ["bubblescope", *args])
    # main() re-raises unexpected exceptions under pytest; these tests look at the handled ones only.
    with pytest.raises(SystemExit) as exit_info:
        main()
    return int(exit_info.value.code or 0)


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"bubblescope {cli.package_version()}"


def test_one_spelling_per_option_with_old_spellings_hidden() -> None:
    run_help = runner.invoke(app, ["run", "--help"], env={"COLUMNS": "200"}).stdout
    ablate_help = runner.invoke(app, ["ablate", "--help"], env={"COLUMNS": "200"}).stdout
    assert "--toggles" in run_help and "--toggles" in ablate_help
    assert "--toggle " not in run_help.replace("--toggles", ""), "the old spelling is hidden"
    for command in ("run", "ablate", "report", "diff", "profile"):
        text = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"}).stdout
        assert "-o" in text and "--out" in text, command
        assert "--output " not in text, command
    # The old spellings still work: --toggle reaches the same check as --toggles.
    both = runner.invoke(app, ["run", "--toggles", "a", "--toggle", "b"])
    assert "give --toggles once" in str(both.exception)


def test_step_marker_help_says_full_match() -> None:
    for command in ("analyze", "report", "diff", "profile"):
        text = " ".join(runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"}).stdout.split())
        assert "full match" in text, command


def test_run_refuses_an_out_that_is_a_file_or_holds_a_run(tmp_path: Path) -> None:
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    result = runner.invoke(app, ["run", "-o", str(a_file)])
    assert result.exit_code == 2 and "is a file, not a folder" in result.output
    done = tmp_path / "done"
    done.mkdir()
    (done / "record.json").write_text("{}")
    result = runner.invoke(app, ["run", "--out", str(done)])
    assert result.exit_code == 2 and "already holds a result (record.json)" in result.output
    assert (done / "record.json").read_text() == "{}"
    # --force lets it through this check (the run itself is not started here).
    check_out_folder(done, holds="record.json", force=True)
    with pytest.raises(OutputError, match="is a file"):
        check_out_folder(a_file, force=True)


def test_ablate_refuses_a_file_but_resumes_a_folder(tmp_path: Path) -> None:
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    result = runner.invoke(app, ["ablate", "-o", str(a_file)])
    assert result.exit_code == 2 and "is a file" in result.output
    check_out_folder(tmp_path)  # an existing ablation folder is resumed, never refused


@pytest.mark.parametrize("command", ["report", "diff", "analyze"])
def test_output_file_into_a_missing_folder_is_refused(tmp_path: Path, command: str) -> None:
    target = tmp_path / "missing" / "x.out"
    args = {
        "report": ["report", str(ITEM_SYNC), "-o", str(target)],
        "diff": ["diff", str(ITEM_SYNC), str(ITEM_SYNC), "-o", str(target)],
        "analyze": ["analyze", str(ITEM_SYNC), "--annotate", str(target)],
    }[command]
    result = runner.invoke(app, args, env={"COLUMNS": "300"})
    assert result.exit_code == 2, result.output
    assert "does not exist; create the folder first" in " ".join(result.output.split())
    assert not (tmp_path / "missing").exists()


def test_report_output_old_spelling_still_works(tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    result = runner.invoke(app, ["report", str(ITEM_SYNC), "--output", str(page)])
    assert result.exit_code == 0 and page.is_file()


def test_analyze_warnings_on_stderr_table_on_stdout() -> None:
    # CUDA graph launches without kernel events: the analysis warns (stderr), its tables go to stdout.
    trace = REPO / "tests" / "data" / "graph_without_kernels" / "trace.json"
    result = runner.invoke(app, ["analyze", str(trace)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "warning:" in result.stderr and "warning:" not in result.stdout
    assert "bubblescope analyze" in result.stdout


class _ClosedPipe(io.StringIO):
    """stdout whose reader has gone: every write fails with EPIPE."""

    def __init__(self) -> None:
        super().__init__()
        self._devnull = os.open(os.devnull, os.O_WRONLY)

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self) -> int:
        return self._devnull

    def isatty(self) -> bool:
        return False


@pytest.mark.parametrize(("current", "status"), [("baseline.json", 0), ("tpot_regression.json", 1)])
def test_closed_pipe_exits_quietly_with_the_verdict(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], current: str, status: int
) -> None:
    """`gate ... | head -1`: a passing gate exits 0 (it exited 1, the regression code), a failing one 1."""
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    args = ["gate", "--baseline", str(GATE / "baseline.json"), "--current", str(GATE / current)]
    assert _main(monkeypatch, args) == status
    assert capsys.readouterr().err == ""


def test_closed_pipe_on_any_command_exits_0(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    assert _main(monkeypatch, ["analyze", str(ITEM_SYNC)]) == 0
    assert capsys.readouterr().err == ""


def test_ctrl_c_prints_one_line_naming_what_was_saved(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import bubblescope.gate as gate

    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(gate, "run_gate", interrupted)
    status = _main(monkeypatch, ["gate", "--baseline", str(GATE / "baseline.json"), "--current", "x"])
    assert status == 130
    assert capsys.readouterr().err == "bubblescope: interrupted; nothing was written\n"


def test_ctrl_c_during_an_ablation_names_the_saved_configurations(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bubblescope.cli.saved import note_saved

    def interrupted(*_args, **_kwargs):
        note_saved("2 configurations saved in out/abl; the same command resumes from there")
        raise KeyboardInterrupt

    import bubblescope.gate as gate

    monkeypatch.setattr(gate, "run_gate", interrupted)
    try:
        assert _main(monkeypatch, ["gate", "--baseline", "a", "--current", "b"]) == 130
    finally:
        note_saved(None)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "2 configurations saved in out/abl" in err


def test_report_bandwidth_is_used_for_runs_not_ignored(tmp_path: Path) -> None:
    record = json.loads((GATE / "baseline.json").read_text())
    record["floor"] = {
        "bytes_per_token": 2_000_000_000,
        "bandwidth_gbps": 4140.0,
        "bandwidth_source": "assumed (H200 copy ceiling)",
        "floor_ms": 0.483,
        "tpot_over_floor": 2.0,
    }
    path = tmp_path / "record.json"
    path.write_text(json.dumps(record))
    result = runner.invoke(app, ["report", str(path), "--format", "markdown", "--bandwidth", "2000"])
    assert result.exit_code == 0, result.output
    # 2 GB per token at 2000 GB/s: 1.000 ms (the record's own, assumed 4140 GB/s, gives 0.483 ms).
    assert "| speed-of-light floor | 1.000\u00a0ms |" in result.stdout
    plain = runner.invoke(app, ["report", str(path), "--format", "markdown"])
    assert "| speed-of-light floor | 1.000\u00a0ms |" not in plain.stdout
    unused = runner.invoke(
        app, ["report", str(GATE / "baseline.json"), "--format", "markdown", "--bandwidth", "1"]
    )
    assert unused.exit_code == 2 and "no input can use them" in " ".join(unused.output.split())


def test_run_has_the_bandwidth_and_threads_options_its_hints_name() -> None:
    text = runner.invoke(app, ["run", "--help"], env={"COLUMNS": "200"}).stdout
    assert "--bandwidth" in text and "--threads" in text and "--force" in text


def test_presets_caches_host_bandwidth_with_its_date(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import bubblescope.floor.host_bandwidth as host_bandwidth

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls: list[int] = []

    def measure(repeats: int = 3) -> float:
        calls.append(repeats)
        return 10.0 + len(calls)

    monkeypatch.setattr(host_bandwidth, "measure_host_copy_gbps", measure)
    first = host_bandwidth.host_bandwidth()
    second = host_bandwidth.host_bandwidth()
    assert (first.source, second.source, len(calls)) == ("measured", "cached", 1)
    assert second.gbps == first.gbps == 11.0 and second.measured_utc == first.measured_utc
    cache = json.loads((tmp_path / "bubblescope" / "host_bandwidth.json").read_text())
    assert cache["machines"][host_bandwidth.machine_key()]["gbps"] == 11.0
    again = host_bandwidth.host_bandwidth(remeasure=True)
    assert (again.source, again.gbps, len(calls)) == ("measured", 12.0, 2)
    # A corrupt cache is measured over, never an error.
    (tmp_path / "bubblescope" / "host_bandwidth.json").write_text("{not json")
    assert host_bandwidth.host_bandwidth().source == "measured"


def test_cache_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from bubblescope.floor.host_bandwidth import cache_dir

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "bubblescope"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "bubblescope"


def test_gpu_driver_check_needs_no_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    from bubblescope.floor import bandwidth

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert bandwidth.gpu_driver_present() is False
    assert bandwidth.machine_memory().kind == "cpu"


def test_floor_and_presets_import_no_torch_without_a_gpu(tmp_path: Path) -> None:
    import subprocess

    from bubblescope.floor.bandwidth import gpu_driver_present

    if gpu_driver_present():
        pytest.skip("a GPU driver is present: floor measures the GPU, which needs torch")
    code = (
        "import sys\n"
        "from bubblescope.cli import app\n"
        "app(['floor', '--format', 'json'], standalone_mode=False)\n"
        "app(['presets', '--format', 'json'], standalone_mode=False)\n"
        "print('TORCH', 'torch' in sys.modules)\n"
    )
    cache = tmp_path / "cache" / "bubblescope"
    cache.mkdir(parents=True)
    # A cached bandwidth: the subprocess does not spend a second measuring.
    (cache / "host_bandwidth.json").write_text(
        json.dumps(
            {
                "schema": "bubblescope.host_bandwidth/1",
                "machines": {_machine_key(): {"gbps": 10.0, "measured_utc": "2026-01-01T00:00:00Z"}},
            }
        )
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.strip().endswith("TORCH False"), done.stdout[-300:]
    assert '"host_copy_measured_utc": "2026-01-01T00:00:00Z"' in done.stdout


def _machine_key() -> str:
    from bubblescope.floor.host_bandwidth import machine_key

    return machine_key()


def test_cpu_threads_set_and_said() -> None:
    import torch

    from bubblescope.capture.threads import apply_cpu_threads

    class CpuWorkload:
        device = "cpu"

    before = torch.get_num_threads()
    try:
        line = apply_cpu_threads(CpuWorkload(), None)
        assert torch.get_num_threads() == 1 and line is not None and "1 intra-op thread" in line
        assert "2 intra-op threads (--threads" in (apply_cpu_threads(CpuWorkload(), 2) or "")
        assert torch.get_num_threads() == 2
        with pytest.raises(Exception, match="--threads must be >= 1"):
            apply_cpu_threads(CpuWorkload(), 0)
    finally:
        torch.set_num_threads(before)


def test_run_progress_in_a_pipe_is_one_line_per_stage() -> None:
    from bubblescope.capture.measure import RunSettings
    from bubblescope.report.console import make_console
    from bubblescope.report.run_console import run_progress

    buffer = io.StringIO()
    with run_progress(make_console(file=buffer, width=80), RunSettings(steps=5, repeats=2)) as progress:
        progress.repeat_done(0)
        progress.repeat_done(1)
        progress.phase("profiled window (4 steps) and its analysis")
    assert buffer.getvalue().splitlines() == [
        "timing 2 repeats of 5 steps",
        "timed repeat 1/2 done",
        "timed repeat 2/2 done",
        "profiled window (4 steps) and its analysis",
    ]


def test_a_read_outside_every_step_is_not_hinted_as_in_the_loop() -> None:
    import pandas as pd

    from bubblescope.detect.host_syncs import HINTS
    from bubblescope.ranks.reduce import OUTSIDE_STEPS_HINT, sync_entries

    def read(read_id: int, step: int, site: str) -> dict:
        return {
            "read_id": read_id,
            "step": step,
            "site": site,
            "op": "",
            "kind": "synchronize",
            "api": "cudaDeviceSynchronize",
            "blocked_ns": 2300,
            "bubble_ns": 0,
            "lost_lead_ns": 0,
            "drained": 0,
            "wait_ns": 0,
            "hint": HINTS["synchronize"],
            "inner_op": "",
        }

    # The case: an explicit synchronize in prepare_inputs (before the first step) and one in the loop.
    frame = pd.DataFrame(
        [read(0, -1, "prepare(utils.py)"), read(1, 0, "loop.py(3)"), read(2, 1, "loop.py(3)")]
    )
    rows = {row["site"]: row for row in sync_entries([frame], n_steps=2)}
    assert rows["prepare(utils.py)"]["per_step"] == 0
    assert rows["prepare(utils.py)"]["hint"] == OUTSIDE_STEPS_HINT
    assert rows["loop.py(3)"]["hint"] == HINTS["synchronize"] and rows["loop.py(3)"]["per_step"] == 1


def test_profile_refuses_an_out_that_is_a_file_before_running(tmp_path: Path) -> None:
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    marker = tmp_path / "ran"
    script = tmp_path / "s.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    result = runner.invoke(app, ["profile", "-o", str(a_file), "--", "python", str(script)])
    assert result.exit_code == 2 and "is a file" in result.output
    assert not marker.exists(), "the script never ran"
