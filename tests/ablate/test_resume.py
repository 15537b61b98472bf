"""An ablation interrupted mid-way resumes with nothing lost and measures only what was missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bubblescope.ablate.plan import plan_ablation
from bubblescope.ablate.runner import run_ablation
from bubblescope.ablate.store import AblationStore, load_ablation
from bubblescope.capture.measure import RunSettings
from bubblescope.errors import RecordError
from bubblescope.examples.toy_workload import make_workload

SETTINGS = RunSettings(steps=6, warmup=1, repeats=2, profile_steps=1)
INFO = {"name": "toy", "factory": "bubblescope.examples.toy_workload:make_workload", "preset": "tiny"}


class Interrupt(Exception):
    """Stands in for Ctrl-C or a crash inside one configuration."""


def _counting_workload(fail_on: frozenset[str] | None):
    toy = make_workload("tiny")
    prepared: list[frozenset[str]] = []
    original = toy.prepare

    def prepare(enabled: frozenset[str]) -> None:
        prepared.append(frozenset(enabled))
        if fail_on is not None and frozenset(enabled) == fail_on:
            raise Interrupt(f"interrupted in {sorted(enabled)}")
        original(enabled)

    toy.prepare = prepare
    return toy, prepared


def test_interrupted_ablation_resumes_without_losing_anything(tmp_path: Path) -> None:
    plan = plan_ablation(["no_readback", "planted_sync"])
    store = AblationStore(tmp_path / "abl")
    keys = [c.key for c in plan.configs]
    fail_on = plan.configs[2].enabled
    toy, prepared = _counting_workload(fail_on)
    with pytest.raises(Interrupt):
        run_ablation(toy, plan, store, settings=SETTINGS, workload_info=INFO, bandwidth=None)
    manifest = json.loads(store.manifest_path.read_text())
    status = {c["key"]: c["status"] for c in manifest["configs"]}
    assert status == {keys[0]: "done", keys[1]: "done", keys[2]: "pending", keys[3]: "pending"}
    assert manifest["attribution"] is None
    first_bytes = {k: store.record_path(k).read_bytes() for k in keys[:2]}

    toy, prepared = _counting_workload(None)
    attribution, records, _notices = run_ablation(
        toy, plan, store, settings=SETTINGS, workload_info=INFO, bandwidth=None
    )
    assert prepared == [c.enabled for c in plan.configs[2:]], "only the missing configs are measured"
    assert {k: store.record_path(k).read_bytes() for k in keys[:2]} == first_bytes, (
        "earlier records untouched"
    )
    assert set(records) == set(keys) and attribution is not None
    manifest, loaded = load_ablation(store.root)
    assert all(c["status"] == "done" for c in manifest["configs"]) and set(loaded) == set(keys)
    assert manifest["attribution"]["shapley_method"] == "exact"


def test_a_corrupt_record_is_measured_again(tmp_path: Path) -> None:
    plan = plan_ablation(["no_readback"])
    store = AblationStore(tmp_path / "abl")
    toy, _ = _counting_workload(None)
    run_ablation(toy, plan, store, settings=SETTINGS, workload_info=INFO, bandwidth=None)
    store.record_path("no_readback").write_text('{"schema": "bubblescope.run/1", "trunc')
    toy, prepared = _counting_workload(None)
    _attr, _records, notices = run_ablation(
        toy, plan, store, settings=SETTINGS, workload_info=INFO, bandwidth=None
    )
    assert prepared == [frozenset({"no_readback"})]
    assert any("re-measuring no_readback" in n for n in notices)


def test_records_of_other_settings_are_not_mixed_in(tmp_path: Path) -> None:
    plan = plan_ablation(["no_readback"])
    store = AblationStore(tmp_path / "abl")
    toy, _ = _counting_workload(None)
    run_ablation(toy, plan, store, settings=SETTINGS, workload_info=INFO, bandwidth=None)
    other = RunSettings(steps=7, warmup=1, repeats=2, profile_steps=1)
    with pytest.raises(RecordError, match="another workload, preset, workload options"):
        run_ablation(toy, plan, store, settings=other, workload_info=INFO, bandwidth=None)


def test_records_of_other_workload_options_are_not_mixed_in(tmp_path: Path) -> None:
    """Another --accept-len (or draft, block, overlap, seed) on the same factory and preset is refused."""
    plan = plan_ablation(["no_readback"])
    store = AblationStore(tmp_path / "abl")
    toy, _ = _counting_workload(None)
    first = {**INFO, "options": {"seed": 0, "spec": "dspark", "accept_len": 4.0}}
    run_ablation(toy, plan, store, settings=SETTINGS, workload_info=first, bandwidth=None)
    toy, prepared = _counting_workload(None)
    run_ablation(toy, plan, store, settings=SETTINGS, workload_info=dict(first), bandwidth=None)
    assert prepared == [], "same options: everything resumes, nothing is measured again"
    other = {**INFO, "options": {"seed": 0, "spec": "dspark", "accept_len": 9.95}}
    with pytest.raises(RecordError, match="another workload, preset, workload options"):
        run_ablation(toy, plan, store, settings=SETTINGS, workload_info=other, bandwidth=None)
