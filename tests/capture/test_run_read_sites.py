"""`run` / `ablate` name the exact line of each blocking read (the read tap, profiled window only).

The toy workload's planted reads are `.item()` calls at two lines of `ToyWorkload.step`; the expected
lines are found in the toy's source text (tests/capture/toy_lines.py), never taken from the tool's
output. CPU only: a CPU run counts the readbacks the same code makes on a GPU, from the trace's ATen ops.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from bubblescope.analysis.readbacks import count_readbacks
from bubblescope.capture.measure import RunSettings, measure_config
from bubblescope.capture.profiled import profile_window
from bubblescope.examples.toy_workload import make_workload
from bubblescope.gate import evaluate_gate, gate_diff, load_gate_input
from bubblescope.profiling.run_sites import load_read_calls, read_calls_path
from tests.capture.toy_lines import EXPECTED, PLANTED, TOKEN_READ

pytestmark = pytest.mark.cpu_only
INFO = {"name": "toy", "factory": "bubblescope.examples.toy_workload:make_workload", "preset": "tiny"}


SETTINGS = RunSettings(steps=3, warmup=1, repeats=1, profile_steps=3)


def _measure(folder: Path, read_sites: bool) -> dict:
    settings = RunSettings(**{**SETTINGS.__dict__, "read_sites": read_sites})
    record, _notices = measure_config(
        make_workload("tiny", device="cpu"),
        frozenset({"planted_sync"}),
        settings=settings,
        record_path=folder / "record.json",
        workload_info=INFO,
        bandwidth=None,
    )
    return record


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One run with the tap (default) and one with `read_sites=False`, same switches."""
    root = tmp_path_factory.mktemp("runs")
    _measure(root / "on", True)
    _measure(root / "off", False)
    return {"on": root / "on", "off": root / "off"}


def _record(folder: Path) -> dict:
    return json.loads((folder / "record.json").read_text())


def test_window_writes_the_calls_and_removes_the_tap(tmp_path: Path) -> None:
    import torch

    original = torch.Tensor.item
    toy = make_workload("tiny", device="cpu")
    toy.prepare(frozenset({"planted_sync"}))
    profile_window(
        toy,
        steps=2,
        warmup=1,
        trace_path=tmp_path / "x.trace.json.gz",
        read_calls_path=read_calls_path(tmp_path / "x.trace.json.gz"),
    )
    assert torch.Tensor.item is original, "the tap must be gone after the window"
    with gzip.open(tmp_path / "x.read_calls.json.gz", "rt") as handle:
        calls = json.load(handle)
    # Two recorded steps × two planted reads; step 0 of the window (not recorded) left out.
    assert [(c["step"], c["frames"][0]["line"]) for c in calls] == [
        (0, PLANTED),
        (0, TOKEN_READ),
        (1, PLANTED),
        (1, TOKEN_READ),
    ]
    assert {c["op"] for c in calls} == {"Tensor.item"}


def test_timed_steps_never_run_with_the_tap(tmp_path: Path) -> None:
    import torch

    from bubblescope.capture import user_reads

    original = torch.Tensor.item
    toy = make_workload("tiny", device="cpu")
    seen: list[str] = []
    step = toy.step

    def watched_step() -> int:
        state = user_reads._STATE
        installed = torch.Tensor.item is not original
        seen.append("recording" if installed and state.recording else "installed" if installed else "off")
        return step()

    toy.step = watched_step
    settings = RunSettings(steps=4, warmup=2, repeats=2, profile_steps=2)
    measure_config(
        toy,
        frozenset(),
        settings=settings,
        record_path=tmp_path / "record.json",
        workload_info=INFO,
        bandwidth=None,
    )
    timed = ["off"] * (settings.repeats * (settings.warmup + settings.steps))
    # The window: its warm-up steps before the profiler, one profiled step not recorded, then the
    # recorded steps: only those record reads.
    window = ["off"] * min(settings.warmup, 4) + ["installed"] + ["recording"] * settings.profile_steps
    assert seen == timed + window
    assert torch.Tensor.item is original


