"""Per-step GPU idle samples of a profiled window, kept in a RunRecord for intervals.

The record's `idle_by_class_ns_per_step` is one mean; an interval on "idle a switch removed" needs the
steps themselves. `idle_step_samples` keeps, for the first rank of an analysis, the idle of each typical
step by class (the same steps the summary averages: no warm-up or outlier step), and which steps those
are, so a reader can say what the numbers describe.
"""

from __future__ import annotations

from typing import Any

from bubblescope.analysis.traces import typical_steps

IDLE_CLASSES = ("sync", "host", "launch", "dependency")


def idle_step_samples(full: dict[str, Any] | None) -> dict[str, Any] | None:
    """`{"steps": [index, ...], "by_class_ns": {class: [ns, ...]}}` of the first rank's typical steps.

    Args:
        full: an analysis/1 document (None, or one without GPU measurements, gives None).
    Returns:
        per-step idle by class, one value per listed step; None when nothing was measured.
    """
    if not full or full.get("gpu_measured") is False:
        return None
    steps = [s for s in full.get("steps") or [] if isinstance(s, dict)]
    if not steps:
        return None
    first_rank = steps[0].get("rank")
    steps = [s for s in steps if s.get("rank") == first_rank]
    if any(not isinstance(s.get("idle_by_class_ns"), dict) for s in steps):
        return None
    keep = typical_steps(steps).tolist()
    typical = [s for s, kept in zip(steps, keep, strict=True) if kept]
    return {
        "steps": [int(s.get("index", i)) for i, s in enumerate(typical)],
        "by_class_ns": {c: [int(s["idle_by_class_ns"].get(c) or 0) for s in typical] for c in IDLE_CLASSES},
    }
