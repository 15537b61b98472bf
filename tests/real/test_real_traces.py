"""`analyze_traces` on real public traces against answers written by hand from the raw events.

Each `tests/data/real/<case>/expected.json` states, with a `why` citing event names and times:
the steps, the host-blocking reads (count, ATen op, runtime API), the dominant cause of the largest
GPU idle gaps (issue 14 sections 1-2: bounded `sync`, host vs queued), and upper bounds on what a
read may be blamed for. One test per claim; claims today's analysis gets wrong are strict xfails
listed in `known_failures.py`, so fixing one turns its xfail into a failure until the entry goes.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

import pytest

from tests.real.conftest import analysed, case_names, expected
from tests.real.known_failures import KNOWN_FAILURES

NS_PER_US = Decimal(1000)


def _claims() -> list:
    """One pytest.param per claim of every case, with its slow / xfail marks."""
    params = []
    for case in case_names():
        answer = expected(case)
        kinds = ["bubble_bounded"]
        if answer["steps"].get("count") is not None or answer["steps"].get("count_per_rank"):
            kinds.append("steps")
        kinds += [f"reads_found:{i}" for i in range(len(_expected_reads(answer)))]
        if answer["reads"].get("exclusive"):
            kinds.append("reads_exclusive")
        if answer["reads"].get("own_syncs"):
            kinds.append("own_syncs_dropped")
        for i, gap in enumerate(answer["gaps"]):
            kinds.append(f"gap{i}_class")
            if gap["blame_any"]:
                kinds.append(f"gap{i}_blame")
        kinds += [f"bubble_max:{i}" for i in range(len(answer["bubbles"]))]
        if "sync_idle_zero" in answer:
            kinds.append("sync_idle_zero")
        for kind in kinds:
            claim_id = f"{case}::{kind}"
            marks = [pytest.mark.slow] if answer.get("slow") else []
            if claim_id in KNOWN_FAILURES:
                marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[claim_id]))
            params.append(pytest.param(case, kind, id=claim_id, marks=marks))
    return params


def _expected_reads(answer: dict) -> list[dict]:
    """Expected reads summed over ranks: [{op, apis, count, tolerated}] (the analysis/1 `syncs` list
    has no rank)."""
    reads = answer["reads"]
    totals: dict[tuple[str, tuple[str, ...]], dict] = {}
    for entry in reads.get("expected", []) + reads.get("per_rank", []):
        key = (entry["op"], tuple(entry["apis"]))
        totals.setdefault(key, {"op": entry["op"], "apis": entry["apis"], "count": 0, "tolerated": 0})
        totals[key]["count"] += entry["count"]
    for entry in reads.get("tolerated", []):
        key = (entry["op"], tuple(entry["apis"]))
        totals.setdefault(key, {"op": entry["op"], "apis": entry["apis"], "count": 0, "tolerated": 0})
        totals[key]["tolerated"] += entry["count"]
    return [r for r in totals.values() if r["count"] > 0] + [r for r in totals.values() if r["count"] == 0]


def _matching_syncs(result: dict, op: str, apis: list[str]) -> list[dict]:
    return [s for s in result["syncs"] if s["op"] == op and s["api"] in apis]


def _describe_syncs(result: dict) -> str:
    return "; ".join(
        f"{s['count']}x op={s['op']!r} api={s['api']} bubble={s['bubble_ns']}" for s in result["syncs"]
    )


def _gap_pieces(result: dict, origins: list[int], gap: dict) -> dict[str, list[tuple[int, dict]]]:
    """Top gaps of the gap's rank overlapping its interval: class -> [(overlap ns, gap entry)]."""
    lo = int(gap["interval_us"][0] * NS_PER_US)
    hi = int(gap["interval_us"][1] * NS_PER_US)
    origin = origins[gap["rank"]]
    pieces: dict[str, list[tuple[int, dict]]] = defaultdict(list)
    for entry in result["gaps_top"]:
        if entry["rank"] != gap["rank"]:
            continue
        start = origin + entry["start_ns"]
        overlap = min(hi, start + entry["dur_ns"]) - max(lo, start)
        if overlap > 0:
            pieces[entry["class"]].append((overlap, entry))
    return pieces


def _check_gap_class(result: dict, origins: list[int], gap: dict) -> None:
    pieces = _gap_pieces(result, origins, gap)
    assert pieces, (
        f"no gap in gaps_top overlaps {gap['interval_us']} (if gaps of warm-up steps now stay out of "
        f"gaps_top, this claim needs a gap of a steady step): {gap['why']}"
    )
    by_class = {cls: sum(o for o, _ in found) for cls, found in pieces.items()}
    dominant = max(by_class, key=by_class.get)
    found = {cls: f"{ns / 1e3:.1f} us" for cls, ns in by_class.items()}
    if gap["class"] is not None:
        assert dominant == gap["class"], (
            f"dominant class {dominant} ({found}), expected {gap['class']}: {gap['why']}"
        )
    assert dominant not in gap["not_class"], f"dominant class {dominant} ({found}) must not be: {gap['why']}"


