"""Issue 18 §1, the crashes the fuzzer's long profile found in the readers behind `gate` and `report`
(benchmarks/RESULTS.md, "Hostile input"): one regression test per class, on damaged real traces.

* gate's CPU-trace reader (`bubblescope.analysis.readbacks`): nesting deeper than any parser allows, a list
  `ts` (was `float()` TypeError), a list category / dict name / list tid (was `unhashable`), a list category
  in gate's GPU check (was `e.get("cat") in set`).
* report's JSON reader (`report.load_inputs.read_json_document`): 100 000-deep nesting (RecursionError).
* `ablate`: rich markup in `--out` printed through rich (MarkupError).
* the analysis: timestamps whose span overflows int64 ns (numpy "overflow in scalar subtract").

Every case goes end to end through `bubblescope.cli.main` (tests/hostile/cli_runner.py) and must exit
0 or 2 (gate: 1 is a verdict) with exactly one stderr line on 2, no traceback, no Python warning.
Expected counts are read from the raw events here, not from the tool.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.hostile.cli_runner import Outcome, run_in_process
from tests.hostile.mutate import DEEP_PLACEHOLDER, Mutated, write_document
from tests.hostile.seeds import CPU_TRACE, REAL_RECORD, cut_to_steps, h200_trace_path, read_json

STEP = "bubblescope.step"


@pytest.fixture(scope="module")
def cpu_trace() -> dict[str, Any]:
    """The repo's real CPU torch.profiler trace (bubblescope.step annotations, aten::item readbacks)."""
    return read_json(CPU_TRACE)


@pytest.fixture(scope="module")
def h200_trace() -> dict[str, Any]:
    """A real H200 trace (kernels: gate analyses it fully), cut to 2 steps."""
    return cut_to_steps(read_json(h200_trace_path()), 2)


def _write(tmp_path: Path, doc: Any, name: str = "trace.json", deep_levels: int = 0) -> Path:
    return write_document(Mutated(doc, [], deep_levels), tmp_path / name, gzipped=False)


def _clean(outcome: Outcome, codes: tuple[int, ...] = (0, 2)) -> None:
    problems = [p for p in outcome.problems() if not p.startswith("exit code")]
    assert not problems and outcome.exit_code in codes, (outcome.exit_code, problems, outcome.stderr[-600:])


def _gate(path: Path, other: Path | None = None) -> Outcome:
    other = other or path
    outcome = run_in_process(["gate", "--baseline", str(other), "--current", str(path), "--format", "json"])
    _clean(outcome, (0, 1, 2))
    return outcome


def _first(events: list[dict[str, Any]], cat: str, name: str | None = None, skip: int = 0) -> dict:
    found = [
        e
        for e in events
        if e.get("ph") == "X" and e.get("cat") == cat and (name is None or e.get("name") == name)
    ]
    return found[skip]


def _outermost_reads_per_step(events: list[dict[str, Any]]) -> float:
    """Readback ops (aten::item and what it calls) that no other readback op on the same thread
    encloses, inside bubblescope.step annotations, per step: what the gate must count."""
    readbacks = ("aten::item", "aten::_local_scalar_dense", "aten::nonzero", "aten::is_nonzero")
    ops = [
        e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op" and e.get("name") in readbacks
    ]
    steps = [e for e in events if e.get("ph") == "X" and e.get("name") == STEP]

    def inside(a: dict, b: dict) -> bool:
        return b["ts"] <= a["ts"] and a["ts"] + a.get("dur", 0) <= b["ts"] + b.get("dur", 0)

    outer = [
        op for op in ops if not any(o is not op and o["tid"] == op["tid"] and inside(op, o) for o in ops)
    ]
    counted = sum(any(s["ts"] <= op["ts"] < s["ts"] + s["dur"] for s in steps) for op in outer)
    return counted / len(steps)


# ---- gate's CPU-trace reader (bubblescope/analysis/readbacks.py) ----


