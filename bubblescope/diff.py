"""`bubblescope diff A B`: what changed between two runs, ablations, analyses or traces.

Both sides are read as `bubblescope report` reads them (report/load_inputs.py). An ablation stands for
its baseline configuration. The diff (schema `bubblescope.diff/1`, docs/SCHEMAS.md) holds:

* `tpot`: ΔTPOT and current/baseline with the two-level bootstrap 95% interval (where both sides were
  timed: RunRecords), marked improvement / regression / unresolved;
* `reads`: blocking reads per step, and the sites (site + op) whose reads per step were added or removed;
* `idle`: GPU idle per step by class (median over steps, so a warm-up step does not move it);
* `kernels`: kernels added, removed and changed (matched by name), with count and time per step;
* `gpu_step`: the median step's GPU time;
* `launch_path`: kernel launches and launch gap per step on the critical path (where both sides carry the
  kernel-bandwidth block's `launch_path`: runs of a workload that models its kernels' bytes), median
  step of each side and the difference with an interval from independent bootstraps of both.

Never imports torch or plotly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np

from bubblescope.errors import BubblescopeError
from bubblescope.stats import (
    DEFAULT_BOOTSTRAP,
    bootstrap_medians,
    interval,
    is_resolved,
    per_token_samples_ns,
)

DIFF_SCHEMA = "bubblescope.diff/1"
IDLE_CLASSES = ("sync", "host", "launch", "dependency")
# A kernel whose time per step moved less than this (ns) is "unchanged" (timing jitter of one launch).
KERNEL_CHANGE_MIN_NS = 500
KERNELS_SHOWN = 30


@dataclass
class DiffSide:
    """One side of a diff: what was timed (if anything) and what its analysis found."""

    label: str
    kind: str
    per_token_ns: list[np.ndarray] | None
    syncs: list[dict[str, Any]]
    reads_per_step: float | None
    idle_ns_per_step: dict[str, float] | None
    kernels: list[dict[str, Any]] | None
    gpu_step_ns: float | None
    notes: list[str] = field(default_factory=list)
    # An ablation's per-switch attribution (`attribution.switches`), compared switch by switch.
    switches: list[dict[str, Any]] | None = None
    # Launches and launch gap per step (kernel_bandwidth.launch_path), None where not measured.
    launch_path: dict[str, Any] | None = None


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _idle_medians(analysis: dict[str, Any] | None, record_stats: dict[str, Any]) -> dict[str, float] | None:
    steps = [s for s in (analysis or {}).get("steps") or [] if isinstance(s, dict)]
    if steps:
        return {
            c: float(median([_num((s.get("idle_by_class_ns") or {}).get(c)) or 0.0 for s in steps]))
            for c in IDLE_CLASSES
        }
    by_class = record_stats.get("idle_by_class_ns_per_step") or (
        ((analysis or {}).get("summary") or {}).get("idle_by_class_ns_per_step")
    )
    if not isinstance(by_class, dict) or record_stats.get("gpu_measured") is False:
        return None
    return {c: _num(by_class.get(c)) or 0.0 for c in IDLE_CLASSES}


def side_from(
    label: str, kind: str, record: dict[str, Any] | None, analysis: dict[str, Any] | None
) -> DiffSide:
    from bubblescope.profiling.load import PROFILE_SCHEMA, timed_per_token_ns

    record = record or {}
    stats = record.get("analysis") if isinstance(record.get("analysis"), dict) else {}
    per_token = None
    if record.get("schema") == PROFILE_SCHEMA:
        # A profile: TPOT from its timed steps (`profile --timed`), everything else from its analysis.
        per_token = timed_per_token_ns(record)
    elif record.get("samples_ns") and record.get("tokens_per_step"):
        per_token = per_token_samples_ns(record["samples_ns"], record["tokens_per_step"])
    own_syncs = stats.get("syncs") if isinstance(stats.get("syncs"), list) else None
    syncs = own_syncs or (analysis or {}).get("syncs") or []
    reads = _num(stats.get("blocking_reads_per_step"))
    if reads is None:
        reads = _num(((analysis or {}).get("summary") or {}).get("blocking_reads_per_step"))
    gpu_measured = (analysis or {}).get("gpu_measured", stats.get("gpu_measured")) is not False
    summary = (analysis or {}).get("summary") or {}
    kernels = (analysis or {}).get("kernels") if analysis else None
    return DiffSide(
        label=label,
        kind=kind,
        per_token_ns=per_token,
        syncs=[s for s in syncs if isinstance(s, dict)],
        reads_per_step=reads,
        idle_ns_per_step=_idle_medians(analysis, {**stats, "gpu_measured": gpu_measured})
        if gpu_measured
        else None,
        kernels=kernels if isinstance(kernels, list) else None,
        gpu_step_ns=_num(summary.get("gpu_step_ns_median")) if gpu_measured else None,
        launch_path=_launch_path_of(record, analysis) if gpu_measured else None,
    )


def _launch_path_of(record: dict[str, Any], analysis: dict[str, Any] | None) -> dict[str, Any] | None:
    """The analysis' `bandwidth.launch_path`, else the one a RunRecord's `analysis` block copied."""
    block = ((analysis or {}).get("bandwidth") or {}).get("launch_path")
    if not isinstance(block, dict):
        block = (record.get("analysis") or {}).get("launch_path") if isinstance(record, dict) else None
    return block if isinstance(block, dict) and block.get("steps") else None


def load_diff_side(path: str | Path, step_marker: str | None = None) -> DiffSide:
    """A run folder/record, ablation folder (its baseline), analysis JSON or trace(s), as a diff side.

    Raises:
        BubblescopeError: unreadable input (one line naming the path).
    """
    from bubblescope.report.load_inputs import AblationInput, ProfileInput, RunInput, load_inputs

    (item,) = load_inputs([path], step_marker=step_marker)
    label = str(path)
    if isinstance(item, RunInput):
        return side_from(label, "run", item.record, item.analysis)
    if isinstance(item, ProfileInput):
        side = side_from(label, "profile", item.record, item.analysis)
        # The profile loader names the folder in each of its warnings ("<folder>: no analysis.json; …").
        side.notes.extend(item.warnings)
        return side
    if isinstance(item, AblationInput):
        from bubblescope.report.ablation_rows import config_key_with_role

        key = config_key_with_role(item.ablation, "baseline") or ""
        if key not in item.records:
            raise BubblescopeError(f"{path}: the ablation's baseline configuration has no record yet")
        side = side_from(label, "ablation", item.records[key], item.analyses.get(key))
        side.notes.append(f"{path}: an ablation is compared through its baseline configuration ({key})")
        switches = (item.ablation.get("attribution") or {}).get("switches")
        side.switches = [s for s in switches if isinstance(s, dict)] if isinstance(switches, list) else None
        return side
    return side_from(label, "trace", None, item.analysis)


def _tpot(base: DiffSide, cur: DiffSide, n_boot: int, seed: int) -> dict[str, Any]:
    if base.per_token_ns is None or cur.per_token_ns is None:
        return {
            "status": "skipped",
            "reason": "only timed runs have a TPOT (a trace, an analysis, a profile without --timed: none)",
        }
    base_reps = bootstrap_medians(base.per_token_ns, n_boot=n_boot, seed=seed, hierarchical=True) / 1e6
    cur_reps = bootstrap_medians(cur.per_token_ns, n_boot=n_boot, seed=seed + 1, hierarchical=True) / 1e6
    base_ms = float(np.median(np.concatenate(base.per_token_ns))) / 1e6
    cur_ms = float(np.median(np.concatenate(cur.per_token_ns))) / 1e6
    delta_lo, delta_hi = interval(cur_reps - base_reps)
    ratio_lo, ratio_hi = interval(cur_reps / base_reps)
    delta = cur_ms - base_ms
    if not is_resolved(delta, delta_lo, delta_hi):
        change = "unresolved"
    else:
        change = "regression" if delta > 0 else "improvement"
    return {
        "status": "timed",
        "baseline_ms": base_ms,
        "current_ms": cur_ms,
        "delta_ms": {"est": delta, "lo": delta_lo, "hi": delta_hi},
        "ratio": {"est": cur_ms / base_ms, "lo": ratio_lo, "hi": ratio_hi},
        "change": change,
        "interval": "95% CI, two-level bootstrap (repeats, then steps)",
    }


def _line_key(line_exact: Any, read_at: Any) -> str:
    """`your.py(12): main`, or `your.py(12): main → lib.py(80): f` when the read happened in a library."""
    return str(line_exact) if read_at in (None, line_exact) else f"{line_exact} → {read_at}"


def _exact_parts(sync: dict[str, Any]) -> list[tuple[str, float]]:
    """(exact line, reads per step) of one syncs[] row: `lines_exact[]` (run / ablate rows), or the row's
    own `line_exact` when the whole row was tied to one line (profile rows); [] when none was captured."""
    entries = sync.get("lines_exact")
    if isinstance(entries, list) and entries:
        return [
            (_line_key(e.get("line_exact"), e.get("read_at")), _num(e.get("per_step")) or 0.0)
            for e in entries
            if isinstance(e, dict) and e.get("line_exact")
        ]
    if sync.get("line") == "exact" and sync.get("line_exact"):
        return [(_line_key(sync["line_exact"], sync.get("read_at")), _num(sync.get("per_step")) or 0.0)]
    return []


def has_exact_lines(syncs: list[dict[str, Any]]) -> bool:
    """True when the read tap tied at least one of these reads to its exact line."""
    return any(_exact_parts(s) for s in syncs if isinstance(s, dict))


def reads_by_line(
    syncs: list[dict[str, Any]], *, exact: bool = True
) -> tuple[dict[tuple[str, str], float], int]:
    """Reads per step keyed by (where, op), and how many rows fell back to the trace's site.

    `where` is the exact line the read tap captured (your line, then `→ library line` when the read
    happened inside a library); reads with no captured line (made in C++ or a compiled graph, or a run
    without the tap) keep the trace's `site`. `exact=False` keys every row by the trace's site.
    """
    keyed: dict[tuple[str, str], float] = {}
    fallbacks = 0
    for sync in syncs:
        if not isinstance(sync, dict):
            continue
        op = str(sync.get("op") or sync.get("api") or "?")
        per_step = _num(sync.get("per_step")) or 0.0
        parts = _exact_parts(sync) if exact else []
        for where, part in parts:
            keyed[(where, op)] = keyed.get((where, op), 0.0) + part
        rest = per_step - sum(part for _, part in parts)
        if not parts or rest > 1e-9:
            fallbacks += 1
            key = (str(sync.get("site", "unknown")), op)
            keyed[key] = keyed.get(key, 0.0) + (rest if parts else per_step)
    return keyed, fallbacks


def compared_reads(
    baseline: list[dict[str, Any]], current: list[dict[str, Any]]
) -> tuple[dict[tuple[str, str], float], dict[tuple[str, str], float], list[str]]:
    """Both sides' reads keyed the same way: by exact line when both sides captured lines, else by the
    trace's site (a side recorded without the read tap has no line to match). Notes say which."""
    exact = has_exact_lines(baseline) and has_exact_lines(current)
    (before, base_fallbacks), (after, cur_fallbacks) = (
        reads_by_line(baseline, exact=exact),
        reads_by_line(current, exact=exact),
    )
    notes = []
    if not exact and (has_exact_lines(baseline) or has_exact_lines(current)):
        notes.append("reads compared by the trace's site: one side has no exact lines (no read tap)")
    elif exact and base_fallbacks + cur_fallbacks:
        notes.append(
            f"reads compared by exact line; {base_fallbacks + cur_fallbacks} site(s) with no captured line "
            "(made in C++ or a compiled graph) compared by the trace's site"
        )
    return before, after, notes


