"""Issue 18 §8: broken records are refused by every reader (one line, exit 2), records that cannot be
compared are refused by the gate, and legal-but-weak comparisons carry a warning."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from bubblescope.ablate.plan import plan_ablation
from bubblescope.ablate.store import AblationStore, load_ablation
from bubblescope.cli import main
from bubblescope.errors import RecordError
from bubblescope.gate import run_gate
from bubblescope.records.run_record import load_record
from tests.hostile.seeds import BASELINE_RECORD, CPU_TRACE, GATE_DIR, h200_trace_path, seed_record

NAN = float("nan")


def _write(path: Path, record: Any) -> Path:
    # allow_nan: NaN and Infinity as the bare tokens a hand-edited or foreign file can hold.
    path.write_text(json.dumps(record, allow_nan=True))
    return path


def _edited(**changes: Any) -> dict[str, Any]:
    """The baseline record with dotted fields set (value `...` removes the field)."""
    record = copy.deepcopy(seed_record())
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node = record
        for key in parents:
            node = node[key]
        if value is ...:
            node.pop(last)
        else:
            node[last] = value
    return record


BROKEN = {
    "empty analysis": (_edited(analysis={}), "analysis is a dict"),
    "analysis a list": (_edited(analysis=[]), "field 'analysis' must be dict or null"),
    "reads missing": (_edited(analysis__blocking_reads_per_step=...), "blocking_reads_per_step is missing"),
    "NaN reads": (_edited(analysis__blocking_reads_per_step=NAN), "blocking_reads_per_step is nan"),
    "negative reads": (_edited(analysis__blocking_reads_per_step=-1.0), "expected a finite number >= 0"),
    "string reads": (_edited(analysis__blocking_reads_per_step="1"), "blocking_reads_per_step is '1'"),
    "null reads": (_edited(analysis__blocking_reads_per_step=None), "blocking_reads_per_step is None"),
    "syncs a dict": (_edited(analysis__syncs={"a": 1}), "analysis.syncs is a dict"),
    "sync a string": (_edited(analysis__syncs=["x"]), "syncs[0] is 'x'"),
    "sync per_step NaN": (_edited(analysis__syncs=[{"site": "a", "per_step": NAN}]), "per_step is nan"),
    "sync per_step null": (_edited(analysis__syncs=[{"site": "a", "per_step": None}]), "per_step is None"),
    "sync site a list": (_edited(analysis__syncs=[{"site": ["a"], "per_step": 1}]), "site is a list"),
    "idle Infinity": (_edited(analysis__idle_by_class_ns_per_step={"sync": float("inf")}), "sync is inf"),
    "gpu_measured string": (_edited(analysis__gpu_measured="yes"), "gpu_measured is 'yes'"),
    "tpot NaN": (_edited(summary__tpot_ms=NAN), "tpot_ms is nan"),
    "tpot null": (_edited(summary__tpot_ms=None), "tpot_ms is None"),
    "enabled nested": (_edited(switches__enabled=[["pdl"]]), "list of switch names"),
    "device a dict": (_edited(environment__device={"x": 1}), "environment.device"),
    "steps a string": (_edited(settings__steps="64"), "settings.steps"),
    "huge sample": (_edited(samples_ns=[[10**400]]), "expected integers from 0 to 2**63-1"),
    "created null": (_edited(created_utc=None), "created_utc"),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_every_reader_refuses_a_broken_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    record, message = BROKEN[name]
    path = _write(tmp_path / "record.json", record)
    with pytest.raises(RecordError, match=None) as caught:
        load_record(path)
    assert message in str(caught.value), str(caught.value)
    for args in (
        ["gate", "--baseline", str(BASELINE_RECORD), "--current", str(path)],
        ["report", str(path), "--format", "markdown"],
    ):
        monkeypatch.setattr(sys, "argv", ["bubblescope", *args])
        with pytest.raises(SystemExit) as exited:
            main()
        err = capsys.readouterr().err
        assert exited.value.code == 2, (args, err)
        assert len(err.strip().splitlines()) == 1 and message in err, (args, err)


def test_the_gate_fixtures_and_report_fixtures_still_validate() -> None:
    """The validator refuses broken records, not the real ones the suite and the report tests use."""
    for path in sorted(GATE_DIR.glob("*.json")):
        load_record(path)
    report_data = Path(__file__).resolve().parents[1] / "data" / "report"
    for path in [
        *report_data.glob("*/record.json"),
        *report_data.glob("*/*.json"),
        *report_data.glob("*/runs/*.json"),
    ]:
        doc = json.loads(path.read_text())
        if doc.get("schema") == "bubblescope.run/1":
            load_record(path)


REFUSED = {
    "device": (dict(environment__device="cpu", environment__gpu=None), "differ in device"),
    # Not "gpu": a parameter id is a pytest keyword, and conftest skips items with the `gpu` keyword.
    "GPU model": (dict(environment__gpu="NVIDIA A100-SXM4-80GB"), "differ in GPU"),
    "preset": (dict(preset="ling3-flash-e256"), "differ in preset"),
    "workload": (dict(workload__name="other"), "differ in workload"),
    "options": (dict(workload__options={"seed": 0, "spec": "dspark"}), "differ in workload options"),
    "timing": (dict(settings__timing="host"), "differ in timing method"),
    "read counting": (dict(analysis__gpu_measured=False), "cannot be compared"),
}


# Both sides carry the fields added within run/1 (an older record lacking them is only warned about).
COMPLETE = {"workload__options": {"seed": 0, "spec": None}, "settings__timing": "cuda-events"}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_records_that_cannot_be_compared_are_refused(tmp_path: Path, name: str) -> None:
    changes, message = REFUSED[name]
    base = _write(tmp_path / "base.json", _edited(**COMPLETE))
    other = _write(tmp_path / "current.json", _edited(**{**COMPLETE, **changes}))
    with pytest.raises(RecordError, match=message):
        run_gate(str(base), str(other))
    with pytest.raises(RecordError, match=message):
        run_gate(str(other), str(base))


WARNED = {
    "switches": (dict(switches__enabled=["pdl"]), "switch set differs"),
    "steps": (dict(settings__steps=32), "step settings (steps, warmup, repeats) differs"),
    "seed": (dict(workload__options={"seed": 1}), "weight seed differs"),
}


@pytest.mark.parametrize("name", sorted(WARNED))
def test_legal_but_weak_comparisons_warn(tmp_path: Path, name: str) -> None:
    changes, message = WARNED[name]
    base = _write(tmp_path / "base.json", _edited(workload__options={"seed": 0}))
    other = _write(tmp_path / "current.json", _edited(**{"workload__options": {"seed": 0}, **changes}))
    verdict = run_gate(str(base), str(other))
    assert any(message in w for w in verdict["warnings"]), verdict["warnings"]
    assert not any(message in w for w in run_gate(str(base), str(base))["warnings"])


def test_an_h200_trace_against_a_cpu_record_is_refused(tmp_path: Path) -> None:
    cpu_record = _write(
        tmp_path / "cpu.json",
        _edited(environment__device="cpu", environment__gpu=None, analysis__gpu_measured=False),
    )
    with pytest.raises(RecordError, match="counted blocking reads on a GPU"):
        run_gate(str(h200_trace_path()), str(cpu_record))
    # The same CPU record against a CPU trace counts reads the same way on both sides: compared.
    verdict = run_gate(str(cpu_record), str(CPU_TRACE))
    assert verdict["checks"][0]["current_per_step"] == 1.0


def test_ablate_resume_and_reanalyze_refuse_or_remeasure_broken_records(tmp_path: Path) -> None:
    """Resume measures a broken record again (notice); loading for --reanalyze/report refuses it."""
    plan = plan_ablation(["no_readback"])
    store = AblationStore(tmp_path)
    broken = _edited(analysis__syncs={"site": 1})
    store.record_path("base").parent.mkdir(parents=True)
    _write(store.record_path("base"), broken)
    identity = {"workload": broken["workload"], "preset": broken["preset"], "settings": broken["settings"]}
    done, notices = store.load_done(plan, identity)
    assert "base" not in done
    assert any(n.startswith("re-measuring base:") and "analysis.syncs is a dict" in n for n in notices), (
        notices
    )
    store.write_manifest(plan, identity, {"base": broken}, None)
    with pytest.raises(RecordError, match="analysis.syncs is a dict"):
        load_ablation(tmp_path)


def test_a_record_nested_deeper_than_any_real_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """900 levels parse (below Python's recursion limit) but would crash any recursive renderer."""
    text = json.dumps(_edited(environment__torch="DEEP")).replace('"DEEP"', "[" * 900 + "]" * 900)
    path = tmp_path / "record.json"
    path.write_text(text)
    with pytest.raises(RecordError, match="nested deeper than 64 levels"):
        load_record(path)
    for args in (
        ["report", str(path), "--format", "markdown"],
        ["gate", "--baseline", str(path), "--current", str(path)],
    ):
        monkeypatch.setattr(sys, "argv", ["bubblescope", *args])
        with pytest.raises(SystemExit) as exited:
            main()
        err = capsys.readouterr().err
        assert exited.value.code == 2 and len(err.strip().splitlines()) == 1 and "nested deeper" in err, err


def test_a_record_older_than_a_field_is_warned_about_not_refused(tmp_path: Path) -> None:
    """settings.timing and workload.options were added within run/1: an old baseline lacks them."""
    new = _write(tmp_path / "new.json", _edited(settings__timing="cuda-events"))
    verdict = run_gate(str(BASELINE_RECORD), str(new))
    assert any("baseline record does not say its timing method" in w for w in verdict["warnings"])
