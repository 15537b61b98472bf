"""Run an ablation in one process: weights built once, only `prepare()` between configurations.

After every configuration its RunRecord is on disk and `ablation.json` is rewritten, so an
interruption (Ctrl-C, a crash, a preempted machine) loses at most the configuration in flight.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import asdict
from typing import Any

from bubblescope.ablate.attribution import attribute
from bubblescope.ablate.plan import AblationPlan, PlannedConfig
from bubblescope.ablate.store import AblationStore
from bubblescope.capture.measure import RunSettings, measure_config
from bubblescope.errors import ConfigError
from bubblescope.records.run_record import RunRecord


def ablation_identity(workload_info: dict[str, Any], settings: RunSettings) -> dict[str, Any]:
    """What every record of one ablation must share."""
    return {"workload": workload_info, "preset": workload_info.get("preset"), "settings": asdict(settings)}


def run_ablation(
    workload: Any,
    plan: AblationPlan,
    store: AblationStore,
    *,
    settings: RunSettings,
    workload_info: dict[str, Any],
    bandwidth: tuple[float, str] | None,
    on_start: Callable[[int, int], None] | None = None,
    on_config: Callable[[PlannedConfig, RunRecord, bool], None] | None = None,
    on_repeat: Callable[[int], None] | None = None,
    only_keys: Collection[str] | None = None,
) -> tuple[dict[str, Any] | None, dict[str, RunRecord], list[str]]:
    """Measure the configurations of `plan` not yet on disk, then attribute.

    Args:
        on_start: called with (configs already done, configs to measure) before measuring.
        on_config: called after each configuration with (config, record, was_resumed).
        on_repeat: forwarded to the timed run (progress inside a configuration).
        only_keys: measure exactly these configurations (plan order), whatever is on disk; the
            tensor-parallel driver passes the list rank 0 decided so every rank measures the same.
    Returns:
        (attribution block, or None while some configuration has no record; records by key; notices).
    """
    identity = ablation_identity(workload_info, settings)
    done, notices = store.load_done(plan, identity)
    if only_keys is None:
        pending = [c for c in plan.configs if c.key not in done]
    else:
        unknown = sorted(set(only_keys) - {c.key for c in plan.configs})
        if unknown:
            raise ConfigError(f"configurations not in this ablation's plan: {', '.join(unknown)}")
        pending = [c for c in plan.configs if c.key in set(only_keys)]
        done = {key: record for key, record in done.items() if key not in set(only_keys)}
    if on_start is not None:
        on_start(len(done), len(pending))
    store.write_manifest(plan, identity, done, None)
    for config in plan.configs:
        if config.key in done and on_config is not None:
            on_config(config, done[config.key], True)
    for config in pending:
        record, run_notices = measure_config(
            workload,
            config.enabled,
            settings=settings,
            record_path=store.record_path(config.key),
            workload_info=workload_info,
            bandwidth=bandwidth,
            on_repeat=on_repeat,
        )
        notices += [n for n in run_notices if n not in notices]
        done[config.key] = record
        store.write_manifest(plan, identity, done, None)
        if on_config is not None:
            on_config(config, record, False)
    complete = all(config.key in done for config in plan.configs)
    attribution = (
        attribute(plan, done, base_analysis=store.baseline_analysis(plan, done)) if complete else None
    )
    store.write_manifest(plan, identity, done, attribution)
    return attribution, done, notices
