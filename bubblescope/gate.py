"""The CI gate: a baseline RunRecord (or trace) vs a current one → verdict and exit code.

Two checks:
  * blocking reads per step — exact: a count, not a timing, so it has no noise and works from CPU
    traces. Fails when the current count is higher than the baseline's.
  * TPOT — fails only when the regression is beyond both the threshold and the noise: the lower
    bound of the bootstrap 95% interval of current median / baseline median exceeds
    1 + max_regression. A trace carries no timed samples, so with a trace on either side this
    check is skipped (and says so).
Exit codes: 0 pass, 1 regression, 2 bad input (a BubblescopeError raised by the loaders).
torch is never imported here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bubblescope.analysis.readbacks import count_readbacks, read_cpu_trace
from bubblescope.errors import ConfigError, RecordError
from bubblescope.records.run_record import load_record
from bubblescope.records.validate import check_gate_pair
from bubblescope.report.cells import fmt_percent
from bubblescope.stats import per_token_samples_ns, ratio_of_medians_ci

GATE_SCHEMA = "bubblescope.gate/1"


@dataclass
class GateInput:
    """What the gate needs from one side: reads per step by site and, for records, TPOT samples."""

    path: str
    kind: str
    reads_per_step: float
    syncs: list[dict[str, Any]]
    per_token_ns: list[np.ndarray] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    # What the verdict's embedded diff (bubblescope.diff/1) is built from: the record and/or analysis.
    record: dict[str, Any] | None = None
    analysis: dict[str, Any] | None = None
    # What reading this side left out (counted), shown with the verdict's warnings.
    warnings: list[str] = field(default_factory=list)


def parse_threshold(text: str) -> float:
    """'3%' or '0.03' → 0.03; a one-line error otherwise.

    A bare number above 1 is refused: `3` could mean 3% or 300%, and guessing wrong lets every
    regression through.
    """
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100.0 if raw.endswith("%") else float(raw)
    except ValueError:
        raise ConfigError(f"--max-regression must look like 3% or 0.03, got {text!r}") from None
    if not raw.endswith("%") and value > 1.0:
        raise ConfigError(
            f"--max-regression {text} is ambiguous: write {raw}% for a percentage, or a fraction such as 0.03"
        )
    if not 0.0 <= value < 10.0 or value != value:
        raise ConfigError(f"--max-regression must be between 0% and 1000%, got {text!r}")
    return value


def _is_trace(path: Path) -> bool:
    """A trace by content: gzip, or a JSON object with `traceEvents` (RunRecords carry `schema`)."""
    with path.open("rb") as handle:
        head = handle.read(1 << 16)
    if head[:2] == b"\x1f\x8b":
        return True
    return b'"traceEvents"' in head or (b'"schema"' not in head and path.name.endswith("trace.json"))


def _is_analysis(path: Path) -> bool:
    with path.open("rb") as handle:
        return b'"bubblescope.analysis/1"' in handle.read(1 << 12)


def _trace_input(path: Path) -> GateInput:
    """A trace side: the full analysis when the trace has GPU events, else readback ops counted.

    One streamed pass (`read_cpu_trace`, typed events, never dicts) tells the two apart and, for a
    CPU trace, collects what the count needs.
    """
    cpu_trace = read_cpu_trace(path)
    if cpu_trace.has_gpu:
        try:
            from bubblescope.analysis.traces import analyze_traces
        except ImportError:
            analyze_traces = None
        if analyze_traces is not None:
            analysis = analyze_traces([str(path)])
            return GateInput(
                str(path),
                "trace",
                float(analysis["summary"]["blocking_reads_per_step"]),
                analysis.get("syncs", []),
                meta={"source": "analysis"},
                analysis=analysis,
                # What loading left out or assumed (e.g. events with a list as category, no step
                # markers): the reads per step compared above depend on it.
                warnings=[str(w) for w in analysis.get("warnings", [])],
            )
        # No analysis here (a trimmed install): count the readback ops of the whole trace instead.
        cpu_trace = read_cpu_trace(path, stop_at_gpu=False)
    counted = count_readbacks(cpu_trace)
    return GateInput(
        str(path),
        "trace",
        counted["blocking_reads_per_step"],
        counted["syncs"],
        meta={"source": "readback ops in the trace"},
        warnings=counted["warnings"],
    )


def _profile_input(target: Path) -> GateInput:
    """A `bubblescope profile` folder (or its profile.json, analysis or trace: one answer for each)."""
    from bubblescope.profiling.load import load_profile, timed_per_token_ns

    loaded = load_profile(target)
    if loaded.analysis is None:
        notices = "; ".join(loaded.warnings) or "no trace was recorded"
        raise RecordError(f"{target}: the profile has no analysis ({notices})")
    summary = loaded.analysis.get("summary") or {}
    timed = loaded.record.get("timed") or {}
    return GateInput(
        str(target),
        "profile",
        float(summary.get("blocking_reads_per_step") or 0.0),
        list(loaded.analysis.get("syncs") or []),
        timed_per_token_ns(loaded.record),
        {
            # On CPU the read tap counts the calls that read the device; on a GPU, the trace's syncs.
            "source": "analysis" if loaded.on_gpu else "read tap on CPU",
            "device": loaded.record["environment"].get("device"),
            "timing": timed.get("timing"),
            "tpot_ms": timed.get("tpot_ms"),
        },
        record=loaded.record,
        analysis=loaded.analysis,
        warnings=loaded.warnings,
    )


def _analysis_input(target: Path) -> GateInput:
    """A bare analysis/1 JSON (`analyze --format json`, a copied analysis.json): its reads only."""
    from bubblescope.profiling.load import ANALYSIS_SCHEMA, read_document

    analysis = read_document(target, ANALYSIS_SCHEMA)
    summary = analysis["summary"] if isinstance(analysis.get("summary"), dict) else {}
    gpu = analysis.get("gpu_measured") is not False
    return GateInput(
        str(target),
        "analysis",
        float(summary.get("blocking_reads_per_step") or 0.0),
        [s for s in analysis.get("syncs") or [] if isinstance(s, dict)],
        meta={"source": "analysis" if gpu else "read tap on CPU"},
        analysis=analysis,
        warnings=[str(w) for w in analysis.get("warnings") or []],
    )


def load_gate_input(path: str | os.PathLike[str]) -> GateInput:
    """A RunRecord (file or run folder), a profile (folder or any of its files), an analysis or a trace,
    as the gate sees it."""
    from bubblescope.profiling.load import profile_folder

    target = Path(path)
    if not target.exists():
        raise RecordError(f"not found: {target}")
    if profile_folder(target) is not None:
        return _profile_input(target)
    if target.is_file() and _is_trace(target):
        return _trace_input(target)
    if target.is_file() and _is_analysis(target):
        return _analysis_input(target)
    record = load_record(target)
    analysis = record.get("analysis")
    if analysis is None:
        raise RecordError(f"{target}: the record has no analysis (run with --profile-steps >= 1)")
    per_token = per_token_samples_ns(record["samples_ns"], record["tokens_per_step"])
    meta = {
        "preset": record.get("preset"),
        "enabled": record["switches"].get("enabled", []),
        "device": record["environment"].get("device"),
        "gpu": record["environment"].get("gpu"),
        "tpot_ms": record["summary"].get("tpot_ms"),
        "gpu_measured": analysis.get("gpu_measured"),
    }
    return GateInput(
        str(target),
        "record",
        float(analysis.get("blocking_reads_per_step", 0.0)),
        list(analysis.get("syncs", [])),
        per_token,
        meta,
        record=record,
    )


def _reads_check(baseline: GateInput, current: GateInput) -> dict[str, Any]:
    from bubblescope.diff import compared_reads, moved_reads

    before, after, notes = compared_reads(baseline.syncs, current.syncs)
    # A read that only moved to another line (an edit above it) is the same read, not a new one.
    for old, new in moved_reads(before, after):
        before[new] = before.pop(old)
    labels = {key: f"{key[0]} [{key[1]}]" for key in set(before) | set(after)}
    increased = [
        {"site": labels[key], "baseline": before.get(key, 0.0), "current": after[key]}
        for key in sorted(after)
        if after[key] > before.get(key, 0.0) + 1e-9
    ]
    failed = current.reads_per_step > baseline.reads_per_step + 1e-9
    return {
        "name": "blocking_reads",
        "status": "fail" if failed else "pass",
        "baseline_per_step": baseline.reads_per_step,
        "current_per_step": current.reads_per_step,
        "increased_sites": increased,
        "notes": notes,
    }


def _tpot_check(
    baseline: GateInput, current: GateInput, threshold: float, n_boot: int, seed: int, hierarchical: bool
) -> dict[str, Any]:
    resampling = "repeats, then steps within them" if hierarchical else "steps within repeats"
    check: dict[str, Any] = {"name": "tpot", "threshold": threshold, "resampling": resampling}
    if baseline.per_token_ns is None or current.per_token_ns is None:
        reason = (
            "a trace, an analysis or a profile without --timed has no timed samples; only reads are gated"
        )
        return {**check, "status": "skipped", "reason": reason}
    ratio, lo, hi = ratio_of_medians_ci(
        baseline.per_token_ns, current.per_token_ns, n_boot=n_boot, seed=seed, hierarchical=hierarchical
    )
    base_ms = float(np.median(np.concatenate(baseline.per_token_ns))) / 1e6
    cur_ms = float(np.median(np.concatenate(current.per_token_ns))) / 1e6
    if lo > 1.0 + threshold:
        status, reason, change = "fail", "slower beyond the threshold and the noise", "regression"
    elif ratio > 1.0 + threshold:
        status, reason, change = "pass", "median beyond the threshold but within the noise", "unresolved"
    elif hi < 1.0:
        status, reason, change = "pass", "faster: an improvement beyond the noise", "improvement"
    elif ratio < 1.0:
        status, reason, change = "pass", "faster, but within the noise", "unresolved"
    else:
        status, reason, change = "pass", "within the threshold", "unresolved"
    return {
        **check,
        "status": status,
        "reason": reason,
        "change": change,
        "baseline_ms": base_ms,
        "current_ms": cur_ms,
        "ratio": {"est": ratio, "lo": lo, "hi": hi},
    }


def _noise_warning(check: dict[str, Any]) -> list[str]:
    """Say when the interval is too wide for the threshold to mean much (a slowdown can hide in it)."""
    ratio = check.get("ratio")
    if not ratio or check["threshold"] <= 0:
        return []
    half_width = (ratio["hi"] - ratio["lo"]) / 2.0
    if half_width <= check["threshold"]:
        return []
    return [
        f"TPOT noise (95% interval ±{fmt_percent(half_width)}) exceeds the {fmt_percent(check['threshold'])} "
        "threshold: "
        "only large regressions can fail; use more --steps/--repeats or a quieter machine"
    ]


def _warnings(baseline: GateInput, current: GateInput) -> list[str]:
    notes = [
        f"{side}: {note}" for side, g in (("baseline", baseline), ("current", current)) for note in g.warnings
    ]
    for key in ("preset", "device", "gpu"):
        same_kind = baseline.kind == current.kind and baseline.kind in ("record", "profile")
        if baseline.meta.get(key) != current.meta.get(key) and same_kind:
            notes.append(
                f"{key} differs: baseline {baseline.meta.get(key)!r}, current {current.meta.get(key)!r}"
            )
    if (
        baseline.meta.get("gpu_measured") != current.meta.get("gpu_measured")
        and baseline.kind == "record" == current.kind
    ):
        notes.append("one side counted reads on a GPU, the other from a CPU trace")
    return notes


def evaluate_gate(
    baseline: GateInput,
    current: GateInput,
    *,
    max_regression: float = 0.03,
    n_boot: int = 2000,
    seed: int = 0,
    hierarchical: bool = True,
) -> dict[str, Any]:
    """Compare two inputs; the verdict dict (schema bubblescope.gate/1) carries `exit_code` 0 or 1.

    Args:
        hierarchical: resample repeats, then steps within them (default). Resampling steps only
            ignores repeat-to-repeat spread; on CPU that gave 8% false alarms over A/A pairs at a 3%
            threshold (benchmarks/bench_gate_trust.py), so it is kept for comparison only.
    """
    checks = [
        _reads_check(baseline, current),
        _tpot_check(baseline, current, max_regression, n_boot, seed, hierarchical),
    ]
    failed = any(check["status"] == "fail" for check in checks)
    return {
        "schema": GATE_SCHEMA,
        "verdict": "fail" if failed else "pass",
        "exit_code": 1 if failed else 0,
        "max_regression": max_regression,
        "checks": checks,
        "warnings": _warnings(baseline, current) + checks[0]["notes"] + _noise_warning(checks[1]),
        "baseline": {"path": baseline.path, "kind": baseline.kind, **baseline.meta},
        "current": {"path": current.path, "kind": current.kind, **current.meta},
    }


def run_gate(baseline_path: str, current_path: str, max_regression: str = "3%") -> dict[str, Any]:
    """Load both sides and evaluate; raises BubblescopeError (exit 2) on bad input."""
    threshold = parse_threshold(max_regression)
    baseline, current = load_gate_input(baseline_path), load_gate_input(current_path)
    # Refuses what cannot be compared (exit 2); warns where the comparison is legal but weak.
    weak = check_gate_pair(baseline, current)
    verdict = evaluate_gate(baseline, current, max_regression=threshold)
    verdict["warnings"] = weak + verdict["warnings"]
    verdict["diff"] = gate_diff(baseline, current)
    return verdict


def gate_diff(baseline: GateInput, current: GateInput) -> dict[str, Any]:
    """The `bubblescope diff` of the two sides the gate compared, from what the gate already loaded."""
    from bubblescope.diff import compute_diff, side_from

    sides = [side_from(g.path, g.kind, g.record, g.analysis) for g in (baseline, current)]
    return compute_diff(*sides)
