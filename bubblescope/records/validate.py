"""Checks for documents bubblescope reads back: RunRecords' trace-derived blocks, paths named inside
records and manifests, and whether two records can be compared at all.

Records, analyses and ablation folders come from colleagues, CI artifacts and bug reports, so every
reader (gate, report, ablate resume, ablate --reanalyze) goes through these checks and turns what
fails into one RecordError line (exit code 2) instead of a traceback or a silently wrong verdict.
Nothing here imports torch.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

from bubblescope.errors import RecordError

# Keys of runs/<key>.json: "base" or switch names joined by "+" (bubblescope.ablate.plan.config_key).
_SAFE_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,199}")
# Numbers of a record's `analysis` block that count or time something: finite and >= 0 when present.
_ANALYSIS_NUMBERS = (
    "gpu_busy_ns_per_step",
    "idle_ns_per_step",
    "kernels_per_step",
    "profiled_step_over_timed",
)
_SYNC_NUMBERS = ("per_step", "count", "blocked_ns", "bubble_ns", "wait_ns")
_SYNC_COUNTED = ("per_step", "count")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# A RunRecord nests about 6 levels (tp.ranks[].…); anything far deeper is damage, and would make any
# recursive consumer (renderers, json.dumps) hit Python's recursion limit.
MAX_DOCUMENT_DEPTH = 64


def check_depth(doc: Any, source: str, max_depth: int = MAX_DOCUMENT_DEPTH) -> None:
    """Refuse a document nested deeper than `max_depth` (walked without recursion).

    Raises:
        RecordError: one line naming the document.
    """
    stack: list[tuple[Any, int]] = [(doc, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            raise RecordError(f"{source}: nested deeper than {max_depth} levels; not a bubblescope document")
        if isinstance(node, dict):
            stack.extend((value, depth + 1) for value in node.values())
        elif isinstance(node, list):
            stack.extend((value, depth + 1) for value in node)


def check_count(value: Any, where: str) -> float:
    """A finite number >= 0 (a count or a duration), as float.

    Raises:
        RecordError: `where` and what was found instead.
    """
    if not _is_number(value) or not math.isfinite(value) or value < 0:
        raise RecordError(f"{where} is {_short(value)}; expected a finite number >= 0")
    return float(value)


def _short(value: Any) -> str:
    """A value for an error line: its repr cut to 40 characters, containers named by type."""
    if isinstance(value, (dict, list)):
        return f"a {type(value).__name__}"
    text = ascii(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _listed(value: Any) -> str:
    """A warning's value: a list of names spelled out ("bf16_gate, pdl"; "none"), else `_short`."""
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        return _short(", ".join(value) or "none").strip("'\"")
    return _short(value)


def check_syncs(syncs: Any, where: str) -> None:
    """`syncs` of an analysis block or analysis/1: a list of objects whose counts are finite and >= 0."""
    if not isinstance(syncs, list):
        raise RecordError(f"{where} is {_short(syncs)}; expected a list of read sites")
    for index, sync in enumerate(syncs):
        if not isinstance(sync, dict):
            raise RecordError(f"{where}[{index}] is {_short(sync)}; expected an object")
        for key in _SYNC_NUMBERS:
            # per_step and count are what a verdict adds up: present means a number, never null.
            if sync.get(key) is not None or (key in _SYNC_COUNTED and key in sync):
                check_count(sync[key], f"{where}[{index}].{key}")
        for key in ("site", "op"):
            if sync.get(key) is not None and not isinstance(sync[key], str):
                raise RecordError(f"{where}[{index}].{key} is {_short(sync[key])}; expected a string")


