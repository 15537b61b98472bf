"""Small real traces recorded on an H200 (tests/data/h200_loops/, benchmarks/record_h200_loops.py), each
checked against the answer written by hand from its raw events (`expected.json`, with a `why` that cites
the events): reads in steps (api, op, count), the dominant class of the largest gaps of the typical steps,
the number of steps, and per trace the facts its loop was recorded for.

Tests marked xfail(strict) fail on today's analysis (the reason says how); once fixed, strict xfail turns
that into a failure, and the mark is to be removed. The marks for the issue 14 §1/§3 rules (bounded
`sync`, implicit synchronizers as reads) came off when those rules landed.
"""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from pathlib import Path

import pytest

from bubblescope.analysis.traces import analyze_traces

DATA = Path(__file__).resolve().parents[1] / "data" / "h200_loops"
LOOPS = ("run_ahead_slow_host", "compile_tolist", "empty_cache", "two_stream_wait")


@functools.cache
def expected(name: str) -> dict:
    return json.loads((DATA / name / "expected.json").read_text())


@functools.cache
def analysis(name: str) -> dict:
    return analyze_traces([DATA / name / "trace.json.gz"], step_marker=expected(name).get("step_marker"))


def in_step_reads(result: dict) -> dict[tuple[str, str], int]:
    """(api, op) -> reads inside steps, from the syncs table (per_step x steps)."""
    n_steps = len(result["steps"])
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for sync in result["syncs"]:
        inside = round(sync["per_step"] * n_steps)
        if inside:
            counts[(sync["api"], sync["op"])] += inside
    return dict(counts)


def typical_gaps(name: str) -> list[dict]:
    """The largest gaps of the typical steps (expected `typical_steps`, first and last included)."""
    first, last = expected(name)["typical_steps"]
    gaps = [g for g in analysis(name)["gaps_top"] if first <= g["step"] <= last]
    return sorted(gaps, key=lambda g: -g["dur_ns"])[: expected(name)["largest_gaps"]["top"]]


def test_traces_are_small() -> None:
    for name in (*LOOPS, "implicit_syncs"):
        assert (DATA / name / "trace.json.gz").stat().st_size < 1_500_000, name


@pytest.mark.parametrize("name", LOOPS)
def test_steps(name: str) -> None:
    result = analysis(name)
    assert result["step_source"] == "bubblescope.step"
    assert len(result["steps"]) == expected(name)["steps"]


@pytest.mark.parametrize("name", LOOPS)
def test_reads_in_steps(name: str) -> None:
    want = {(r["api"], r["op"]): r["count"] for r in expected(name)["reads_in_steps"]}
    assert in_step_reads(analysis(name)) == want


@pytest.mark.parametrize("name", LOOPS)
def test_dominant_class_of_largest_gaps(name: str) -> None:
    want = expected(name)["largest_gaps"]
    gaps = typical_gaps(name)
    assert len(gaps) == want["top"], gaps
    by_class: dict[str, int] = defaultdict(int)
    for gap in gaps:
        by_class[gap["class"]] += gap["dur_ns"]
    assert max(by_class, key=by_class.get) == want["class"], gaps


@pytest.mark.parametrize(
    "name",
    [
        *(n for n in LOOPS if expected(n)["largest_gaps"]["site_contains"]),
    ],
)
def test_largest_gaps_blame_the_work_that_ran(name: str) -> None:
    want = expected(name)["largest_gaps"]
    # Any of the names of what covered the gap (the frame that did the work, or its innermost callee).
    dominant = [g for g in typical_gaps(name) if g["class"] == want["class"]]
    assert dominant
    assert all(any(site in g["blame"] for site in want["site_contains"]) for g in dominant), dominant


@pytest.mark.parametrize("name", ["run_ahead_slow_host", "compile_tolist", "empty_cache"])
def test_no_read_blamed_for_more_than_it_blocked(name: str) -> None:
    for sync in analysis(name)["syncs"]:
        assert sync["bubble_ns"] <= sync["blocked_ns"], sync


