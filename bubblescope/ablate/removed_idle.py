"""GPU idle a switch removed per step, with an interval, and why it may not be a saving.

Per timed step (`timed_removal`): the change of the timed step's idle, TPOT × tokens per step − GPU busy,
which is the timed saving less the GPU busy removed, with the saving's two-level bootstrap interval.

Per profiled step, by class: the idle comes from the profiled window (one window of a few steps per
configuration), not from the timed steps that give TPOT. Each class is estimated as baseline median −
switched median over the window's typical steps (`RunRecord.analysis.idle_steps`), with the same
two-level bootstrap as TPOT (`stats.bootstrap_medians(..., hierarchical=True)`; a window is one repeat,
so only its steps are resampled and run-to-run spread is not in the interval). An estimate whose
interval holds zero or is wider than itself is `not resolved`.

A removal is never shown beside a timed TPOT that did not improve without the reason: the profiled
steps ran slower than the timed ones (tracing), and host idle moves from window to window, so idle
"removed" in the window can be absent from the timed steps.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bubblescope.records.run_record import RunRecord, mean_tokens_per_step
from bubblescope.stats import DEFAULT_BOOTSTRAP, bootstrap_medians, estimate, is_resolved, stable_seed

IDLE_CLASSES = ("sync", "host", "launch", "dependency")


def _measured(record: RunRecord) -> bool:
    return (record.get("analysis") or {}).get("gpu_measured") is True


def _samples(record: RunRecord) -> dict[str, Any] | None:
    samples = (record.get("analysis") or {}).get("idle_steps")
    if not isinstance(samples, dict) or not isinstance(samples.get("by_class_ns"), dict):
        return None
    by_class = samples["by_class_ns"]
    if any(not isinstance(by_class.get(c), list) or not by_class.get(c) for c in IDLE_CLASSES):
        return None
    return samples


def _class_estimate(before: list[float], after: list[float], seed: int, n_boot: int) -> dict[str, Any]:
    base = np.asarray(before, dtype=np.float64) / 1e3
    switched = np.asarray(after, dtype=np.float64) / 1e3
    reps = bootstrap_medians([base], n_boot=n_boot, seed=seed, hierarchical=True) - bootstrap_medians(
        [switched], n_boot=n_boot, seed=seed + 1, hierarchical=True
    )
    out: dict[str, Any] = estimate(float(np.median(base) - np.median(switched)), reps)
    out["resolved"] = is_resolved(out["est"], out["lo"], out["hi"])
    return out


def _means_only(baseline: RunRecord, switched: RunRecord) -> dict[str, Any]:
    """Point differences of the per-step means (records without `idle_steps`): no interval, unresolved."""
    before = (baseline.get("analysis") or {}).get("idle_by_class_ns_per_step") or {}
    after = (switched.get("analysis") or {}).get("idle_by_class_ns_per_step") or {}
    return {
        c: {
            "est": (float(before.get(c) or 0) - float(after.get(c) or 0)) / 1e3,
            "lo": None,
            "hi": None,
            "resolved": False,
        }
        for c in IDLE_CLASSES
    }


def _window_text(samples: dict[str, Any], record: RunRecord) -> str:
    steps = samples.get("steps") or []
    ratio = (record.get("analysis") or {}).get("profiled_step_over_timed")
    where = f"profiled steps {', '.join(str(s) for s in steps)}" if steps else "profiled steps"
    return where + (f" (each {ratio:.2f}x the timed step)" if isinstance(ratio, int | float) else "")


def removed_idle(
    baseline: RunRecord, switched: RunRecord, alone_ms: dict[str, float], *, n_boot: int = DEFAULT_BOOTSTRAP
) -> dict[str, Any]:
    """Idle per step (µs) the switched run removed vs the baseline, by class, with 95% intervals.

    Args:
        baseline, switched: the two RunRecords (their analysis blocks and `idle_steps`).
        alone_ms: the timed saving of the same comparison ({est, lo, hi}, ms; positive = faster).
    Returns:
        {"measured": bool, "timed_us": `timed_removal`, "by_class_us": {class: {est, lo, hi, resolved}},
         "steps": {"baseline": text, "switched": text} (which profiled steps the samples are),
         "note": why a removal is not a timed saving, or why there is no interval (None otherwise)}.
    """
    if not (_measured(baseline) and _measured(switched)):
        return {
            "measured": False,
            "timed_us": None,
            "by_class_us": None,
            "steps": None,
            "note": "not measured (no GPU)",
        }
    timed = timed_removal(baseline, switched, alone_ms)
    before, after = _samples(baseline), _samples(switched)
    if before is None or after is None:
        return {
            "measured": True,
            "timed_us": timed,
            "by_class_us": _means_only(baseline, switched),
            "steps": None,
            "note": "no per-step idle in these records, so no interval: re-analyse (`ablate --reanalyze`)",
        }
    seed = stable_seed("removed_idle", tuple(sorted(switched["switches"].get("enabled", []))))
    by_class = {
        c: _class_estimate(before["by_class_ns"][c], after["by_class_ns"][c], seed + 2 * i, n_boot)
        for i, c in enumerate(IDLE_CLASSES)
    }
    steps = {"baseline": _window_text(before, baseline), "switched": _window_text(after, switched)}
    return {
        "measured": True,
        "timed_us": timed,
        "by_class_us": by_class,
        "steps": steps,
        "note": _note(by_class, alone_ms),
    }


def timed_removal(
    baseline: RunRecord, switched: RunRecord, alone_ms: dict[str, float]
) -> dict[str, Any] | None:
    """GPU idle per *timed* step the switch removed (µs): Δ(timed step − GPU busy), with the TPOT interval.

    The timed step holds `TPOT × tokens per step − GPU busy` of idle (GPU busy from the profiled window:
    tracing adds host time, not kernel time). Its change is the timed saving per step minus the GPU busy
    the switch removed, so the interval is the saving's (two-level bootstrap of both runs' TPOT) shifted
    by the busy change. None without both runs' GPU busy.
    """
    busy = [(r.get("analysis") or {}).get("gpu_busy_ns_per_step") for r in (baseline, switched)]
    before, after = (b if isinstance(b, int | float) else None for b in busy)
    if before is None or after is None or not isinstance(alone_ms.get("lo"), int | float):
        return None
    tokens = mean_tokens_per_step(baseline)
    busy_removed_us = (float(before) - float(after)) / 1e3
    est, lo, hi = (alone_ms[k] * tokens * 1e3 - busy_removed_us for k in ("est", "lo", "hi"))
    return {
        "est": est,
        "lo": lo,
        "hi": hi,
        "resolved": is_resolved(est, lo, hi),
        "gpu_busy_removed_us": busy_removed_us,
    }


def _note(by_class: dict[str, dict[str, Any]], alone_ms: dict[str, float]) -> str | None:
    """Why idle removed in the profiled window is not (all) a timed saving, or None."""
    removed_us = sum(e["est"] for e in by_class.values() if e["resolved"] and e["est"] > 0)
    if removed_us <= 0:
        return None
    est, lo, hi = alone_ms["est"], alone_ms["lo"], alone_ms["hi"]
    if hi < 0:
        return (
            f"timed TPOT alone is {-est:.3f} ms slower: the idle the profiled window lost did not shorten "
            "the timed steps (window-to-window host idle, tracing cost)"
        )
    if not is_resolved(est, lo, hi):
        return "the timed steps do not show it: ΔTPOT alone is not resolved"
    if removed_us / 1e3 > hi:
        return (
            f"more than the timed saving ({est:.3f} ms [{lo:.3f}, {hi:.3f}]): the profiled steps carry "
            "tracing cost the timed ones do not"
        )
    return None
