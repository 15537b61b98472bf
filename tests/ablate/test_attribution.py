"""Attribution on synthetic records with known TPOTs: alone, removed-from-all, Shapley, interaction."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bubblescope.ablate.attribution import attribute
from bubblescope.ablate.plan import plan_ablation

FIXTURE = Path(__file__).resolve().parent.parent / "data" / "gate" / "baseline.json"


def _record(tpot_ms: float, enabled: frozenset[str], sites: dict[str, float], seed: int) -> dict:
    rng = np.random.default_rng(seed)
    record = json.loads(FIXTURE.read_text())
    # 3 repeats x 101 steps, 0.5% noise around the target.
    record["samples_ns"] = [
        (tpot_ms * 1e6 * rng.lognormal(0, 0.005, 101)).astype(int).tolist() for _ in range(3)
    ]
    record["tokens_per_step"] = [[1] * 101 for _ in range(3)]
    record["switches"]["enabled"] = sorted(enabled)
    record["analysis"]["syncs"] = [{"site": s, "op": "aten::item", "per_step": n} for s, n in sites.items()]
    record["analysis"]["idle_by_class_ns_per_step"] = {
        "sync": 1000 * sum(sites.values()),
        "host": 0,
        "launch": 0,
        "dependency": 0,
    }
    # Four profiled steps: sync idle 1 µs per read with 5% step-to-step spread, host idle 300 µs ± 10%
    # in every configuration (the switches do not touch it).
    sync_ns = 1000 * sum(sites.values()) * rng.normal(1.0, 0.05, 4)
    record["analysis"]["idle_steps"] = {
        "steps": [0, 1, 2, 3],
        "by_class_ns": {
            "sync": sync_ns.astype(int).tolist(),
            "host": (300_000 * rng.normal(1.0, 0.1, 4)).astype(int).tolist(),
            "launch": [0, 0, 0, 0],
            "dependency": [0, 0, 0, 0],
        },
    }
    return record


def _tpot(enabled: frozenset[str]) -> float:
    """10 ms baseline; a saves 1, b saves 2, c saves 3; a and b together save 1 more."""
    saving = {"a": 1.0, "b": 2.0, "c": 3.0}
    total = sum(saving[s] for s in enabled) + (1.0 if {"a", "b"} <= enabled else 0.0)
    return 10.0 - total


def _sites(enabled: frozenset[str]) -> dict[str, float]:
    return {} if "a" in enabled else {"engine.py(12): step": 1.0}


def test_attribution_recovers_known_savings() -> None:
    plan = plan_ablation(["a", "b", "c"], ["c", "b", "a"])
    records = {
        c.key: _record(_tpot(c.enabled), c.enabled, _sites(c.enabled), i) for i, c in enumerate(plan.configs)
    }
    result = attribute(plan, records, n_boot=300)
    rows = {row["name"]: row for row in result["switches"]}
    tol = 0.1
    assert result["baseline_tpot_ms"] == pytest.approx(10.0, abs=tol)
    assert result["total_saving_ms"]["est"] == pytest.approx(7.0, abs=tol)
    assert rows["a"]["alone_ms"]["est"] == pytest.approx(1.0, abs=tol)
    assert rows["a"]["removed_from_all_ms"]["est"] == pytest.approx(2.0, abs=tol)
    assert rows["a"]["shapley_ms"]["est"] == pytest.approx(1.5, abs=tol)
    assert rows["b"]["shapley_ms"]["est"] == pytest.approx(2.5, abs=tol)
    assert rows["c"]["shapley_ms"]["est"] == pytest.approx(3.0, abs=tol)
    assert rows["b"]["cumulative_ms"]["est"] == pytest.approx(2.0, abs=tol)
    assert rows["a"]["cumulative_ms"]["est"] == pytest.approx(2.0, abs=tol)
    assert result["interaction_ms"]["est"] == pytest.approx(1.0, abs=tol)
    for row in rows.values():
        for key in ("alone_ms", "removed_from_all_ms", "shapley_ms", "cumulative_ms"):
            assert row[key]["lo"] <= row[key]["est"] <= row[key]["hi"]
    shapley_sum = sum(r["shapley_ms"]["est"] for r in rows.values())
    assert shapley_sum == pytest.approx(result["total_saving_ms"]["est"], abs=1e-9)
    assert rows["a"]["removed_reads_per_step"] == {"engine.py(12): step [aten::item]": 1.0}
    idle = rows["a"]["removed_idle_per_step"]["by_class_us"]
    assert idle["sync"]["est"] == pytest.approx(1.0, abs=0.1)
    assert idle["sync"]["resolved"] and idle["sync"]["lo"] <= idle["sync"]["est"] <= idle["sync"]["hi"]
    assert rows["a"]["removed_idle_us_per_step"]["sync"] == idle["sync"]["est"]
    # Host idle is the same in every configuration: its difference is noise, never a removal.
    assert not idle["host"]["resolved"]
    # Idle per timed step: the timed saving per step less the GPU busy removed (the fixture's busy is
    # the same everywhere), with the saving's interval.
    timed = rows["a"]["removed_idle_per_step"]["timed_us"]
    alone = rows["a"]["alone_ms"]
    assert timed["est"] == pytest.approx(alone["est"] * 1e3)
    assert (timed["lo"], timed["hi"]) == pytest.approx((alone["lo"] * 1e3, alone["hi"] * 1e3))
    assert rows["b"]["removed_reads_per_step"] == {}
    steps = [w["step"] for w in result["waterfall"]]
    assert steps == ["baseline", "+c", "+b", "+a"]
    assert result["waterfall"][-1]["tpot_ms"] == pytest.approx(3.0, abs=tol)


def test_sampled_shapley_uses_measured_prefixes() -> None:
    plan = plan_ablation(["a", "b", "c"], max_exact=2, permutations=6)
    records = {c.key: _record(_tpot(c.enabled), c.enabled, {}, i) for i, c in enumerate(plan.configs)}
    result = attribute(plan, records, n_boot=100)
    assert result["shapley_method"] == "sampled:6"
    total = sum(row["shapley_ms"]["est"] for row in result["switches"])
    assert total == pytest.approx(result["total_saving_ms"]["est"], abs=1e-9), "every ordering sums to v(all)"