def _check_gap_blame(result: dict, origins: list[int], gap: dict) -> None:
    pieces = _gap_pieces(result, origins, gap)
    assert pieces, f"no gap in gaps_top overlaps {gap['interval_us']}: {gap['why']}"
    by_class = {cls: sum(o for o, _ in found) for cls, found in pieces.items()}
    _, biggest = max(pieces[max(by_class, key=by_class.get)], key=lambda p: p[0])
    blame = biggest["blame"].lower()
    assert any(word.lower() in blame for word in gap["blame_any"]), (
        f"blame {biggest['blame']!r} names none of {gap['blame_any']}: {gap['why']}"
    )


def _check_reads_found(result: dict, read: dict) -> None:
    found = sum(s["count"] for s in _matching_syncs(result, read["op"], read["apis"]))
    low, high = read["count"], read["count"] + read["tolerated"]
    assert low <= found <= high, (
        f"{found} reads op={read['op']!r} api in {read['apis']}, expected {low}..{high}; "
        f"found: {_describe_syncs(result)}"
    )


def _check_reads_exclusive(result: dict, answer: dict) -> None:
    known = _expected_reads(answer)
    # Implicit synchronizers (issue 14 s3: cudaFree/hipFree, ...) may be listed as reads of their own kind.
    implicit = {api for entry in answer["reads"].get("implicit", []) for api in entry["apis"]}
    unexpected = [
        s
        for s in result["syncs"]
        if s["api"] not in implicit and not any(s["op"] == r["op"] and s["api"] in r["apis"] for r in known)
    ]
    assert not unexpected, f"reads not in the trace's answer: {_describe_syncs({'syncs': unexpected})}"


def _check_own_syncs_dropped(result: dict, answer: dict) -> None:
    """torch.profiler's (or bubblescope's) own synchronize is never listed: reads of its (op, api) are
    exactly the user's expected ones."""
    expected_reads = _expected_reads(answer)
    for own in answer["reads"]["own_syncs"]:
        users = sum(
            r["count"] for r in expected_reads if r["op"] == own["op"] and set(r["apis"]) & set(own["apis"])
        )
        found = sum(s["count"] for s in _matching_syncs(result, own["op"], own["apis"]))
        assert found == users, f"{found} reads, {users} of them the user's; the rest is: {own['why']}"


def _check_steps(result: dict, answer: dict) -> None:
    steps = answer["steps"]
    counts = steps.get("count_per_rank") or [steps["count"]]
    for rank, count in enumerate(counts):
        found = sum(1 for s in result["steps"] if s["rank"] == rank)
        assert found == count, f"rank {rank}: {found} steps, expected {count}: {steps['why']}"


def _check_bubble_max(result: dict, bound: dict) -> None:
    syncs = _matching_syncs(result, bound["op"], bound["apis"])
    assert syncs, f"read op={bound['op']!r} api in {bound['apis']} not found: {_describe_syncs(result)}"
    bubble_ns = sum(s["bubble_ns"] for s in syncs)
    limit_ns = int(bound["max_bubble_us"] * NS_PER_US)
    assert bubble_ns <= limit_ns, (
        f"bubble {bubble_ns / 1e3:.1f} us > {bound['max_bubble_us']} us: {bound['why']}"
    )


@pytest.mark.parametrize(("case", "kind"), _claims())
def test_real_trace_claim(case: str, kind: str) -> None:
    answer = expected(case)
    result, origins = analysed(case)
    name, _, index = kind.partition(":")
    if name == "bubble_bounded":
        over = [s for s in result["syncs"] if s["bubble_ns"] > s["blocked_ns"]]
        assert not over, f"reads blamed for more idle than they blocked: {_describe_syncs({'syncs': over})}"
    elif name == "steps":
        _check_steps(result, answer)
    elif name == "reads_found":
        _check_reads_found(result, _expected_reads(answer)[int(index)])
    elif name == "reads_exclusive":
        _check_reads_exclusive(result, answer)
    elif name == "own_syncs_dropped":
        _check_own_syncs_dropped(result, answer)
    elif name.startswith("gap"):
        gap = answer["gaps"][int(name[3:].split("_")[0])]
        if name.endswith("_class"):
            _check_gap_class(result, origins, gap)
        else:
            _check_gap_blame(result, origins, gap)
    elif name == "bubble_max":
        _check_bubble_max(result, answer["bubbles"][int(index)])
    elif name == "sync_idle_zero":
        sync_ns = sum(d["idle_by_class_ns"]["sync"] for d in result["devices"])
        assert sync_ns == 0, f"{sync_ns / 1e3:.1f} us of sync idle: {answer['sync_idle_zero']['why']}"
    else:
        raise AssertionError(f"unknown claim {kind}")
