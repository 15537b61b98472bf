"""Count device readbacks per step in a CPU trace (no torch import; part of the analysis core, so the
gate and capture both use it).

A CPU trace has no CUDA sync events, but the ATen ops that would block the host on a GPU are
there (`aten::item`, `aten::_local_scalar_dense`, `aten::nonzero`, ...). Counting them per
`bubblescope.step` gives the exact number of blocking reads the same code performs on a GPU, which
is what the gate compares. Only the outermost readback op counts (`aten::item` calls
`aten::_local_scalar_dense`: one read, not two). The site is the innermost enclosing Python frame
outside torch and bubblescope's own capture code, written like the analysis does: `file.py(line): fn`.

The trace is read by the analysis' streamed loader (`trace.load.stream_trace`: regular files only,
within the decompression cap, one chunk of typed events at a time), so a trace is never held as
dicts. Traces are untrusted: an event read here whose `ts`/`dur` is not a finite number in range is
refused with one line; one whose category, name or thread is a list or object is left out and counted.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

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

# Categories of events that only a GPU trace has: the gate analyses such a trace fully instead.
GPU_CATEGORIES = frozenset({"kernel", "cuda_runtime", "gpu_memcpy", "cuda_driver"})
_STEP_CATEGORY, _OP_CATEGORY, _FRAME_CATEGORY = "user_annotation", "cpu_op", "python_function"
_SKIPPED_FRAME_PARTS = ("torch/", "bubblescope/capture/", "<built-in", "contextlib.py", "nvtx/", "typing.py")
# |ts| and dur in µs: the analysis' table builder refuses the same range (ns must fit in int64).
_MAX_TIME_US = 9e15


class Span(NamedTuple):
    """One complete event read here: name, thread and [start, end) in µs."""

    name: str
    tid: Any
    start_us: float
    end_us: float


@dataclass
class CpuTrace:
    """What the readback count needs from a trace, read in one streamed pass.

    Attributes:
        path: the file.
        steps: `bubblescope.step` annotations, by start.
        ops: readback ops (READBACK_OPS), by start.
        frames: Python frames (`with_stack=True`), in file order.
        has_gpu: the trace holds GPU-side events (reading stopped at the first one).
        warnings: what was left out, one line per kind, with counts.
        markers: events whose name starts with the `marker_prefix` given to `read_cpu_trace` (the read
            tap's `bubblescope.read#N` ranges), in file order; empty when none was given.
    """

    path: Path
    steps: list[Span] = field(default_factory=list)
    ops: list[Span] = field(default_factory=list)
    frames: list[Span] = field(default_factory=list)
    markers: list[Span] = field(default_factory=list)
    has_gpu: bool = False
    warnings: list[str] = field(default_factory=list)


def _shown(value: Any) -> str:
    """A short description of a bad value (containers by type only: their repr can be huge or deep)."""
    if isinstance(value, (list, dict)):
        return f"a {type(value).__name__}"
    return f"{type(value).__name__} {value!r:.30}"


def _time_us(value: Any, key: str, name: str, cat: str, path: Path) -> float:
    """`ts`/`dur` as float µs; a TraceError naming the event when it is not a finite number in range."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if (
        number
        and math.isfinite(value)
        and -_MAX_TIME_US < value < _MAX_TIME_US
        and (key == "ts" or value >= 0)
    ):
        return float(value)
    what = f"lacks '{key}'" if value is None else f"has a bad '{key}' ({_shown(value)})"
    raise TraceError(f"{path}: event {name!r:.60} (cat {cat!r}) {what}")


