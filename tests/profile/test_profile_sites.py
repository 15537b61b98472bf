"""Merging the read tap's stacks into a CUDA trace's analysis (built traces, no torch needed).

The trace is the `item_sync` scenario (a `.item()` whose cudaStreamSynchronize runs 24-45 µs inside
the step [0, 100] µs) plus what a profile session adds: a `bubblescope.read#0` annotation around the
read, a `bubblescope.read#1` around a call that never blocked, and bubblescope's own drain (an
`bubblescope.own_sync` annotation around a cudaDeviceSynchronize after the step).
"""

from __future__ import annotations

from pathlib import Path

from bubblescope.profiling.read_sites import analyze_with_read_sites, describe_call
from tests.trace import scenarios
from tests.trace.builder import US


def _frame(file: str, line: int, function: str, cls: str, qualname: str | None = None) -> dict:
    return {"file": file, "line": line, "function": function, "qualname": qualname or function, "class": cls}


USER_FRAMES = [
    _frame("/venv/lib/python3.12/site-packages/torch/_tensor.py", 1100, "__bool__", "torch"),
    _frame(
        "/venv/lib/python3.12/site-packages/transformers/generation/utils.py",
        383,
        "__call__",
        "library",
        "StopCheck.__call__",
    ),
    _frame(
        "/venv/lib/python3.12/site-packages/transformers/generation/utils.py",
        3083,
        "_sample",
        "library",
        "GenerationMixin._sample",
    ),
    _frame("/home/user/app.py", 14, "step", "user"),
    _frame("/home/user/app.py", 40, "<module>", "user"),
    _frame("<frozen runpy>", 88, "_run_code", "stdlib"),
    _frame("/work/bubblescope/profiling/script.py", 70, "run_in_process", "bubblescope"),
    _frame("/home/user/app.py", 99, "outer_caller_below_plumbing", "user"),
]
CALLS = [
    {"read_id": 0, "op": "Tensor.__bool__", "kind": "item", "step": 0, "frames": USER_FRAMES},
    {"read_id": 1, "op": "Tensor.to", "kind": "copy", "step": 0, "frames": USER_FRAMES[3:]},
]


def _trace(tmp_path: Path) -> Path:
    b = scenarios.item_sync()
    b.annotation("bubblescope.read#0", 19 * US, 51 * US)
    b.annotation("bubblescope.read#1", 52 * US, 55 * US)
    b.annotation("bubblescope.own_sync", 101 * US, 120 * US)
    b.device_synchronize(102 * US, 110 * US)
    return b.write(tmp_path / "trace.json")


def test_describe_call_splits_user_line_library_line_and_chain() -> None:
    info = describe_call(CALLS[0])
    assert info["site"] == "app.py(14): step"
    assert info["read_at"] == "transformers/generation/utils.py(383): __call__"
    # Innermost first, torch frames out, and nothing past runpy/bubblescope plumbing.
    assert info["stack"] == [
        "transformers/generation/utils.py(383): StopCheck.__call__",
        "transformers/generation/utils.py(3083): GenerationMixin._sample",
        "app.py(14): step",
        "app.py(40): <module>",
    ]
    assert info["display"] == "app.py(14): step → transformers/generation/utils.py(383): __call__"


def test_cuda_read_takes_the_enclosing_calls_exact_line(tmp_path: Path) -> None:
    analysis = analyze_with_read_sites(_trace(tmp_path), CALLS, cuda_run=True)
    assert len(analysis["syncs"]) == 1, analysis["syncs"]
    row = analysis["syncs"][0]
    assert row["site"] == "app.py(14): step"
    assert row["read_at"] == "transformers/generation/utils.py(383): __call__"
    assert row["line"] == "exact" and row["op"] == "aten::item"
    # The scenario's hand-worked numbers survive the merge. Blocked 21 µs: the cudaStreamSynchronize
    # 24-45 (the pinned copy's cudaMemcpyAsync 21-24 does not block). Bubble, the lost lead of the
    # bounded rule (docs/analysis.md): aten::item begins at r0 = 20, the device drains when the copy
    # ends at d = 41, L = min(41 - 20, 21) = 21; of the gap [41, 67) before kC (launched 60-65), 21 is
    # sync, [62, 65) host, [65, 67) launch. (26 µs, the whole gap, was the unbounded rule's answer.)
    assert row["blocked_ns"] == 21 * US and row["bubble_ns"] == 21 * US
    assert row["per_step"] == 1.0
    sites = analysis["read_sites"]
    assert sites["matched_reads"] == 1 and sites["unmatched_trace_reads"] == 0
    assert sites["not_blocking"] == [
        {"site": "app.py(14): step", "read_at": "app.py(14): step", "op": "Tensor.to", "count": 1}
    ]


def test_without_stacks_the_def_line_stays(tmp_path: Path) -> None:
    analysis = analyze_with_read_sites(_trace(tmp_path), [], cuda_run=True)
    rows = analysis["syncs"]
    assert len(rows) == 1 and rows[0]["line"] == "def" and rows[0]["stack"] is None
    assert rows[0]["site"] == "app.py(12): step"  # the trace's frame: the function's def line
