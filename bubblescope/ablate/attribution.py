"""Attribution of TPOT savings to switches, with bootstrap intervals.

Each configuration's per-token samples are bootstrapped once (B replicate medians, seeded by its
key), and every statistic is computed replicate by replicate from those same draws: the intervals
of a difference, a Shapley value or a sum are joint, not a combination of separate intervals.
Savings are positive when a switch makes TPOT smaller (docs/SCHEMAS.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bubblescope.ablate.plan import AblationPlan
from bubblescope.ablate.predicted_vs_measured import predicted_vs_measured
from bubblescope.ablate.removed_idle import removed_idle
from bubblescope.errors import RecordError
from bubblescope.records.run_record import RunRecord, record_tpot_replicates_ns, tpot_interval_of
from bubblescope.stats import DEFAULT_BOOTSTRAP, estimate, shapley_exact, shapley_from_permutations


class _Tpot:
    """Point TPOT (ms), its [B] bootstrap replicates and its 95% interval for every measured configuration.

    The replicates are the record's own (`records.record_tpot_replicates_ns`: same seed, same two-level
    resampling as its summary), so a configuration's interval here is the one its run page shows.
    """

    def __init__(self, plan: AblationPlan, records: dict[str, RunRecord], n_boot: int) -> None:
        self.point: dict[frozenset[str], float] = {}
        self.reps: dict[frozenset[str], np.ndarray] = {}
        self.interval: dict[frozenset[str], list[float]] = {}
        for config in plan.configs:
            record = records.get(config.key)
            if record is None:
                raise RecordError(f"configuration {config.key} has not been measured")
            # Two-level (repeats, then steps): configurations are measured one after another, so
            # repeat-to-repeat drift is part of the noise a saving must stand out from.
            point_ns, reps_ns = record_tpot_replicates_ns(record, n_boot)
            self.point[config.enabled] = point_ns / 1e6
            self.reps[config.enabled] = reps_ns / 1e6
            self.interval[config.enabled] = tpot_interval_of(reps_ns)

    def saving(self, enabled: frozenset[str], replicates: bool) -> np.ndarray | float:
        """baseline TPOT - TPOT(enabled): the value of a coalition of switches."""
        table = self.reps if replicates else self.point
        return table[frozenset()] - table[enabled]


def _sync_counts(record: RunRecord) -> dict[str, float]:
    analysis = record.get("analysis") or {}
    counts: dict[str, float] = {}
    for sync in analysis.get("syncs", []):
        label = f"{sync.get('site', 'unknown')} [{sync.get('op', '?')}]"
        counts[label] = counts.get(label, 0.0) + float(sync.get("per_step", 0.0))
    return counts


def removed_reads(baseline: RunRecord, switched: RunRecord) -> dict[str, float]:
    """Blocking reads per step (by site) that a switch removed; negative: it added reads."""
    before, after = _sync_counts(baseline), _sync_counts(switched)
    reads = {site: before.get(site, 0.0) - after.get(site, 0.0) for site in sorted(set(before) | set(after))}
    return {k: v for k, v in reads.items() if v != 0.0}


def _shapley(plan: AblationPlan, tpot: _Tpot, replicates: bool) -> dict[str, Any]:
    def value(coalition: frozenset[str]) -> np.ndarray | float:
        return tpot.saving(coalition, replicates)

    if plan.shapley_method == "exact":
        return shapley_exact(plan.toggles, value)
    return shapley_from_permutations(plan.permutations, value)


def _waterfall(plan: AblationPlan, tpot: _Tpot) -> list[dict[str, Any]]:
    lo, hi = tpot.interval[frozenset()]
    steps = [{"step": "baseline", "tpot_ms": tpot.point[frozenset()], "lo": lo, "hi": hi}]
    previous: frozenset[str] = frozenset()
    for name in plan.order:
        current = previous | {name}
        lo, hi = tpot.interval[current]
        delta = estimate(tpot.point[current] - tpot.point[previous], tpot.reps[current] - tpot.reps[previous])
        steps.append(
            {
                "step": f"+{name}",
                "tpot_ms": tpot.point[current],
                "lo": lo,
                "hi": hi,
                "delta_ms": delta["est"],
                "delta_lo": delta["lo"],
                "delta_hi": delta["hi"],
            }
        )
        previous = current
    return steps


def attribute(
    plan: AblationPlan,
    records: dict[str, RunRecord],
    *,
    n_boot: int = DEFAULT_BOOTSTRAP,
    base_analysis: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The `attribution` block of `bubblescope.ablation/1` from a complete set of records.

    Args:
        base_analysis: the baseline's full analysis/1 (its kernel table feeds the launch predictions of
            `predicted_vs_measured`); None predicts from the records alone.
    """
    tpot = _Tpot(plan, records, n_boot)
    everything = frozenset(plan.toggles)
    by_set = plan.by_set()
    baseline = records[by_set[frozenset()].key]
    shapley_point, shapley_reps = _shapley(plan, tpot, False), _shapley(plan, tpot, True)
    switches = []
    cumulative: dict[str, dict[str, float]] = {}
    previous: frozenset[str] = frozenset()
    for name in plan.order:
        current = previous | {name}
        cumulative[name] = estimate(
            tpot.saving(current, False) - tpot.saving(previous, False),
            tpot.saving(current, True) - tpot.saving(previous, True),
        )
        previous = current
    for name in plan.toggles:
        alone = frozenset({name})
        switched = records[by_set[alone].key]
        alone_ms = estimate(tpot.saving(alone, False), tpot.saving(alone, True))
        idle = removed_idle(baseline, switched, alone_ms, n_boot=n_boot)
        switches.append(
            {
                "name": name,
                "alone_ms": alone_ms,
                "removed_from_all_ms": estimate(
                    tpot.saving(everything, False) - tpot.saving(everything - {name}, False),
                    tpot.saving(everything, True) - tpot.saving(everything - {name}, True),
                ),
                "shapley_ms": estimate(float(shapley_point[name]), shapley_reps[name]),
                "cumulative_ms": cumulative[name],
                "removed_reads_per_step": removed_reads(baseline, switched),
                # Point values of `removed_idle_per_step` (null: not measured), for older readers.
                "removed_idle_us_per_step": (
                    {c: e["est"] for c, e in idle["by_class_us"].items()} if idle["by_class_us"] else None
                ),
                "removed_idle_per_step": idle,
            }
        )
    alone_sum_point = sum(tpot.saving(frozenset({n}), False) for n in plan.toggles)
    alone_sum_reps = sum(tpot.saving(frozenset({n}), True) for n in plan.toggles)
    return {
        "baseline_tpot_ms": tpot.point[frozenset()],
        "all_on_tpot_ms": tpot.point[everything],
        "total_saving_ms": estimate(tpot.saving(everything, False), tpot.saving(everything, True)),
        "switches": switches,
        "interaction_ms": estimate(
            tpot.saving(everything, False) - alone_sum_point, tpot.saving(everything, True) - alone_sum_reps
        ),
        "shapley_method": plan.shapley_method,
        "bootstrap": {
            "replicates": n_boot,
            "level": 0.95,
            "resampling": "repeats, then steps within them; each config once, shared by all statistics",
        },
        "waterfall": _waterfall(plan, tpot),
        "predicted_vs_measured": predicted_vs_measured(plan, records, switches, base_analysis),
    }
