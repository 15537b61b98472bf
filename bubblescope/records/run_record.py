"""RunRecord (`bubblescope.run/1`): build the summary, validate, load and save.

A RunRecord is a plain JSON dict (see docs/SCHEMAS.md); this module is its only reader and writer,
and never imports torch, so `gate` runs on a CI box without it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from bubblescope.errors import RecordError
from bubblescope.files.atomic import write_json_atomic
from bubblescope.records.sample_budget import check_sample_budget
from bubblescope.records.validate import check_analysis_block, check_count, check_depth
from bubblescope.stats import (
    DEFAULT_BOOTSTRAP,
    bootstrap_medians,
    interval,
    per_token_samples_ns,
    stable_seed,
)

RUN_SCHEMA = "bubblescope.run/1"
MAX_RECORD_BYTES = 64 * 1024 * 1024
# Step times and token counts are int64 on every path that computes with them (numpy, float64 ns).
_MAX_SAMPLE = 2**63 - 1

# RunRecord is a JSON dict; the alias names what a function takes or returns.
RunRecord = dict[str, Any]

_REQUIRED: dict[str, type | tuple[type, ...]] = {
    "schema": str,
    "created_utc": str,
    "environment": dict,
    "workload": dict,
    "switches": dict,
    "settings": dict,
    "samples_ns": list,
    "tokens_per_step": list,
    "summary": dict,
}
_OPTIONAL_NULLABLE: dict[str, type | tuple[type, ...]] = {
    "preset": str,
    "floor": dict,
    "analysis": dict,
    "trace": str,
    "analysis_file": str,
    "report": str,
}


def tpot_seed(workload_name: Any, enabled: Iterable[str]) -> int:
    """The bootstrap seed of one configuration's TPOT: its workload name and switches, nothing else.

    `run`, `ablate` (its attribution) and every re-summary draw the same replicates from it, so one
    configuration shows one interval in every table of every page (docs/intervals.md).
    """
    return stable_seed(workload_name, tuple(sorted(enabled)))


def tpot_replicates_ns(
    samples_ns: list[list[int]],
    tokens_per_step: list[list[int]],
    *,
    seed: int,
    n_boot: int = DEFAULT_BOOTSTRAP,
) -> tuple[float, np.ndarray]:
    """Point TPOT (ns per token) and its [n_boot] two-level bootstrap replicates (repeats, then steps).

    The one computation behind every TPOT interval: a record's summary and the ablation's per-config
    intervals, differences and Shapley values all come from these replicates.
    """
    per_repeat = per_token_samples_ns(samples_ns, tokens_per_step)
    point_ns = float(np.median(np.concatenate(per_repeat)))
    return point_ns, bootstrap_medians(per_repeat, n_boot=n_boot, seed=seed, hierarchical=True)


def tpot_interval_of(replicates_ns: np.ndarray) -> list[float]:
    """[lo, hi] ms of TPOT replicates in ns: rounded once, the same way for every surface."""
    lo_ns, hi_ns = interval(replicates_ns)
    return [lo_ns / 1e6, hi_ns / 1e6]


def record_tpot_replicates_ns(record: RunRecord, n_boot: int = DEFAULT_BOOTSTRAP) -> tuple[float, np.ndarray]:
    """`tpot_replicates_ns` of a RunRecord, seeded as `capture.measure` seeded its summary."""
    seed = tpot_seed(record.get("workload", {}).get("name"), record["switches"].get("enabled", []))
    return tpot_replicates_ns(record["samples_ns"], record["tokens_per_step"], seed=seed, n_boot=n_boot)


def mean_tokens_per_step(record: RunRecord) -> float:
    """Tokens per timed step of a RunRecord (1 for plain decoding, the accept length for speculative)."""
    summary = record.get("summary") or {}
    tokens, steps, repeats = (summary.get(k) for k in ("tokens", "steps", "repeats"))
    counts = [v for v in (tokens, steps, repeats) if isinstance(v, int | float) and not isinstance(v, bool)]
    if len(counts) == 3 and all(v > 0 for v in counts):
        return float(counts[0]) / (float(counts[1]) * float(counts[2]))
    return 1.0


def summarize_samples(
    samples_ns: list[list[int]], tokens_per_step: list[list[int]], *, seed: int = 0
) -> dict[str, Any]:
    """The `summary` block: TPOT median (ms) with its bootstrap 95% interval, tokens/s, counts.

    `tpot_ci95_ms` and `tpot_ci95_two_level_ms` are the same two-level interval (older records'
    `tpot_ci95_ms` resampled steps only; readers prefer the two-level key).
    """
    est_ns, replicates_ns = tpot_replicates_ns(samples_ns, tokens_per_step, seed=seed)
    ci_ms = tpot_interval_of(replicates_ns)
    tokens = int(sum(sum(r) for r in tokens_per_step))
    return {
        "tpot_ms": est_ns / 1e6,
        "tpot_ci95_ms": list(ci_ms),
        "tpot_ci95_two_level_ms": list(ci_ms),
        "tokens_per_s": 1e9 / est_ns if est_ns > 0 else 0.0,
        "steps": len(samples_ns[0]) if samples_ns else 0,
        "repeats": len(samples_ns),
        "tokens": tokens,
    }


def _check_matrix(record: RunRecord, key: str) -> None:
    matrix = record[key]
    if not matrix or not all(isinstance(row, list) and row for row in matrix):
        raise RecordError(f"{key} must be a non-empty list of non-empty lists")
    for row in matrix:
        for value in row:
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_SAMPLE:
                shown = repr(value) if len(repr(value)) <= 40 else f"{repr(value)[:37]}..."
                raise RecordError(f"{key} holds {shown}; expected integers from 0 to 2**63-1")


def _check_identity_fields(record: RunRecord, source: str) -> None:
    """The fields readers compare (gate, ablate resume): strings where strings, counts where counts."""
    for block, key in (("environment", "device"), ("environment", "gpu"), ("workload", "name")):
        value = record[block].get(key)
        if value is not None and not isinstance(value, str):
            raise RecordError(f"{source}: {block}.{key} must be a string or null")
    for key in ("steps", "warmup", "repeats", "profile_steps"):
        value = record["settings"].get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise RecordError(f"{source}: settings.{key} must be an integer >= 0")


def validate_record(record: Any, *, source: str = "record", budget: bool = True) -> RunRecord:
    """Check a RunRecord's schema, required fields and sample shapes; return it unchanged.

    Args:
        record: the parsed JSON.
        source: the file, for messages.
        budget: also refuse more samples than `check_sample_budget` allows (records read for
            statistics; a record being saved is checked without it).

    Raises:
        RecordError: one line naming the first problem.
    """
    if not isinstance(record, dict):
        raise RecordError(f"{source}: not a JSON object")
    # Before the depth walk, which visits every sample.
    if budget:
        check_sample_budget(record, source)
    check_depth(record, source)
    schema = record.get("schema")
    if schema != RUN_SCHEMA:
        raise RecordError(f"{source}: schema {schema!r} is not {RUN_SCHEMA!r}")
    for key, kind in _REQUIRED.items():
        if not isinstance(record.get(key), kind):
            raise RecordError(
                f"{source}: field {key!r} is missing or not a {getattr(kind, '__name__', kind)}"
            )
    for key, kind in _OPTIONAL_NULLABLE.items():
        if record.get(key) is not None and not isinstance(record[key], kind):
            raise RecordError(f"{source}: field {key!r} must be {kind.__name__} or null")
    try:
        _check_matrix(record, "samples_ns")
        _check_matrix(record, "tokens_per_step")
        if [len(r) for r in record["samples_ns"]] != [len(r) for r in record["tokens_per_step"]]:
            raise RecordError("samples_ns and tokens_per_step differ in shape")
        per_token_samples_ns(record["samples_ns"], record["tokens_per_step"])
    except RecordError as exc:
        raise RecordError(f"{source}: {exc}") from None
    summary = record["summary"]
    if "tpot_ms" not in summary:
        raise RecordError(f"{source}: summary.tpot_ms is missing")
    check_count(summary["tpot_ms"], f"{source}: summary.tpot_ms")
    enabled = record["switches"].get("enabled")
    if not isinstance(enabled, list) or not all(isinstance(name, str) for name in enabled):
        raise RecordError(f"{source}: switches.enabled must be a list of switch names")
    _check_identity_fields(record, source)
    check_analysis_block(record.get("analysis"), source)
    return record


def load_record(path: str | os.PathLike[str]) -> RunRecord:
    """Read and validate a RunRecord file (or a run folder holding `record.json`)."""
    record_path = Path(path)
    if record_path.is_dir():
        record_path = record_path / "record.json"
    if not record_path.is_file():
        raise RecordError(f"RunRecord not found: {record_path}")
    if record_path.stat().st_size > MAX_RECORD_BYTES:
        raise RecordError(f"{record_path}: larger than {MAX_RECORD_BYTES >> 20} MiB; not a RunRecord")
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise RecordError(f"{record_path}: not valid JSON ({type(exc).__name__})") from None
    except RecursionError:
        raise RecordError(f"{record_path}: JSON nested too deeply to be a RunRecord") from None
    return validate_record(record, source=str(record_path))


def save_record(record: RunRecord, path: str | os.PathLike[str]) -> Path:
    """Validate then write a RunRecord atomically."""
    validate_record(record, source=str(path), budget=False)
    return write_json_atomic(path, record)