def test_rows_carry_the_exact_lines_and_keep_their_site(runs: dict[str, Path]) -> None:
    on, off = _record(runs["on"]), _record(runs["off"])
    assert on["settings"]["read_sites"] is True and off["settings"]["read_sites"] is False
    counted = count_readbacks(runs["on"] / "trace.json.gz")
    rows = on["analysis"]["syncs"]
    # Same rows as the trace's own count: site, op, count, per step.
    assert [(r["site"], r["op"], r["count"], r["per_step"]) for r in rows] == [
        (r["site"], r["op"], r["count"], r["per_step"]) for r in counted["syncs"]
    ]
    (row,) = rows
    assert row["line"] == "exact" and row["count"] == 6 and row["per_step"] == 2.0
    lines = {e["line_exact"]: e for e in row["lines_exact"]}
    assert set(lines) == EXPECTED
    assert all(e["count"] == 3 and e["per_step"] == 1.0 for e in lines.values())
    assert lines[f"toy_workload.py({PLANTED}): step"]["stack"] == [
        f"toy_workload.py({PLANTED}): ToyWorkload.step"
    ]
    assert row["line_exact"] in EXPECTED and row["read_at"] == row["line_exact"]
    stats = on["analysis"]["read_sites"]
    assert (stats["tapped_calls"], stats["trace_reads"], stats["matched_reads"]) == (6, 6, 6)
    assert (runs["on"] / "read_calls.json.gz").is_file()


def test_tap_off_leaves_the_analysis_as_before(runs: dict[str, Path]) -> None:
    off = _record(runs["off"])
    assert not (runs["off"] / "read_calls.json.gz").exists()
    assert off["analysis"]["read_sites"] is None
    counted = count_readbacks(runs["off"] / "trace.json.gz")
    assert off["analysis"]["syncs"] == counted["syncs"]
    assert "read_sites" not in json.loads((runs["off"] / "analysis.json").read_text())


def test_gate_sees_the_same_reads_with_the_tap_on_or_off(runs: dict[str, Path]) -> None:
    """The gate keys reads by "site [op]": a baseline without exact lines still matches site for site."""
    baseline, current = load_gate_input(runs["off"]), load_gate_input(runs["on"])
    for first, second in ((baseline, current), (current, baseline)):
        reads = evaluate_gate(first, second, n_boot=50)["checks"][0]
        assert reads["status"] == "pass" and reads["increased_sites"] == []
        assert reads["baseline_per_step"] == reads["current_per_step"] == 2.0
    diff = gate_diff(baseline, current)["reads"]
    assert diff["added"] == [] and diff["removed"] == []


def test_a_stale_calls_file_is_removed_when_the_tap_is_off(tmp_path: Path) -> None:
    stale = tmp_path / "read_calls.json.gz"
    stale.write_bytes(gzip.compress(b"[]"))
    record = _measure(tmp_path, False)
    assert not stale.exists() and record["analysis"]["read_sites"] is None


@pytest.mark.parametrize(
    "payload",
    [b"not json", json.dumps({"calls": []}).encode(), json.dumps([{"read_id": "0", "op": "x"}]).encode()],
)
def test_a_damaged_calls_file_is_a_warning(tmp_path: Path, payload: bytes) -> None:
    trace = tmp_path / "k.trace.json.gz"
    (tmp_path / "k.read_calls.json.gz").write_bytes(gzip.compress(payload))
    calls, warning = load_read_calls(trace)
    assert calls is None and warning.startswith("read sites left out: ")
    assert "\n" not in warning


def test_damaged_calls_keep_the_run_analysis(runs: dict[str, Path], tmp_path: Path) -> None:
    from bubblescope.capture.measure import analysis_block

    folder = tmp_path / "copy"
    folder.mkdir()
    (folder / "trace.json.gz").write_bytes((runs["on"] / "trace.json.gz").read_bytes())
    (folder / "read_calls.json.gz").write_bytes(gzip.compress(b"[1, 2]"))
    block, full = analysis_block(folder / "trace.json.gz", on_cuda=False)
    assert block["read_sites"] is None and block["blocking_reads_per_step"] == 2.0
    assert "line_exact" not in block["syncs"][0]
    assert any(w.startswith("read sites left out") for w in full["warnings"])


@pytest.mark.parametrize(
    ("trace", "calls"),
    [
        ("trace.json.gz", "read_calls.json.gz"),
        ("baseline.trace.json.gz", "baseline.read_calls.json.gz"),
        ("trace.rank1.json.gz", "trace.rank1.read_calls.json.gz"),
        ("mine.json", "mine.read_calls.json.gz"),
    ],
)
def test_calls_file_names(tmp_path: Path, trace: str, calls: str) -> None:
    assert read_calls_path(tmp_path / trace) == tmp_path / calls


def test_tp_rename_moves_the_calls_with_the_trace(tmp_path: Path) -> None:
    from bubblescope.capture.tp_merge import _move_read_calls

    (tmp_path / "rank1.read_calls.json.gz").write_bytes(gzip.compress(b"[]"))
    _move_read_calls(tmp_path / "rank1.trace.json.gz", tmp_path / "trace.rank1.json.gz")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.rank1.read_calls.json.gz"]
