"""`bubblescope run` piped (not a terminal) prints the same summary as on a terminal (issue 25): a noisy
TPOT says so there too, the interval uses the same dash as every other surface, and counts take their
plural."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from bubblescope.report.console import make_console
from bubblescope.report.run_console import print_run_summary
from tests.report.helpers import MINIMAL_RUN_FILE


def _print_plain(record: dict, out_dir: Path, notices: list[str]) -> None:
    """The run summary as `bubblescope run | cat` prints it (no terminal), wide enough for one line."""
    print_run_summary(make_console(width=300), record, str(out_dir), notices)


def _tpot_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("TPOT "))


def _record(tpot_ms: float, lo_ms: float, hi_ms: float, tokens: int) -> dict:
    record = copy.deepcopy(json.loads(MINIMAL_RUN_FILE.read_text()))
    record["summary"].update(tpot_ms=tpot_ms, tpot_ci95_ms=[lo_ms, hi_ms], tokens=tokens)
    return record


def test_plain_line_flags_a_noisy_tpot(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # The CPU debug run of the README walk: 67.28 ms in [45.97, 99.86].
    _print_plain(_record(67.28, 45.97, 99.86, 192), tmp_path, [])
    first = _tpot_line(capsys.readouterr().out)
    # Digits to the interval's resolution (±27 ms): whole milliseconds, one unit after the range.
    assert first.startswith("TPOT 67\u00a0ms (")
    assert "46 – 100\u00a0ms" in first and "(noisy: ±" in first and "192 tokens in" in first


def test_plain_line_of_a_tight_tpot_has_no_noise_note(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _print_plain(_record(7.93, 7.867, 8.001, 1), tmp_path, [])
    first = _tpot_line(capsys.readouterr().out)
    assert "noisy" not in first and "1 token in" in first


def _cpu_record() -> dict:
    """What `bubblescope run` writes on CPU (the README walk's debug run): readbacks counted, no times."""
    record = copy.deepcopy(json.loads(MINIMAL_RUN_FILE.read_text()))
    record["analysis"] = {
        "blocking_reads_per_step": 1.0,
        "gpu_measured": False,
        "syncs": [
            {
                "site": "workload.py(142): step",
                "op": "aten::item",
                "api": "none (CPU trace)",
                "count": 4,
                "per_step": 1.0,
                "blocked_ns": 0,
                "bubble_ns": 0,
                "hint": "keep the value on device",
            }
        ],
    }
    record["switches"] = {
        "enabled": [],
        "available": [
            {"name": "no_readback", "help": "h", "replaces": "r", "needs_gpu": True, "usable": False},
            {"name": "bf16_gate", "help": "h", "replaces": "r", "needs_gpu": False, "usable": True},
        ],
    }
    return record


def test_cpu_reads_table_says_not_measured_not_zero() -> None:
    from bubblescope.report.html import render_run_html
    from bubblescope.report.markdown import run_markdown

    record = _cpu_record()
    for page in (render_run_html(record, None), run_markdown(record, None)):
        reads = page[page.index("Host-blocking reads") :]
        reads = reads[: reads.index("Switches")]
        assert "workload.py(142): step" in reads
        assert reads.count("not measured (no GPU)") == 2 and "0.0" not in reads
        switches = page[page.index("Switches") :]
        assert "False" not in switches and "True" not in switches


def test_gpu_reads_table_keeps_its_times() -> None:
    from bubblescope.report.reads_and_gaps_rows import sync_rows

    syncs = _cpu_record()["analysis"]["syncs"]
    syncs[0].update(blocked_ns=2_500, bubble_ns=1_000)
    _, rows = sync_rows(syncs)
    assert rows[0][5:7] == ["2.5\u00a0µs", "1.0\u00a0µs"]


def test_cpu_run_has_no_floor_ratio_card() -> None:
    from bubblescope.report.run_rows import run_summary_items

    record = _cpu_record()
    record["floor"] = {"floor_ms": 0.001, "tpot_over_floor": 7930.0, "bandwidth_source": "assumed H200"}
    labels = [label for label, _ in run_summary_items(record, None)]
    assert "TPOT ÷ floor" not in labels and "speed-of-light floor" in labels
