"""The TPOT of an own loop's timed steps (`bubblescope.profile(timed=N)`, `profile --timed N`).

The N timed steps are one run of the user's loop, not repeats of a workload: for the two-level
bootstrap `run` uses (repeats, then steps within them; `stats.median_with_ci`) they are cut into
`TIMED_BLOCKS` consecutive blocks that stand for the repeats, so drift along the run (clocks, caches,
a growing KV cache) widens the interval as a slow repeat would. Fewer than `MIN_BLOCK_STEPS` steps per
block leaves one block: steps resampled alone, and the interval says so.

Each step is one token (`tokens_per_step` 1): a loop that emits several per step (speculative decoding)
reports time per step. No torch import.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bubblescope.stats import INTERVAL_LABEL, median_with_ci, per_token_samples_ns

TIMED_BLOCKS = 4
MIN_BLOCK_STEPS = 4
BLOCKS_NOTE = "the timed steps cut into consecutive blocks that stand for the repeats"
ONE_BLOCK_LABEL = "95% CI, bootstrap over steps (too few timed steps for blocks)"
CPU_NOTE = "CPU run: times are host (CPU) wall times per step, not GPU times"


def timed_block(samples_ns: list[int], host_ns: list[int], *, on_cuda: bool) -> dict[str, Any] | None:
    """profile.json's `timed` (docs/SCHEMAS.md) from the timed steps' samples; None without any step.

    Args:
        samples_ns: [steps] ns per step on the device timeline (CUDA events), or host ns on CPU.
        host_ns: [steps] host wall ns per step (boundary to boundary).
        on_cuda: the steps were timed with CUDA events.
    """
    if not samples_ns:
        return None
    blocks = TIMED_BLOCKS if len(samples_ns) >= TIMED_BLOCKS * MIN_BLOCK_STEPS else 1
    cut = [part.tolist() for part in np.array_split(np.asarray(samples_ns, dtype=np.int64), blocks)]
    host_cut = [part.tolist() for part in np.array_split(np.asarray(host_ns, dtype=np.int64), blocks)]
    per_token = per_token_samples_ns(cut, [[1] * len(part) for part in cut])
    est, lo, hi = median_with_ci(per_token, hierarchical=True)
    return {
        "steps": len(samples_ns),
        "timing": "cuda-events" if on_cuda else "host-perf-counter",
        "tokens_per_step": 1,
        "samples_ns": cut,
        "host_samples_ns": host_cut,
        "tpot_ms": est / 1e6,
        "tpot_ci95_ms": [lo / 1e6, hi / 1e6],
        "interval": f"{INTERVAL_LABEL}; {BLOCKS_NOTE}" if blocks > 1 else ONE_BLOCK_LABEL,
        "profiled_step_over_timed": None,
        "note": None if on_cuda else CPU_NOTE,
    }


def attach_timed(analysis: dict[str, Any], timed: dict[str, Any] | None) -> None:
    """Give a profile's analysis what the timed steps measured (in place), for calibration:
    `analysis["timed"]` (TPOT, interval, timing), `timed_step_ns` (TPOT x tokens per step: the bound
    of every saving the reports show) and `profiled_step_over_timed` (median GPU time of a profiled
    step ÷ median timed step; GPU runs only, null otherwise). Nothing when not timed."""
    if not isinstance(timed, dict):
        return
    from bubblescope.capture.measure import profiled_over_timed

    ratio = profiled_over_timed(analysis, timed["samples_ns"]) if analysis.get("gpu_measured") else None
    timed["profiled_step_over_timed"] = ratio
    analysis["profiled_step_over_timed"] = ratio
    analysis["timed"] = {
        key: timed.get(key)
        for key in ("steps", "timing", "tokens_per_step", "tpot_ms", "tpot_ci95_ms", "interval")
    }
    # The timed step every saving is bounded by (timed_idle.bound_idle reads it from any analysis).
    tpot_ms, tokens = timed.get("tpot_ms"), timed.get("tokens_per_step") or 1
    if isinstance(tpot_ms, (int, float)) and tpot_ms > 0:
        analysis["timed_step_ns"] = float(tpot_ms) * 1e6 * float(tokens)