@pytest.mark.parametrize("levels", [1000, 100_000])
@pytest.mark.parametrize("where", ["name", "ts", "tid", "args"])
def test_gate_refuses_deep_nesting_in_a_cpu_trace_in_one_line(
    tmp_path: Path, cpu_trace: dict[str, Any], where: str, levels: int
) -> None:
    doc = copy.deepcopy(cpu_trace)
    frame = _first(doc["traceEvents"], "python_function")
    if where == "args":
        frame["args"] = {"Python id": DEEP_PLACEHOLDER}
    else:
        frame[where] = DEEP_PLACEHOLDER
    outcome = _gate(_write(tmp_path, doc, deep_levels=levels))
    assert outcome.exit_code == 2 and "nested too deeply" in outcome.stderr, outcome.stderr


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ([1, 2], "a list"),
        ({"a": 1}, "a dict"),
        ("12", "str '12'"),
        (True, "bool True"),
        (1e30, "float 1e+30"),
    ],
)
@pytest.mark.parametrize("key", ["ts", "dur"])
def test_gate_refuses_a_bad_time_in_a_cpu_trace_in_one_line(
    tmp_path: Path, cpu_trace: dict[str, Any], key: str, value: Any, shown: str
) -> None:
    doc = copy.deepcopy(cpu_trace)
    frame = _first(doc["traceEvents"], "python_function")
    frame[key] = value
    outcome = _gate(_write(tmp_path, doc))
    assert outcome.exit_code == 2, outcome.stderr
    assert f"has a bad '{key}' ({shown}" in outcome.stderr and repr(frame["name"])[:40] in outcome.stderr


# NaN/Infinity tokens and 1e400 never reach the reader: the JSON decoder refuses them (one line too).
@pytest.mark.parametrize("value", [None, -9e15, 2**63, "NaN"])
def test_gate_refuses_a_missing_or_out_of_range_step_ts(
    tmp_path: Path, cpu_trace: dict[str, Any], value: Any
) -> None:
    doc = copy.deepcopy(cpu_trace)
    step = _first(doc["traceEvents"], "user_annotation", STEP)
    step["ts"] = value
    outcome = _gate(_write(tmp_path, doc))
    assert outcome.exit_code == 2 and f"{STEP}' (cat 'user_annotation')" in outcome.stderr, outcome.stderr
    assert ("lacks 'ts'" if value is None else "has a bad 'ts'") in outcome.stderr


def test_gate_counts_and_leaves_out_container_fields_in_a_cpu_trace(
    tmp_path: Path, cpu_trace: dict[str, Any]
) -> None:
    """A list category, a dict name and a list tid on events the count does not need: the verdict is
    the undamaged trace's, and each kind is a counted warning."""
    expected = _outermost_reads_per_step(cpu_trace["traceEvents"])
    assert expected > 0  # the seed has readbacks, so a count of 0 would be a real failure
    doc = copy.deepcopy(cpu_trace)
    events = doc["traceEvents"]
    other_ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("name") == "aten::resolve_conj"]
    other_ops[0]["cat"] = ["cpu_op"]
    other_ops[1]["name"] = {"evil": "[/x]"}
    other_ops[2]["name"] = {"evil": 2}
    _first(events, "python_function", skip=3)["tid"] = [1, 2]
    outcome = _gate(_write(tmp_path, doc))
    assert outcome.exit_code == 0, outcome.stderr
    verdict = json.loads(outcome.stdout)
    reads = verdict["checks"][0]
    assert reads["baseline_per_step"] == reads["current_per_step"] == pytest.approx(expected)
    for key, count in (("cat", 1), ("name", 2), ("tid", 1)):
        line = f"{count} events with a list or object as '{key}' were left out of the readback count"
        assert f"current: {line}" in verdict["warnings"] and f"baseline: {line}" in verdict["warnings"]


def test_gate_on_a_gpu_trace_with_a_list_category_warns(tmp_path: Path, h200_trace: dict[str, Any]) -> None:
    """gate's GPU check once did `e.get("cat") in set` on every event: a list category crashed it. The
    trace is analysed; the event left out is named in the verdict's warnings."""
    doc = copy.deepcopy(h200_trace)
    kernel = _first(doc["traceEvents"], "kernel")
    kernel["cat"] = ["kernel"]
    outcome = _gate(_write(tmp_path, doc))
    assert outcome.exit_code == 0, outcome.stderr
    verdict = json.loads(outcome.stdout)
    assert verdict["baseline"]["source"] == verdict["current"]["source"] == "analysis"
    assert any("1 complete events with a list or object as 'cat'" in w for w in verdict["warnings"])