def test_run_ahead_waits_cost_at_most_their_lost_lead() -> None:
    bound = expected("run_ahead_slow_host")["read_bubble_ns_total_at_most"]
    result = analysis("run_ahead_slow_host")
    bubble = sum(s["bubble_ns"] for s in result["syncs"] if s["api"] == bound["api"])
    assert bubble <= bound["ns"]
    assert (
        result["summary"]["idle_by_class_ns_per_step"]["host"]
        > result["summary"]["idle_by_class_ns_per_step"]["sync"]
    )


def test_empty_cache_frees_cost_their_lost_lead() -> None:
    """Each step's cudaFree (empty_cache) is a read; the 7 that began with the nvjet kernel still running
    drain the device, and the idle after each is `sync` only up to its lost lead (by hand, to the ns of
    the trace's microsecond stamps: 1 us slack for rounding), the rest `host`."""
    want = expected("empty_cache")
    result = analysis("empty_cache")
    frees = [s for s in result["syncs"] if s["api"] == want["free_reads"]["api"]]
    assert {s["kind"] for s in frees} == {"free"}, frees
    assert sum(s["count"] for s in frees) == want["free_reads"]["count"]
    assert sum(s["drained"] for s in frees) == want["free_reads"]["drained"]
    for field in ("blocked_ns", "lost_lead_ns", "bubble_ns"):
        assert sum(s[field] for s in frees) == pytest.approx(want["free_reads"][field], abs=1_000), field
    sync_by_step = [step["idle_by_class_ns"]["sync"] for step in result["steps"]]
    assert sync_by_step == pytest.approx(want["sync_idle_ns_by_step"], abs=1_000)


def test_two_stream_handoffs_are_dependency() -> None:
    """The 18 cross-stream handoffs whose closing op was queued behind a cudaStreamWaitEvent (24064 ns by
    hand) are `dependency`; with no reads there is no `sync` at all."""
    result = analysis("two_stream_wait")
    dependency = sum(step["idle_by_class_ns"]["dependency"] for step in result["steps"])
    want = expected("two_stream_wait")
    # Upper bound: the handoffs plus the queued tails of the host-bound gaps (from the closing op's launch
    # call to its start, 43 us in all by hand) if a rule calls those tails dependency too.
    assert 0.8 * want["cross_stream_queued_ns"] <= dependency
    assert dependency <= want["cross_stream_queued_ns"] + want["host_gap_queued_tails_ns"]
    assert all(step["idle_by_class_ns"]["sync"] == 0 for step in result["steps"])


def _implicit_steps() -> dict[str, dict]:
    return {step["name"]: step for step in analysis("implicit_syncs")["steps"]}


def test_implicit_probe_steps_and_explicit_reads() -> None:
    want = expected("implicit_syncs")
    steps = _implicit_steps()
    assert len(steps) == want["steps"]
    reads = in_step_reads(analysis("implicit_syncs"))
    for probe, read in want["explicit_reads"].items():
        assert steps[probe]["blocking_reads"] == 1, probe
        assert reads.get((read["api"], read["op"])) == 1, (probe, reads)


def test_non_blocking_calls_are_never_reads() -> None:
    """cudaMalloc, cudaHostRegister, cudaMemset on device memory, cudaMemGetInfo and the queries returned
    while a kernel ran on the H200: none of them may be reported as a read (polls included)."""
    steps = _implicit_steps()
    for probe in expected("implicit_syncs")["no_reads"]:
        assert steps[probe]["blocking_reads"] == 0, probe


def test_implicit_synchronizers_are_reads() -> None:
    want = expected("implicit_syncs")
    steps = _implicit_steps()
    apis = {api for api, _ in in_step_reads(analysis("implicit_syncs"))}
    for probe, api in want["implicit_reads"].items():
        assert steps[probe]["blocking_reads"] >= 1, probe
        assert api in apis, (probe, api, apis)
    # cudaMemset blocks only on pinned host memory: the device-memory probe must stay out.
    memset_reads = sum(
        n for (api, _), n in in_step_reads(analysis("implicit_syncs")).items() if api == "cudaMemset"
    )
    assert memset_reads == 1