def read_cpu_trace(
    path: str | os.PathLike[str], stop_at_gpu: bool = True, marker_prefix: str | None = None
) -> CpuTrace:
    """Read a Kineto/Chrome trace (plain or gzip) for the readback count, with one-line errors.

    Read by `trace.load.stream_trace`: regular files only, within the decompression cap
    (`--max-decompressed-mb`).

    Args:
        path: the trace file.
        stop_at_gpu: stop reading at the first GPU-side event (`has_gpu` set, nothing else complete):
            the gate analyses such a trace with the full analysis instead.
        marker_prefix: also keep complete events whose name starts with it (`CpuTrace.markers`).

    Raises:
        TraceError: missing, unreadable or malformed trace; a read event with a bad `ts` or `dur`.
    """
    from bubblescope.trace.load import stream_trace

    trace_path = Path(path)
    if not trace_path.exists():
        raise TraceError(f"trace not found: {trace_path}")
    found = CpuTrace(trace_path)
    left_out: Counter[str] = Counter()
    for chunk in stream_trace(trace_path).chunks():
        for event in chunk:
            cat = event.cat
            if not isinstance(cat, str):
                left_out["cat"] += isinstance(cat, (list, dict))
                continue
            if cat in GPU_CATEGORIES:
                found.has_gpu = True
                if stop_at_gpu:
                    return found
            marker = (
                marker_prefix is not None
                and event.ph == "X"
                and isinstance(event.name, str)
                and event.name.startswith(marker_prefix)
            )
            if not marker and (event.ph != "X" or cat not in (_STEP_CATEGORY, _OP_CATEGORY, _FRAME_CATEGORY)):
                continue
            span = _span(event, cat, trace_path, left_out)
            if span is None:
                continue
            if marker:
                found.markers.append(span)
                continue
            if cat == _FRAME_CATEGORY:
                found.frames.append(span)
            elif cat == _OP_CATEGORY and span.name in READBACK_OPS:
                found.ops.append(span)
            elif cat == _STEP_CATEGORY and span.name == STEP_MARKER:
                found.steps.append(span)
    found.steps.sort(key=lambda s: s.start_us)
    found.ops.sort(key=lambda s: s.start_us)
    found.warnings = [
        f"{count} events with a list or object as '{key}' were left out of the readback count"
        for key, count in sorted(left_out.items())
        if count
    ]
    return found


def _span(event: Any, cat: str, path: Path, left_out: Counter[str]) -> Span | None:
    """The event as a Span; None (counted in `left_out`) when its name or thread is a container."""
    name, tid = event.name, event.tid
    for key, value in (("name", name), ("tid", tid)):
        if isinstance(value, (list, dict)):
            left_out[key] += 1
            return None
    text = name if isinstance(name, str) else ("" if name is None else str(name))
    start_us = _time_us(event.ts, "ts", text, cat, path)
    dur = 0.0 if event.dur is None else _time_us(event.dur, "dur", text, cat, path)
    return Span(text, tid, start_us, start_us + dur)


def _site(op: Span, frames: list[Span]) -> str:
    """Innermost user Python frame enclosing `op` on the same thread."""
    best: tuple[float, str] | None = None
    for frame in frames:
        if frame.tid != op.tid:
            continue
        if (
            frame.start_us <= op.start_us
            and op.end_us <= frame.end_us
            and not any(part in frame.name for part in _SKIPPED_FRAME_PARTS)
        ):
            if best is None or frame.start_us >= best[0]:
                best = (frame.start_us, frame.name)
    if best is None:
        return "unknown"
    file_part, paren, rest = best[1].partition("(")
    return os.path.basename(file_part) + paren + rest


def counted_readbacks(trace: CpuTrace) -> list[tuple[int, Span, str]]:
    """(step index, op, site) of each readback `count_readbacks` counts, in start order.

    A readback op nested inside another one on the same thread is part of that read (`aten::item` calls
    `aten::_local_scalar_dense`); one outside every `bubblescope.step` is not counted.
    """
    ops, counted = trace.ops, []
    for index, op in enumerate(ops):
        if any(
            o.tid == op.tid and o.start_us <= op.start_us and op.end_us <= o.end_us
            for o in ops[max(0, index - 4) : index]
        ):
            continue
        for step_index, step in enumerate(trace.steps):
            if step.start_us <= op.start_us < step.end_us:
                counted.append((step_index, op, _site(op, trace.frames)))
                break
    return counted


def count_readbacks(path: str | os.PathLike[str] | CpuTrace) -> dict[str, Any]:
    """Count outermost readback ops per `bubblescope.step` in a trace.

    Args:
        path: the trace, or what `read_cpu_trace` already read from it.
    Returns:
        {"steps": n, "per_step": [count per step], "blocking_reads_per_step": mean,
         "syncs": [analysis/1-shaped sync entries, sorted by count], "warnings": [what was left out]}.
    Raises:
        TraceError: unreadable trace, or no `bubblescope.step` annotation.
    """
    trace = path if isinstance(path, CpuTrace) else read_cpu_trace(path)
    steps = trace.steps
    if not steps:
        raise TraceError(f"{trace.path}: no {STEP_MARKER} annotations; cannot count readbacks per step")
    per_step = [0] * len(steps)
    by_site: Counter[tuple[str, str]] = Counter()
    for step_index, op, site in counted_readbacks(trace):
        per_step[step_index] += 1
        by_site[(site, op.name)] += 1
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
                # Nothing blocks on a CPU: not measured, null (bubblescope.analysis.not_measured).
                "blocked_ns": None,
                "bubble_ns": None,
                "hint": hint,
            }
        )
    return {
        "steps": len(steps),
        "per_step": per_step,
        "blocking_reads_per_step": sum(per_step) / len(steps),
        "syncs": syncs,
        "warnings": list(trace.warnings),
    }