def check_analysis_block(analysis: Any, source: str) -> None:
    """A RunRecord's `analysis` block (null allowed: a run without a profiled window).

    An empty block, NaN/negative/string reads per step, a dict for `syncs` and the like are refused:
    the gate would otherwise read them as "0 reads" and pass.

    Raises:
        RecordError: one line naming the field.
    """
    if analysis is None:
        return
    where = f"{source}: analysis"
    if not isinstance(analysis, dict) or not analysis:
        raise RecordError(f"{where} is {_short(analysis)}; expected the analysis of the profiled steps")
    if "blocking_reads_per_step" not in analysis:
        raise RecordError(f"{where}.blocking_reads_per_step is missing")
    check_count(analysis["blocking_reads_per_step"], f"{where}.blocking_reads_per_step")
    check_syncs(analysis.get("syncs", []), f"{where}.syncs")
    for key in _ANALYSIS_NUMBERS:
        if analysis.get(key) is not None:
            check_count(analysis[key], f"{where}.{key}")
    idle = analysis.get("idle_by_class_ns_per_step")
    if idle is not None:
        if not isinstance(idle, dict):
            raise RecordError(f"{where}.idle_by_class_ns_per_step is {_short(idle)}; expected an object")
        for cls, value in idle.items():
            # null: not measured (a CPU run; bubblescope.analysis.not_measured)
            if value is not None:
                check_count(value, f"{where}.idle_by_class_ns_per_step.{cls}")
    if analysis.get("gpu_measured") is not None and not isinstance(analysis["gpu_measured"], bool):
        raise RecordError(f"{where}.gpu_measured is {_short(analysis['gpu_measured'])}; expected true/false")


def check_analysis_document(analysis: Any, source: str) -> None:
    """The parts of an analysis/1 document a verdict is built from: summary reads per step and syncs."""
    if not isinstance(analysis, dict):
        raise RecordError(f"{source}: analysis is {_short(analysis)}; expected an object")
    summary = analysis.get("summary")
    if not isinstance(summary, dict):
        raise RecordError(f"{source}: analysis summary is {_short(summary)}; expected an object")
    check_count(summary.get("blocking_reads_per_step"), f"{source}: summary.blocking_reads_per_step")
    check_syncs(analysis.get("syncs", []), f"{source}: syncs")


def check_safe_key(key: Any, source: str) -> str:
    """An ablation configuration key usable as a file name in runs/ (no separator, no leading dot)."""
    if not isinstance(key, str) or not _SAFE_KEY.fullmatch(key) or ".." in key:
        raise RecordError(f"{source}: configuration key {_short(key)} is not a plain file name; refusing it")
    return key


def contained_path(root: str | os.PathLike[str], relative: Any, *, what: str, source: str) -> Path:
    """`root / relative`, refused unless it stays inside `root` once resolved (symlinks followed).

    Records and manifests name their files relative to their folder; an edited one could name
    `../../x` or an absolute path and make a reader read, or a writer create, files anywhere.

    Args:
        root: the folder every named file must stay in (the ablation or run folder).
        relative: the name read from the document (must be a non-empty string).
        what: what the name is, for the message (e.g. "analysis_file").
        source: the document it came from.
    Returns:
        the joined (not resolved) path.
    Raises:
        RecordError: one line naming the field, its value and the folder.
    """
    if not isinstance(relative, str) or not relative or "\x00" in relative:
        raise RecordError(f"{source}: {what} is {_short(relative)}; expected a relative file name")
    root_path = Path(root)
    joined = root_path / relative
    try:
        inside = joined.resolve().is_relative_to(root_path.resolve())
    except (OSError, RuntimeError, ValueError):
        inside = False
    if Path(relative).is_absolute() or not inside:
        raise RecordError(
            f"{source}: {what} {_short(relative)} points outside {root_path}; refusing to read or write it"
        )
    return joined


def _identity(record: dict[str, Any]) -> dict[str, Any]:
    """What a gate needs equal on both sides, read defensively (records are validated, traces are not)."""
    workload = record.get("workload") if isinstance(record.get("workload"), dict) else {}
    options = workload.get("options") if isinstance(workload.get("options"), dict) else {}
    environment = record.get("environment") if isinstance(record.get("environment"), dict) else {}
    settings = record.get("settings") if isinstance(record.get("settings"), dict) else {}
    switches = record.get("switches") if isinstance(record.get("switches"), dict) else {}
    enabled = switches.get("enabled") if isinstance(switches.get("enabled"), list) else []
    return {
        "workload": (workload.get("name"), workload.get("factory")),
        "preset": record.get("preset"),
        "options": {k: v for k, v in options.items() if k != "seed"} or _MISSING,
        "seed": options.get("seed"),
        "device": environment.get("device"),
        "gpu": environment.get("gpu"),
        "timing": settings.get("timing", _MISSING),
        "steps": tuple(settings.get(k) for k in ("steps", "warmup", "repeats")),
        "switches": sorted(str(name) for name in enabled),
    }


