"""What the timed step can give back: the profiled window's idle bounded by the timed step (issue 23 §1-2).

The gaps come from the *profiled* steps, which tracing slows down (the host records every op, frame and
runtime call); TPOT comes from the *timed* steps, which nothing slows. A saving a user can bank is at
most the timed step's idle:

    timed idle per step = timed step (TPOT x tokens per step) - GPU busy per step

GPU busy per step is taken from the profiled window (tracing adds host time, not kernel time). What the
profiled window shows beyond the timed idle is the profiler's own share: host-bound idle first (tracing
slows the host, so the device waits longer for it), then, only if the excess is larger than all host
idle, the other classes in proportion. That share is class `profiler`: never blamed on the user's code
and never offered as a saving.

Without a timed step (a bare trace) the profiler share is the analysis' per-call estimate
(`summary.profiler_ns_per_step`, `detect.tracing_cost`), and every figure is marked an estimate.

Per-step figures are the analysis' typical-step means (warm-up and outlier steps left out; means keep
the classes additive, so the classes sum to the idle).
"""

from __future__ import annotations

from typing import Any

IDLE_CLASSES = ("sync", "host", "launch", "dependency")


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None


def timed_step_ns_of(record: dict[str, Any] | None) -> float | None:
    """The timed step of a RunRecord (`run`, `ablate`): TPOT x mean tokens per step, ns; None when the
    record holds no TPOT."""
    summary = (record or {}).get("summary") or {}
    tpot_ms = _num(summary.get("tpot_ms"))
    if tpot_ms is None or tpot_ms <= 0:
        return None
    tokens, steps, repeats = (_num(summary.get(k)) for k in ("tokens", "steps", "repeats"))
    per_step = tokens / (steps * repeats) if tokens and steps and repeats else 1.0
    return tpot_ms * 1e6 * per_step


def bound_idle(analysis: dict[str, Any] | None, timed_step_ns: float | None = None) -> dict[str, Any] | None:
    """The profiled window's idle per step, split into the profiler's share and what the timed step holds.

    Args:
        analysis: a `bubblescope.analysis/1` dict (its `summary`). An analysis of a profiled own loop
            that timed its steps may carry `timed_step_ns` itself; the argument wins.
        timed_step_ns: the timed step (TPOT x tokens per step), ns; `timed_step_ns_of(record)` for a
            RunRecord. None: estimate the profiler share from the per-call model.

    Returns:
        None when the analysis has no GPU measurement or no steps; else {
          `source`: "timed" (bounded by a timed step) or "model" (per-call estimate, no timed step),
          `estimate`: True when `source` is "model",
          `profiled_step_ns`, `timed_step_ns` (None for "model"), `profiled_over_timed` (None for "model"),
          `gpu_busy_ns`, `profiled_idle_ns`, `timed_idle_ns` (the bound every saving stays within),
          `profiler_ns` (the profiler's share of the profiled idle),
          `idle_by_class_ns`: per class, the timed idle (sums to `timed_idle_ns`),
          `profiled_by_class_ns`: per class, the profiled idle,
          `steps`, `typical_steps`: how many profiled steps there were and how many the figures use
          (None when the analysis does not say)}.
        Every figure is per step, ns.
    """
    if not isinstance(analysis, dict) or analysis.get("gpu_measured") is False:
        return None
    summary = analysis.get("summary") if isinstance(analysis.get("summary"), dict) else {}
    busy = _num(summary.get("gpu_busy_ns_per_step"))
    by_class = summary.get("idle_by_class_ns_per_step")
    steps = _num(summary.get("steps"))
    if busy is None or not isinstance(by_class, dict) or steps == 0:
        return None
    profiled = {c: max(_num(by_class.get(c)) or 0.0, 0.0) for c in IDLE_CLASSES}
    profiled_idle = sum(profiled.values())
    timed = _num(timed_step_ns) if timed_step_ns is not None else _num(analysis.get("timed_step_ns"))
    if timed is not None and timed > 0:
        source = "timed"
        excess = max(profiled_idle - max(timed - busy, 0.0), 0.0)
    else:
        source, timed = "model", None
        excess = min(max(_num(summary.get("profiler_ns_per_step")) or 0.0, 0.0), profiled_idle)
    bounded = _take_profiler_share(profiled, excess)
    outliers = _num(summary.get("outlier_steps")) or 0
    return {
        "source": source,
        "estimate": source == "model",
        "profiled_step_ns": busy + profiled_idle,
        "timed_step_ns": timed,
        "profiled_over_timed": round((busy + profiled_idle) / timed, 3) if timed else None,
        "gpu_busy_ns": busy,
        "profiled_idle_ns": profiled_idle,
        "timed_idle_ns": sum(bounded.values()),
        "profiler_ns": excess,
        "idle_by_class_ns": bounded,
        "profiled_by_class_ns": profiled,
        "steps": int(steps) if steps is not None else None,
        "typical_steps": int(steps - outliers) if steps is not None else None,
    }


def _take_profiler_share(profiled: dict[str, float], excess: float) -> dict[str, float]:
    """Per class, the profiled idle less the profiler's share: from `host` first, the rest of the excess
    (if any) from the other classes in proportion to their idle."""
    out = dict(profiled)
    from_host = min(excess, out["host"])
    out["host"] -= from_host
    rest = excess - from_host
    others = sum(v for c, v in out.items() if c != "host")
    if rest > 0 and others > 0:
        keep = max(1.0 - rest / others, 0.0)
        for c in out:
            if c != "host":
                out[c] *= keep
    return out


def record_bound(record: dict[str, Any], analysis: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """`bound_idle` of a RunRecord (`run`, `ablate`): its profiled idle bounded by its own timed step.

    For the ablation's predicted-vs-measured table (h23-ablate): call it with each configuration's
    record; `idle_by_class_ns` is what fixing each class can give back per step in the timed run.

    Args:
        record: a `bubblescope.run/1` dict.
        analysis: the run's full analysis (`<stem>.analysis.json`); None: the record's `analysis` block.
    """
    if analysis is None:
        block = record.get("analysis") or {}
        analysis = {
            "gpu_measured": block.get("gpu_measured"),
            "summary": {
                "gpu_busy_ns_per_step": block.get("gpu_busy_ns_per_step"),
                "idle_by_class_ns_per_step": block.get("idle_by_class_ns_per_step"),
            },
        }
    return bound_idle(analysis, timed_step_ns_of(record))
