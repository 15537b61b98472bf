"""Exact lines merged into a run's CUDA analysis (built trace, no GPU, no torch needed).

One step [0, 300] µs of `/home/user/app.py(12): step` with three `.item()` reads:
- r0 host 20-50, cudaStreamSynchronize 24-45 (blocked 21 µs); kA runs until 40 and the copy until 41,
  so the device drains at 41 and the next kernel (kB, launched 60-65) starts at 67: sync bubble
  min(41 - 20, 21) = 21 µs. The tap's `bubblescope.read#0` (19-51) encloses it: app.py line 30.
- r1 host 100-150, sync 104-135 (blocked 31 µs); kB runs until 130, the copy until 131, kC is
  launched 160-165: bubble min(131 - 100, 31) = 31 µs. `bubblescope.read#1` (99-151): a library
  helper at lib/util.py line 77 called from app.py line 31.
- r2 host 210-250, sync 214-225 (blocked 11 µs), device already idle (kC ended at 200): no tap
  annotation encloses it (a read made inside C++), so it keeps only the trace's site.
"""

from __future__ import annotations

from pathlib import Path

from bubblescope.analysis.traces import analyze_traces
from bubblescope.profiling.run_sites import analyze_run_trace
from tests.trace.builder import US, TraceBuilder
from tests.trace.scenarios import ITEM_OPS


def _frame(file: str, line: int, function: str, cls: str) -> dict:
    return {"file": file, "line": line, "function": function, "qualname": function, "class": cls}


TORCH = _frame("/venv/lib/python3.12/site-packages/torch/_tensor.py", 1100, "item", "torch")
CALLS = [
    {
        "read_id": 0,
        "op": "Tensor.item",
        "kind": "item",
        "step": 0,
        "frames": [
            TORCH,
            _frame("/home/user/app.py", 30, "step", "user"),
            _frame("/home/user/app.py", 50, "<module>", "user"),
        ],
    },
    {
        "read_id": 1,
        "op": "Tensor.item",
        "kind": "item",
        "step": 0,
        "frames": [
            TORCH,
            _frame("/venv/lib/python3.12/site-packages/lib/util.py", 77, "check", "library"),
            _frame("/home/user/app.py", 31, "step", "user"),
            _frame("/home/user/app.py", 50, "<module>", "user"),
        ],
    },
]


def _trace(tmp_path: Path) -> Path:
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 300 * US)
    b.frame("/home/user/app.py(12): step", 0, 300 * US)
    b.kernel("kA", (5 * US, 10 * US), (12 * US, 40 * US))
    b.annotation("bubblescope.read#0", 19 * US, 51 * US)
    b.blocking_read(ITEM_OPS, (20 * US, 50 * US), (21 * US, 24 * US), (40 * US, 41 * US), (24 * US, 45 * US))
    b.kernel("kB", (60 * US, 65 * US), (67 * US, 130 * US))
    b.annotation("bubblescope.read#1", 99 * US, 151 * US)
    b.blocking_read(
        ITEM_OPS, (100 * US, 150 * US), (101 * US, 104 * US), (130 * US, 131 * US), (104 * US, 135 * US)
    )
    b.kernel("kC", (160 * US, 165 * US), (167 * US, 200 * US))
    b.blocking_read(
        ITEM_OPS, (210 * US, 250 * US), (211 * US, 214 * US), (214 * US, 215 * US), (214 * US, 225 * US)
    )
    b.kernel("kD", (260 * US, 265 * US), (267 * US, 280 * US))
    return b.write(tmp_path / "trace.json")


ADDED = ("line_exact", "read_at", "stack", "line", "lines_exact")


def test_the_row_keeps_its_site_and_lists_its_exact_lines(tmp_path: Path) -> None:
    analysis = analyze_run_trace(_trace(tmp_path), CALLS, cuda_run=True)
    (row,) = analysis["syncs"]
    assert row["site"] == "app.py(12): step" and row["count"] == 3 and row["per_step"] == 3.0
    assert row["line"] == "partial", "r2 has no tapped call"
    assert [
        (e["line_exact"], e["read_at"], e["count"], e["per_step"], e["blocked_ns"], e["bubble_ns"])
        for e in row["lines_exact"]
    ] == [
        ("app.py(31): step", "lib/util.py(77): check", 1, 1.0, 31 * US, 31 * US),
        ("app.py(30): step", "app.py(30): step", 1, 1.0, 21 * US, 21 * US),
    ]
    assert row["lines_exact"][0]["stack"] == [
        "lib/util.py(77): check",
        "app.py(31): step",
        "app.py(50): <module>",
    ]
    assert (row["line_exact"], row["read_at"]) == ("app.py(31): step", "lib/util.py(77): check")
    stats = analysis["read_sites"]
    assert (stats["tapped_calls"], stats["trace_reads"], stats["matched_reads"]) == (2, 3, 2)
    assert stats["unmatched_trace_reads"] == 1


def test_everything_else_is_the_plain_analysis(tmp_path: Path) -> None:
    """Rows, gaps, steps and summary as without the tap: the gate's and diff's inputs do not move."""
    trace = _trace(tmp_path)
    merged, plain = analyze_run_trace(trace, CALLS, cuda_run=True), analyze_traces([trace])
    assert [{k: v for k, v in r.items() if k not in ADDED} for r in merged["syncs"]] == plain["syncs"]
    merged.pop("read_sites")
    assert {k: v for k, v in merged.items() if k != "syncs"} == {
        k: v for k, v in plain.items() if k != "syncs"
    }


def test_no_enclosing_call_keeps_the_def_site(tmp_path: Path) -> None:
    analysis = analyze_run_trace(_trace(tmp_path), [], cuda_run=True)
    (row,) = analysis["syncs"]
    assert row["line"] == "def" and row["lines_exact"] == [] and row["line_exact"] is None
    assert row["site"] == "app.py(12): step"