# (identity field, what it is) pairs: a difference in the first group makes TPOT meaningless to
# compare; in the second it is legal (e.g. a PR that turns on a switch) but weakens the verdict.
_REFUSED = (
    ("workload", "workload"),
    ("preset", "preset"),
    ("options", "workload options (spec, block, accept length, routing overlap, path)"),
    ("device", "device"),
    ("gpu", "GPU"),
    ("timing", "timing method"),
)
# Fields added within run/1 (docs/SCHEMAS.md): an older record lacks them, which is not a difference.
_ADDED_LATER = ("options", "timing")
_MISSING = "<missing>"
_WARNED = (
    ("switches", "switch set"),
    ("steps", "step settings (steps, warmup, repeats)"),
    ("seed", "weight seed"),
)


def compare_records(baseline: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Refuse two RunRecords whose TPOTs cannot be compared; warnings for legal but weak comparisons.

    Returns:
        warning lines (empty when the records describe the same workload, settings and machine).
    Raises:
        RecordError: one line naming the first difference that makes the comparison meaningless.
    """
    before, after = _identity(baseline), _identity(current)
    warnings = []
    for key, label in _REFUSED:
        if before[key] == after[key]:
            continue
        if key in _ADDED_LATER and _MISSING in (before[key], after[key]):
            # A record written before the field existed: cannot tell, so say so instead of refusing.
            side = "baseline" if before[key] == _MISSING else "current"
            warnings.append(f"the {side} record does not say its {label}; assuming it matches")
            continue
        raise RecordError(
            f"the records differ in {label} (baseline {_short(before[key])}, current "
            f"{_short(after[key])}); their TPOT cannot be compared"
        )
    return warnings + [
        f"{label} differs (baseline {_listed(before[key])}, current {_listed(after[key])}); "
        "the verdict compares different setups"
        for key, label in _WARNED
        if before[key] != after[key]
    ]


def _reads_counted_on_gpu(side: Any) -> bool | None:
    """How a gate side's reads were counted: True by GPU sync detection, False from CPU readback ops."""
    if side.kind == "record":
        measured = ((side.record or {}).get("analysis") or {}).get("gpu_measured")
        return measured if isinstance(measured, bool) else None
    # A trace: analysed (it has GPU activity) or its ATen readback ops counted (bubblescope.gate).
    return side.meta.get("source") == "analysis"


def compare_read_counts(
    baseline_gpu: bool | None, current_gpu: bool | None, baseline: str, current: str
) -> None:
    """Refuse reads counted two ways: GPU sync detection on one side, ATen readback ops on the other.

    Args:
        baseline_gpu / current_gpu: True when that side's reads come from a GPU trace's sync
            detection, False when counted from ATen readback ops (CPU runs), None when unknown.
    """
    if None in (baseline_gpu, current_gpu) or baseline_gpu == current_gpu:
        return
    gpu_side, cpu_side = (baseline, current) if baseline_gpu else (current, baseline)
    raise RecordError(
        f"{gpu_side} counted blocking reads on a GPU, {cpu_side} from a CPU trace's readback ops; "
        "the counts cannot be compared (gate two GPU runs, or two CPU runs)"
    )


def check_gate_pair(baseline: Any, current: Any) -> list[str]:
    """What the gate must know before comparing two inputs (bubblescope.gate.GateInput).

    Returns:
        warnings for a legal but weak comparison.
    Raises:
        RecordError: reads counted two ways, or two records whose TPOT cannot be compared.
    """
    compare_read_counts(
        _reads_counted_on_gpu(baseline), _reads_counted_on_gpu(current), baseline.path, current.path
    )
    if baseline.kind == current.kind == "record" and baseline.record and current.record:
        return compare_records(baseline.record, current.record)
    return []