# ---- report's JSON reader (bubblescope/report/load_inputs.py) ----


# The depth is read from the text before the parser runs, so 100 000 levels get the same message as 900.
@pytest.mark.parametrize(("levels", "message"), [(100_000, "deeper than 64"), (900, "deeper than 64")])
def test_report_refuses_a_deeply_nested_record_in_one_line(tmp_path: Path, levels: int, message: str) -> None:
    record = read_json(REAL_RECORD)
    record["environment"]["torch"] = DEEP_PLACEHOLDER
    path = _write(tmp_path, record, "record.json", deep_levels=levels)
    outcome = run_in_process(["report", str(path), "--format", "markdown"])
    _clean(outcome)
    assert outcome.exit_code == 2 and message in outcome.stderr, outcome.stderr


def test_report_refuses_a_deeply_nested_analysis_document(tmp_path: Path) -> None:
    """Every document report reads is bounded in depth, not only records and manifests."""
    analysis = {"schema": "bubblescope.analysis/1", "summary": {}, "steps": [], "x": DEEP_PLACEHOLDER}
    path = _write(tmp_path, analysis, "analysis.json", deep_levels=200)
    outcome = run_in_process(["report", str(path), "--format", "markdown"])
    _clean(outcome)
    assert outcome.exit_code == 2 and "deeper than 64" in outcome.stderr, outcome.stderr


# ---- the analysis: a time span past int64 ns ----


@pytest.mark.parametrize(
    ("first", "second"),
    [
        # one event far before, a step annotation far after: `start - origin` overflowed
        ({"ts": -8.99e15}, {"ts": 8.99e15}),
        # ts + dur past 9.2e18 ns wraps in int64: `end - start` overflowed
        (None, {"ts": 8.99e15, "dur": 8.99e15}),
    ],
)
@pytest.mark.parametrize("command", ["analyze", "gate"])
def test_timestamps_spanning_past_int64_ns_are_one_line(
    tmp_path: Path, h200_trace: dict[str, Any], first: dict | None, second: dict, command: str
) -> None:
    doc = copy.deepcopy(h200_trace)
    if first:
        _first(doc["traceEvents"], "cpu_op").update(first)
    _first(doc["traceEvents"], "user_annotation").update(second)
    path = _write(tmp_path, doc)
    if command == "gate":
        outcome = _gate(path)
    else:
        outcome = run_in_process(["analyze", str(path), "--format", "json"])
        _clean(outcome)
    assert outcome.exit_code == 2 and "a timestamp is damaged" in outcome.stderr, outcome.stderr


# ---- ablate: untrusted strings printed through rich ----


@pytest.mark.parametrize("name", ["a_[/x]", "b_[bold]x", "c_\x1b]0;pwned\x07"])
def test_ablate_prints_a_hostile_out_folder_literally(tmp_path: Path, name: str) -> None:
    """`resuming DIR` (rich) and `written to DIR` (plain): markup shown as is, controls made visible."""
    out = tmp_path / name
    args = [
        "ablate",
        "--workload",
        "bubblescope.examples.toy_workload:make_workload",
        "--preset",
        "tiny",
        "--toggles",
        "no_readback",
        "--steps",
        "2",
        "--warmup",
        "1",
        "--repeats",
        "1",
        "--profile-steps",
        "0",
        "--out",
        str(out),
    ]
    first = run_in_process(args)
    _clean(first, (0,))
    resumed = run_in_process(args)
    _clean(resumed, (0,))
    shown = str(out).replace("\x1b", "\\x1b").replace("\x07", "\\x07")
    assert f"resuming {shown}: 2 configurations on disk, 0 to measure\n" in resumed.stderr, resumed.stderr
    assert f"written to {shown}" in resumed.stdout
    assert "\x1b]" not in resumed.stdout + resumed.stderr and "\x07" not in resumed.stdout + resumed.stderr
