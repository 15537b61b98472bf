"""One configuration, one interval: the ablation's tables and the record's summary show the same digits.

The waterfall (from the attribution) and the configuration table (from each record's summary) used to
draw their bootstrap replicates with different seeds, so one CPU page showed `38.939 – 1005.656` and
`38.939 – 1060.788` for the same baseline.
"""

from __future__ import annotations

import re

import numpy as np

from bubblescope.ablate.attribution import attribute
from bubblescope.ablate.plan import plan_ablation
from bubblescope.records.run_record import summarize_samples, tpot_seed
from bubblescope.report.markdown import ablation_markdown
from tests.ablate.test_attribution import _record


def _noisy_records(plan) -> dict[str, dict]:
    """Heavy-tailed steps (a shared CPU): the two-level interval depends visibly on the seed."""
    records = {}
    for index, config in enumerate(plan.configs):
        record = _record(10.0 - len(config.enabled), config.enabled, {}, index)
        rng = np.random.default_rng(100 + index)
        record["samples_ns"] = [(1e7 * rng.lognormal(0, 0.6, 41)).astype(int).tolist() for _ in range(3)]
        record["tokens_per_step"] = [[1] * 41 for _ in range(3)]
        seed = tpot_seed(record["workload"]["name"], config.enabled)
        record["summary"] = summarize_samples(record["samples_ns"], record["tokens_per_step"], seed=seed)
        records[config.key] = record
    return records


def _table_rows(markdown: str, heading: str) -> list[list[str]]:
    section = markdown.split(f"### {heading}", 1)[1].split("###", 1)[0]
    return [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith("|") and "---" not in line
    ][1:]


def test_waterfall_and_configuration_tables_show_one_interval() -> None:
    plan = plan_ablation(["a", "b"])
    records = _noisy_records(plan)
    ablation = {
        "schema": "bubblescope.ablation/1",
        "workload": {"name": "fixture"},
        "toggles": ["a", "b"],
        "order": ["a", "b"],
        "configs": [
            {"key": c.key, "enabled": sorted(c.enabled), "roles": c.roles, "status": "done"}
            for c in plan.configs
        ],
        "attribution": attribute(plan, records),
    }
    page = ablation_markdown(ablation, records)
    config_ci = {
        row[0].replace("\\", ""): row[5].split(" (")[0] for row in _table_rows(page, "Configurations")
    }
    waterfall_ci = {row[0].replace("\\", ""): row[3] for row in _table_rows(page, "TPOT waterfall")}
    by_step = {"baseline": "base", "+a": "a", "+b": "a+b"}
    assert set(waterfall_ci) == set(by_step)
    for step, key in by_step.items():
        assert re.fullmatch(r"[\d.]+ – [\d.]+", waterfall_ci[step]), waterfall_ci[step]
        assert waterfall_ci[step] == config_ci[key], (
            f"{step}: waterfall {waterfall_ci[step]} vs {config_ci[key]}"
        )
