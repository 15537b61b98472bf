"""Re-analyse a finished ablation from its stored traces, without measuring anything again.

When the analysis improves (or a bug in it is fixed), the timed samples in each RunRecord stay valid;
only what was derived from the profiled traces — blocking reads, idle by class, GPU busy — and the
attribution built on it are stale. This recomputes them from the `*.trace.json.gz` files beside the
records and rewrites records, analysis files and `ablation.json` atomically. A tensor-parallel
ablation (`ablate --tp`) is re-analysed on every rank, and its `tp` blocks are rebuilt.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bubblescope.ablate.attribution import attribute
from bubblescope.ablate.plan import AblationPlan, plan_ablation
from bubblescope.ablate.store import AblationStore, load_ablation
from bubblescope.atomic import write_json_atomic
from bubblescope.errors import RecordError
from bubblescope.records import RunRecord, save_record


def plan_of(manifest: dict[str, Any]) -> AblationPlan:
    """The plan an ablation was measured with, rebuilt from its manifest (sampled orderings are seeded)."""
    toggles = list(manifest["toggles"])
    method = str(manifest.get("shapley_method", "exact"))
    if method == "exact":
        return plan_ablation(toggles, manifest.get("order"), max_exact=len(toggles))
    permutations = int(method.split(":", 1)[1]) if ":" in method else len(manifest.get("permutations", []))
    return plan_ablation(toggles, manifest.get("order"), max_exact=0, permutations=permutations)


def reanalyze_record(record: RunRecord, record_path: Path) -> RunRecord:
    """Recompute a record's `analysis` block (and its analysis file) from its trace; save it."""
    from bubblescope.capture.measure import add_profiled_ratio, analysis_block

    trace_name = record.get("trace")
    if not trace_name:
        return record
    trace_path = record_path.parent / trace_name
    if not trace_path.is_file():
        raise RecordError(f"{record_path}: its trace {trace_name} is missing; cannot re-analyse")
    on_cuda = record.get("environment", {}).get("device") == "cuda"
    record["analysis"], full = analysis_block(trace_path, on_cuda)
    add_profiled_ratio(record["analysis"], full, record.get("samples_ns") or [])
    if full is not None:
        analysis_file = record.get("analysis_file") or f"{record_path.stem}.analysis.json"
        write_json_atomic(record_path.parent / analysis_file, full)
        record["analysis_file"] = analysis_file
    save_record(record, record_path)
    return record


def _reanalyze_config(record: RunRecord, record_path: Path) -> RunRecord:
    """A configuration's record re-analysed; a tensor-parallel one with every rank's record and trace."""
    if isinstance(record.get("tp"), dict):
        from bubblescope.ablate.tp import reanalyze_tp_record

        return reanalyze_tp_record(record, record_path)
    return reanalyze_record(record, record_path)


def reanalyze_ablation(root: str | Path) -> dict[str, Any]:
    """Re-analyse every measured configuration of the ablation at `root` and rebuild its attribution.

    Returns:
        the new attribution block (None when some configuration is still pending).
    """
    store = AblationStore(root)
    manifest, records = load_ablation(root)
    plan = plan_of(manifest)
    done = {key: _reanalyze_config(record, store.record_path(key)) for key, record in records.items()}
    complete = all(config.key in done for config in plan.configs)
    attribution = attribute(plan, done) if complete else None
    identity = {key: manifest.get(key) for key in ("workload", "preset", "settings")}
    store.write_manifest(plan, identity, done, attribution)
    return attribution
