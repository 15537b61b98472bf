"""Re-analyse a finished ablation from its stored traces, without measuring anything again.

When the analysis improves (or a bug in it is fixed), the timed samples in each RunRecord stay valid;
only what was derived from the profiled traces — blocking reads, idle by class, GPU busy — and the
attribution built on it are stale. This recomputes them from the `*.trace.json.gz` files beside the
records and rewrites records, analysis files and `ablation.json` atomically. A tensor-parallel
ablation (`ablate --tp`) is re-analysed on every rank, and its `tp` blocks are rebuilt.

The folder may have been edited: every key, trace and analysis file named by the manifest or a record
must be a plain file name inside the ablation folder, or the whole re-analysis is refused (exit 2)
before anything is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bubblescope.ablate.attribution import attribute
from bubblescope.ablate.plan import AblationPlan, plan_ablation
from bubblescope.ablate.reanalyze_record import own_file, reanalyze_record
from bubblescope.ablate.store import AblationStore, load_ablation
from bubblescope.ablate.tp import reanalyze_tp_record
from bubblescope.errors import RecordError
from bubblescope.records.run_record import RunRecord
from bubblescope.records.validate import check_safe_key


def plan_of(manifest: dict[str, Any]) -> AblationPlan:
    """The plan an ablation was measured with, rebuilt from its manifest (sampled orderings are seeded)."""
    toggles = manifest.get("toggles")
    if not isinstance(toggles, list) or not all(isinstance(name, str) for name in toggles):
        raise RecordError("ablation.json: 'toggles' must be a list of switch names")
    method = str(manifest.get("shapley_method", "exact"))
    if method == "exact":
        plan = plan_ablation(list(toggles), manifest.get("order"), max_exact=len(toggles))
    else:
        try:
            permutations = int(method.split(":", 1)[1]) if ":" in method else len(manifest["permutations"])
        except (ValueError, TypeError, KeyError):
            raise RecordError(
                f"ablation.json: shapley_method {method[:40]!r} is not exact or sampled:<n>"
            ) from None
        plan = plan_ablation(list(toggles), manifest.get("order"), max_exact=0, permutations=permutations)
    for config in plan.configs:
        check_safe_key(config.key, "ablation.json")
    return plan


def _check_config_files(record: RunRecord, record_path: Path, root: Path) -> None:
    """Refuse, before anything is written, a record whose trace or analysis file leaves the folder."""
    if record.get("trace"):
        own_file(record_path, root, record["trace"], "trace")
    if record.get("analysis_file"):
        own_file(record_path, root, record["analysis_file"], "analysis_file")


def _reanalyze_config(record: RunRecord, record_path: Path) -> RunRecord:
    """A configuration's record re-analysed; a tensor-parallel one with every rank's record and trace."""
    if isinstance(record.get("tp"), dict):
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
    for key, record in records.items():
        _check_config_files(record, store.record_path(key), Path(root))
    done = {key: _reanalyze_config(record, store.record_path(key)) for key, record in records.items()}
    complete = all(config.key in done for config in plan.configs)
    attribution = (
        attribute(plan, done, base_analysis=store.baseline_analysis(plan, done)) if complete else None
    )
    identity = {key: manifest.get(key) for key in ("workload", "preset", "settings")}
    store.write_manifest(plan, identity, done, attribution)
    return attribution