_LINE_NUMBER = re.compile(r"\(\d+\)")


def moved_reads(
    before: dict[tuple[str, str], float], after: dict[tuple[str, str], float]
) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """(old key, new key) of reads that only moved: made at the same library line (`→ read_at`), with the
    same op and reads per step, from the same file and function of the user's at another line number
    (an edit above the call shifted it), so a diff does not list one read removed and another added.
    A read in the user's own code has no such anchor: a changed line there stays added + removed."""
    gone = [key for key in before if key not in after]
    moved = []
    for key in (k for k in after if k not in before):
        shape = _moved_shape(key)
        match = next(
            (
                old
                for old in gone
                if shape and _moved_shape(old) == shape and abs(before[old] - after[key]) <= 1e-9
            ),
            None,
        )
        if match is not None:
            gone.remove(match)
            moved.append((match, key))
    return moved


def _moved_shape(key: tuple[str, str]) -> tuple[str, str, str] | None:
    user, arrow, library = key[0].partition(" → ")
    return (_LINE_NUMBER.sub("", user), library, key[1]) if arrow else None


def _reads(base: DiffSide, cur: DiffSide) -> tuple[dict[str, Any], list[str]]:
    before, after, notes = compared_reads(base.syncs, cur.syncs)
    moved_pairs = moved_reads(before, after)
    unchanged = {key for pair in moved_pairs for key in pair}
    added, removed = [], []
    for key in sorted((set(before) | set(after)) - unchanged):
        b, a = before.get(key, 0.0), after.get(key, 0.0)
        row = {"site": key[0], "op": key[1], "baseline_per_step": b, "current_per_step": a}
        if a > b + 1e-9:
            added.append(row)
        elif b > a + 1e-9:
            removed.append(row)
    moved = [
        {
            "from_site": old[0],
            "site": new[0],
            "op": new[1],
            "baseline_per_step": before[old],
            "current_per_step": after[new],
        }
        for old, new in moved_pairs
    ]
    return {
        "baseline_per_step": base.reads_per_step,
        "current_per_step": cur.reads_per_step,
        "compared_by": "exact line" if has_exact_lines(base.syncs) and has_exact_lines(cur.syncs) else "site",
        "added": added,
        "removed": removed,
        "moved": moved,
    }, notes


