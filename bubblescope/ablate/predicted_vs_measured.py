"""Predicted vs measured: the tool's prediction of each switch's saving checked against the ablation.

A prediction (`ablate.predict`) agrees with a measured saving (alone, or removed from all-on; ms per token,
two-level bootstrap intervals) when it is within 25% of it, or the prediction lies inside the measured
interval, or the measurement inside the prediction's interval. Where it agrees with neither, the reasons
the runs themselves show are given:

  * noise: the measured saving is not resolved (interval holds zero or is wider than itself);
  * interaction: alone and removed-from-all-on disagree (disjoint intervals): the saving depends on the
    other switches; when the baseline blocks on reads and the switch saves less alone, the host-bound
    step turns the GPU time saved into idle until the reads are gone;
  * kernel speed: a launch rule's switch moved GPU busy per step by a large part of its saving (it made
    kernels faster or slower, which a launch-gap rule cannot predict);
  * bandwidth: a bytes rule's switch moved GPU busy by much less or more than the bytes take at the
    measured bandwidth (the kernels reading them do not run at it);
  * run-ahead: the reads' saving exceeds their bounded cost: they also kept the host's following work on
    the critical path, which the host hides once it runs ahead;
  * other idle: the switch also removed resolved idle of a class its rule does not count;
  * tracing: the prediction exceeds the saving and the baseline's profiled steps ran much longer than
    its timed ones, so the profiled idle it was read from is inflated by tracing.
Where none of these shows, the row says the reason was not identified and gives the rule's basis.
"""

from __future__ import annotations

from typing import Any

from bubblescope.ablate.plan import AblationPlan
from bubblescope.ablate.predict import RULES, predict_switch
from bubblescope.records.run_record import RunRecord
from bubblescope.stats import is_resolved

AGREEMENT = 0.25
# Profiled steps this much longer than timed ones inflate the idle a prediction is read from.
TRACING_RATIO = 1.10


def _finite(row: Any) -> tuple[float, float | None, float | None] | None:
    if not isinstance(row, dict) or not isinstance(row.get("est"), int | float):
        return None
    lo, hi = row.get("lo"), row.get("hi")
    return (
        float(row["est"]),
        lo if isinstance(lo, int | float) else None,
        hi if isinstance(hi, int | float) else None,
    )


def agrees(predicted: dict[str, Any], measured: dict[str, Any]) -> bool:
    """Within 25% of the measured saving, or either point inside the other's 95% interval."""
    pred, meas = _finite(predicted), _finite(measured)
    if pred is None or meas is None:
        return False
    (p, p_lo, p_hi), (m, m_lo, m_hi) = pred, meas
    if abs(p - m) <= AGREEMENT * abs(m):
        return True
    if m_lo is not None and m_hi is not None and m_lo <= p <= m_hi:
        return True
    return p_lo is not None and p_hi is not None and p_lo <= m <= p_hi


def _resolved(row: Any) -> bool:
    return isinstance(row, dict) and is_resolved(row.get("est"), row.get("lo"), row.get("hi"))  # type: ignore[arg-type]


def _gpu_busy_us(record: RunRecord | None) -> float | None:
    value = ((record or {}).get("analysis") or {}).get("gpu_busy_ns_per_step")
    return float(value) / 1e3 if isinstance(value, int | float) else None


