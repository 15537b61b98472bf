"""Count device readbacks per step in a CPU trace (no torch import; part of the analysis core, so the
gate and capture both use it).

A CPU trace has no CUDA sync events, but the ATen ops that would block the host on a GPU are
there (`aten::item`, `aten::_local_scalar_dense`, `aten::nonzero`, ...). Counting them per
`bubblescope.step` gives the exact number of blocking reads the same code performs on a GPU, which
is what the gate compares. Only the outermost readback op counts (`aten::item` calls
`aten::_local_scalar_dense`: one read, not two). The site is the innermost enclosing Python frame
outside torch and bubblescope's own capture code, written like the analysis does: `file.py(line): fn`.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from bubblescope.errors import TraceError

STEP_MARKER = "bubblescope.step"

# op -> (kind, hint). Kinds match the analysis' sync kinds where one exists.
READBACK_OPS: dict[str, tuple[str, str]] = {
    "aten::item": ("item", "keep the value on device, or read it one step late through pinned memory"),
    "aten::_local_scalar_dense": ("item", "keep the value on device, or read it one step late"),
    "aten::nonzero": ("nonzero", "use a fixed-size mask or torch.nonzero_static"),
    "aten::is_nonzero": (
        "item",
        "a Python bool of a tensor reads it back; branch on device with torch.where",
    ),
    "aten::equal": ("item", "torch.equal reads back; compare on device"),
    "aten::allclose": ("item", "allclose reads back; keep checks out of the decode loop"),
    "aten::masked_select": ("nonzero", "output size depends on data; use torch.where with a fixed shape"),
    "aten::unique": ("nonzero", "output size depends on data; avoid in the decode loop"),
    "aten::_unique2": ("nonzero", "output size depends on data; avoid in the decode loop"),
    "aten::repeat_interleave": ("nonzero", "pass output_size= so no readback is needed"),
}

_SKIPPED_FRAME_PARTS = ("torch/", "bubblescope/capture/", "<built-in", "contextlib.py", "nvtx/", "typing.py")


def load_trace_events(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a Kineto/Chrome trace (plain or gzip) and return its `traceEvents`, with one-line errors.

    Read by `trace.load`: regular files only, within the decompression cap (`--max-decompressed-mb`).
    """
    from bubblescope.trace.events import decode_value
    from bubblescope.trace.load import read_trace_bytes

    trace_path = Path(path)
    if not trace_path.is_file():
        raise TraceError(f"trace not found: {trace_path}")
    data = decode_value(read_trace_bytes(trace_path), trace_path)
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise TraceError(f"{trace_path}: no traceEvents list")
    return [e for e in events if isinstance(e, dict)]


def _span(event: dict[str, Any]) -> tuple[float, float]:
    start_us = float(event.get("ts", 0.0))
    return start_us, start_us + float(event.get("dur", 0.0) or 0.0)


def _site(op: dict[str, Any], frames: list[dict[str, Any]]) -> str:
    """Innermost user Python frame enclosing `op` on the same thread."""
    op_start, op_end = _span(op)
    best: tuple[float, str] | None = None
    for frame in frames:
        if frame.get("tid") != op.get("tid"):
            continue
        start, end = _span(frame)
        name = str(frame.get("name", ""))
        if start <= op_start and op_end <= end and not any(part in name for part in _SKIPPED_FRAME_PARTS):
            if best is None or start >= best[0]:
                best = (start, name)
    if best is None:
        return "unknown"
    file_part, paren, rest = best[1].partition("(")
    return os.path.basename(file_part) + paren + rest


def count_readbacks(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Count outermost readback ops per `bubblescope.step` in a trace.

    Returns:
        {"steps": n, "per_step": [count per step], "blocking_reads_per_step": mean,
         "syncs": [analysis/1-shaped sync entries, sorted by count]}.
    Raises:
        TraceError: unreadable trace, or no `bubblescope.step` annotation.
    """
    events = [e for e in load_trace_events(path) if e.get("ph") == "X"]
    steps = sorted(
        (e for e in events if e.get("name") == STEP_MARKER and e.get("cat") == "user_annotation"),
        key=lambda e: float(e.get("ts", 0.0)),
    )
    if not steps:
        raise TraceError(f"{path}: no {STEP_MARKER} annotations; cannot count readbacks per step")
    ops = sorted(
        (e for e in events if e.get("cat") == "cpu_op" and e.get("name") in READBACK_OPS),
        key=lambda e: float(e.get("ts", 0.0)),
    )
    frames = [e for e in events if e.get("cat") == "python_function"]
    per_step = [0] * len(steps)
    by_site: Counter[tuple[str, str]] = Counter()
    for index, op in enumerate(ops):
        op_start, op_end = _span(op)
        # Nested inside another readback op on the same thread: part of that read.
        if any(
            o.get("tid") == op.get("tid") and _span(o)[0] <= op_start and op_end <= _span(o)[1]
            for o in ops[max(0, index - 4) : index]
        ):
            continue
        for step_index, step in enumerate(steps):
            step_start, step_end = _span(step)
            if step_start <= op_start < step_end:
                per_step[step_index] += 1
                by_site[(_site(op, frames), str(op["name"]))] += 1
                break
    syncs = []
    for (site, op_name), count in by_site.most_common():
        kind, hint = READBACK_OPS[op_name]
        syncs.append(
            {
                "site": site,
                "op": op_name,
                "kind": kind,
                "api": "none (CPU trace)",
                "count": count,
                "per_step": count / len(steps),
                "blocked_ns": 0,
                "bubble_ns": 0,
                "hint": hint,
            }
        )
    return {
        "steps": len(steps),
        "per_step": per_step,
        "blocking_reads_per_step": sum(per_step) / len(steps),
        "syncs": syncs,
    }