def _idle(base: DiffSide, cur: DiffSide) -> dict[str, Any] | None:
    if base.idle_ns_per_step is None or cur.idle_ns_per_step is None:
        return None
    return {
        c: {
            "baseline_ns": base.idle_ns_per_step[c],
            "current_ns": cur.idle_ns_per_step[c],
            "delta_ns": cur.idle_ns_per_step[c] - base.idle_ns_per_step[c],
        }
        for c in IDLE_CLASSES
    }


def _kernels(base: DiffSide, cur: DiffSide) -> dict[str, Any] | None:
    if base.kernels is None or cur.kernels is None:
        return None
    before = {str(k.get("name")): k for k in base.kernels if isinstance(k, dict)}
    after = {str(k.get("name")): k for k in cur.kernels if isinstance(k, dict)}

    def brief(k: dict[str, Any]) -> dict[str, Any]:
        return {
            "name": str(k.get("name")),
            "count_per_step": _num(k.get("count_per_step")),
            "ns_per_step": _num(k.get("ns_per_step")),
        }

    added = sorted(
        (brief(after[n]) for n in after.keys() - before.keys()), key=lambda k: -(k["ns_per_step"] or 0)
    )
    removed = sorted(
        (brief(before[n]) for n in before.keys() - after.keys()), key=lambda k: -(k["ns_per_step"] or 0)
    )
    changed = []
    for name in before.keys() & after.keys():
        b_ns, a_ns = _num(before[name].get("ns_per_step")) or 0.0, _num(after[name].get("ns_per_step")) or 0.0
        b_count = _num(before[name].get("count_per_step"))
        a_count = _num(after[name].get("count_per_step"))
        if abs(a_ns - b_ns) < KERNEL_CHANGE_MIN_NS and b_count == a_count:
            continue
        changed.append(
            {
                "name": name,
                "baseline_ns_per_step": b_ns,
                "current_ns_per_step": a_ns,
                "delta_ns_per_step": a_ns - b_ns,
                "baseline_count_per_step": b_count,
                "current_count_per_step": a_count,
            }
        )
    changed.sort(key=lambda k: -abs(k["delta_ns_per_step"]))
    return {
        "added": added[:KERNELS_SHOWN],
        "removed": removed[:KERNELS_SHOWN],
        "changed": changed[:KERNELS_SHOWN],
        "slower": [k["name"] for k in changed if k["delta_ns_per_step"] > 0][:KERNELS_SHOWN],
    }