def _reasons(
    switch: dict[str, Any],
    prediction: dict[str, Any],
    base: RunRecord,
    alone: RunRecord | None,
    off: bool,
) -> list[str]:
    """Why a prediction and a measurement differ; with `off` False (it agrees with one measurement)
    only why the two measurements differ from each other."""
    reasons = []
    alone_ms, removed_ms = switch.get("alone_ms") or {}, switch.get("removed_from_all_ms") or {}
    if not any(is_resolved(r["est"], r["lo"], r["hi"]) for r in (alone_ms, removed_ms) if r):
        reasons.append("noise: neither measured saving is resolved")
    if alone_ms and removed_ms and (alone_ms["hi"] < removed_ms["lo"] or removed_ms["hi"] < alone_ms["lo"]):
        text = (
            f"interaction: alone {alone_ms['est']:.3f} ms vs removed from all-on {removed_ms['est']:.3f} ms "
            "(disjoint intervals): the saving depends on the other switches"
        )
        reads = float((base.get("analysis") or {}).get("blocking_reads_per_step") or 0.0)
        if reads > 0 and switch.get("name") != "no_readback" and alone_ms["est"] < removed_ms["est"]:
            text += (
                f"; alone, the host still blocks on {reads:g} reads/step, so the step waits for the host "
                "and GPU time the switch saves becomes idle"
            )
        reasons.append(text)
    if not off:
        return reasons
    predicted = float((prediction.get("predicted_ms") or {}).get("est") or 0.0)
    rule = RULES.get(str(switch.get("name")))
    measured_best = max((r.get("est", 0.0) for r in (alone_ms, removed_ms) if r), default=0.0)
    reasons += _kernel_speed(rule, predicted, measured_best, _gpu_busy_us(base), _gpu_busy_us(alone))
    if rule and rule.kind == "idle" and rule.idle_class == "sync" and measured_best > predicted:
        host_us = float(
            ((base.get("analysis") or {}).get("idle_by_class_ns_per_step") or {}).get("host") or 0
        )
        reasons.append(
            f"run-ahead: the reads also kept the host's following work on the critical path (baseline host "
            f"idle {host_us / 1e3:.1f} µs per profiled step); with them gone the host runs ahead and hides "
            "it, and the reads' bounded cost counts only the GPU's wait for them (sync idle)"
        )
    block = switch.get("removed_idle_per_step") or {}
    counted = rule.idle_class if rule and rule.kind == "idle" else "launch"
    extra = [
        f"{cls} {row['est']:.1f} µs"
        for cls, row in (block.get("by_class_us") or {}).items()
        if cls not in (counted, "host" if counted == "sync" else "")
        and isinstance(row, dict)
        and row.get("resolved")
        and row["est"] > 0
    ]
    if extra and measured_best > predicted:
        reasons.append(
            f"other idle: alone it also removed {', '.join(extra)} per profiled step"
            + (" (profiled steps; the timed saving is smaller)" if block.get("note") else "")
        )
    ratio = (base.get("analysis") or {}).get("profiled_step_over_timed")
    from_idle = rule is not None and rule.kind != "bytes"
    if from_idle and isinstance(ratio, int | float) and ratio > TRACING_RATIO and predicted > measured_best:
        reasons.append(
            f"tracing: the baseline's profiled steps ran {ratio:.2f}x its timed ones, inflating the idle "
            "the prediction is read from"
        )
    explained = ("kernel speed", "bandwidth", "run-ahead", "other idle", "tracing")
    if not any(reason.startswith(explained) for reason in reasons):
        reasons.append(
            f"prediction vs the measured savings: not identified from the runs (the rule's basis: "
            f"{prediction.get('basis')})"
        )
    return reasons


def _kernel_speed(
    rule: Any, predicted: float, measured: float, busy_before: float | None, busy_after: float | None
) -> list[str]:
    """A launch rule whose switch changed GPU busy by a large part of its saving, or a bytes rule whose
    kernels did not save the bytes' time at the measured bandwidth (profiled runs, GPU busy per step)."""
    if rule is None or rule.kind == "idle" or busy_before is None or busy_after is None:
        return []
    busy_ms = (busy_before - busy_after) / 1e3
    if rule.kind == "launches" and abs(busy_ms) >= max(0.005, AGREEMENT * abs(measured)):
        return [
            f"kernel speed: GPU busy per profiled step fell {busy_ms * 1e3:.1f} µs in its own run; the rule "
            f"({rule.removes}) predicts launch gaps only, not kernels becoming faster or slower"
        ]
    if rule.kind == "bytes" and abs(busy_ms - predicted) > max(0.002, AGREEMENT * abs(predicted)):
        return [
            f"bandwidth: GPU busy per profiled step fell {busy_ms * 1e3:.1f} µs in its own run where the "
            f"bytes at the measured bandwidth take {predicted * 1e3:.1f} µs: the kernels reading them do not "
            "run at that bandwidth"
        ]
    return []


def predicted_vs_measured(
    plan: AblationPlan,
    records: dict[str, RunRecord],
    switches: list[dict[str, Any]],
    base_analysis: dict[str, Any] | None,
) -> list[dict[str, Any]]:
    """One row per switch: prediction, both measured savings, verdict and reasons (module docstring).

    Args:
        plan: the ablation's plan (which record is the baseline, which the switch alone).
        records: RunRecords by configuration key.
        switches: `attribution.switches` (alone_ms, removed_from_all_ms, removed_idle_per_step).
        base_analysis: the baseline's full analysis/1 (kernel table), or None.
    """
    by_set = plan.by_set()
    base = records[by_set[frozenset()].key]
    rows = []
    for switch in switches:
        name = str(switch["name"])
        alone = records.get(by_set[frozenset({name})].key)
        prediction = predict_switch(name, base, base_analysis, alone)
        row = {
            **prediction,
            "measured_alone_ms": switch.get("alone_ms"),
            "measured_removed_from_all_ms": switch.get("removed_from_all_ms"),
            "agrees_with": [],
            "verdict": "no prediction",
            "reasons": [],
        }
        if prediction.get("predicted_ms") is not None:
            row["agrees_with"] = [
                label
                for label, key in (("alone", "alone_ms"), ("removed from all-on", "removed_from_all_ms"))
                # A measurement that is noise (not resolved) confirms nothing, whatever its interval holds.
                if _resolved(switch.get(key)) and agrees(prediction["predicted_ms"], switch.get(key) or {})
            ]
            row["verdict"] = "agrees" if row["agrees_with"] else "off"
            if len(row["agrees_with"]) < 2:
                row["reasons"] = _reasons(switch, prediction, base, alone, off=row["verdict"] == "off")
        rows.append(row)
    return rows