# analysis key of each per-step measure -> the key of its per-step values in `launch_path`.
LAUNCH_PATH_MEASURES = {
    "launches_per_step": "launches_by_step",
    "launch_gap_ns_per_step": "launch_gap_ns_by_step",
}


def _launch_path(base: DiffSide, cur: DiffSide, n_boot: int, seed: int) -> dict[str, Any] | None:
    """Per measure: each side's median step {est, lo, hi} and current − baseline with its interval
    (independent bootstraps of each side's steps, replicate by replicate)."""
    if base.launch_path is None or cur.launch_path is None:
        return None
    out: dict[str, Any] = {"interval": "95% CI, independent bootstraps of each side's profiled steps"}
    for offset, (measure, values_key) in enumerate(LAUNCH_PATH_MEASURES.items()):
        values = [
            np.asarray(side.launch_path.get(values_key) or [], dtype=np.float64) for side in (base, cur)
        ]
        if not all(len(v) for v in values):
            out[measure] = None
            continue
        base_reps, cur_reps = (
            bootstrap_medians([v], n_boot=n_boot, seed=seed + 2 * offset + i) for i, v in enumerate(values)
        )
        delta_lo, delta_hi = interval(cur_reps - base_reps)
        out[measure] = {
            "baseline": base.launch_path.get(measure),
            "current": cur.launch_path.get(measure),
            "delta": {
                "est": float(np.median(values[1]) - np.median(values[0])),
                "lo": delta_lo,
                "hi": delta_hi,
            },
        }
    return out


def _switches(base: DiffSide, cur: DiffSide) -> list[dict[str, Any]] | None:
    """Per switch in either ablation: its `alone` saving on both sides (ms, with intervals)."""
    if base.switches is None or cur.switches is None:
        return None
    before = {str(s.get("name")): s.get("alone_ms") for s in base.switches}
    after = {str(s.get("name")): s.get("alone_ms") for s in cur.switches}
    return [
        {"name": name, "baseline_alone_ms": before.get(name), "current_alone_ms": after.get(name)}
        for name in list(before) + [n for n in after if n not in before]
    ]


def compute_diff(
    base: DiffSide, cur: DiffSide, *, n_boot: int = DEFAULT_BOOTSTRAP, seed: int = 0
) -> dict[str, Any]:
    """The `bubblescope.diff/1` dict of two sides (current minus baseline; positive = more/slower)."""
    gpu_step = None
    if base.gpu_step_ns is not None and cur.gpu_step_ns is not None:
        gpu_step = {
            "baseline_ns": base.gpu_step_ns,
            "current_ns": cur.gpu_step_ns,
            "delta_ns": cur.gpu_step_ns - base.gpu_step_ns,
        }
    reads, read_notes = _reads(base, cur)
    notes = base.notes + cur.notes + read_notes
    if base.idle_ns_per_step is None or cur.idle_ns_per_step is None:
        notes.append("GPU idle is compared only where both sides measured GPU activity")
    if (base.launch_path is None) != (cur.launch_path is None):
        notes.append(
            "launches and launch gap per step are compared only where both sides carry the kernel "
            "bandwidth block (runs of a workload that models its kernels' bytes)"
        )
    return {
        "schema": DIFF_SCHEMA,
        "baseline": {"path": base.label, "kind": base.kind},
        "current": {"path": cur.label, "kind": cur.kind},
        "tpot": _tpot(base, cur, n_boot, seed),
        "reads": reads,
        "idle_per_step": _idle(base, cur),
        "kernels": _kernels(base, cur),
        "gpu_step": gpu_step,
        "launch_path": _launch_path(base, cur, n_boot, seed),
        "switches": _switches(base, cur),
        "notes": notes,
    }


def run_diff(baseline: str | Path, current: str | Path, step_marker: str | None = None) -> dict[str, Any]:
    """Load both sides and diff them; raises BubblescopeError (exit 2) on bad input."""
    return compute_diff(load_diff_side(baseline, step_marker), load_diff_side(current, step_marker))
