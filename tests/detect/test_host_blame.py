"""Host blame's linear candidate search equals the brute-force definition on random ranges and gaps."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bubblescope.detect.host_blame import NOTHING_RECORDED, HostBlame


def _table(ranges: list[tuple[int, int, str]]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "name": pd.Categorical([r[2] for r in ranges]),
            "tid": pd.Categorical(["1"] * len(ranges)),
            "cat": pd.Categorical(["cpu_op"] * len(ranges)),
            "start_ns": np.asarray([r[0] for r in ranges], dtype=np.int64),
            "end_ns": np.asarray([r[1] for r in ranges], dtype=np.int64),
        }
    )


def _nested(draw_spans: list[tuple[int, int]], names: list[str]) -> list[tuple[int, int, str]]:
    """Turn random spans into a properly nested set (a call stack): drop a span that crosses one kept."""
    kept: list[tuple[int, int, str]] = []
    for (a, length), name in zip(draw_spans, names, strict=True):
        start, end = a, a + length
        if all(
            end <= s or start >= e or (s <= start and end <= e) or (start <= s and e <= end)
            for s, e, _ in kept
        ):
            kept.append((start, end, name))
    return kept


def _brute(ranges: list[tuple[int, int, str]], g0: int, g1: int) -> dict[str, int]:
    """By definition: each outermost range overlapping the gap without enclosing it is replaced by its
    deepest descendant covering more than half of that range's time in the gap; sums by name."""

    def overlap(r: tuple[int, int, str]) -> int:
        return min(r[1], g1) - max(r[0], g0)

    def inside(r: tuple[int, int, str], o: tuple[int, int, str]) -> bool:
        return o is not r and o[0] <= r[0] and r[1] <= o[1] and (o[0], o[1]) != (r[0], r[1])

    partial = [r for r in ranges if overlap(r) > 0 and not (r[0] <= g0 and r[1] >= g1)]
    outer = [r for r in partial if not any(inside(r, o) for o in partial)]
    sums: dict[str, int] = {}
    for root in outer:
        covering = [r for r in partial if (r is root or inside(r, root)) and 2 * overlap(r) > overlap(root)]
        # They nest (two disjoint ranges cannot both hold more than half): the deepest is the shortest.
        deepest = min(covering, key=lambda r: r[1] - r[0])
        assert all(r is deepest or inside(deepest, r) for r in covering)
        sums[deepest[2]] = sums.get(deepest[2], 0) + overlap(deepest)
    return sums


def test_blame_names_the_child_that_did_the_work() -> None:
    # loop body 0..100 us spans the gap's start; work 20..90 inside it, spin 25..88 inside that, and a
    # short call 30..31 inside spin: the deepest range covering more than half of the body's 80 us in
    # the gap [20, 120) is spin (63 us), not the body; the short call is far less than half.
    ranges = [
        (0, 100_000, "body"),
        (20_000, 90_000, "work"),
        (25_000, 88_000, "spin"),
        (30_000, 31_000, "call"),
    ]
    blame = HostBlame(_table(ranges), _table([]).drop(columns="cat"), "1")
    assert blame.blame(20_000, 120_000) == "spin 63.0us"
    # A gap [80, 180) where work covers 10 of the body's 20 us in it: not more than half, the body is named.
    rest = "rest: host (nothing recorded on the launching thread during the gap)"
    assert blame.blame(80_000, 180_000) == f"body 20.0us; {rest}"


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    spans=st.lists(st.tuples(st.integers(0, 200), st.integers(1, 80)), min_size=0, max_size=25),
    names=st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=25, max_size=25),
    cuts=st.lists(st.integers(0, 300), min_size=2, max_size=12),
)
def test_blame_many_matches_brute_force(spans, names, cuts) -> None:
    # µs-multiples, so that the text's 0.1 µs rounding is exact.
    spans = [(a * 1000, length * 1000) for a, length in spans]
    cuts = [c * 1000 for c in cuts]
    ranges = _nested(spans, names[: len(spans)])
    # Identical spans would make "outermost" ambiguous between two ranges of the same extent.
    ranges = list({(s, e): (s, e, n) for s, e, n in ranges}.values())
    points = sorted(set(cuts))
    gaps = [(a, b) for a, b in zip(points[::2], points[1::2], strict=False) if b > a]
    if not gaps:
        return
    blame = HostBlame(_table(ranges), _table([]).drop(columns="cat"), "1")
    starts = np.asarray([g[0] for g in gaps], dtype=np.int64)
    ends = np.asarray([g[1] for g in gaps], dtype=np.int64)
    texts = blame.blame_many(starts, ends)
    for (g0, g1), text in zip(gaps, texts, strict=True):
        expected = _brute(ranges, g0, g1)
        if not expected:
            assert text.startswith("host in") or text == NOTHING_RECORDED
            continue
        top = sorted(expected.items(), key=lambda kv: -kv[1])[:3]
        named = dict(part.rsplit(" ", 1) for part in text.split("; ") if not part.startswith("rest:"))
        assert {n: float(v[:-2]) for n, v in named.items()} == {
            n: ns / 1000 for n, ns in top if ns == ns
        } or (
            # Ties at the cut-off may name either range: the named ones carry the top sums.
            sorted(float(v[:-2]) for v in named.values()) == sorted(ns / 1000 for _, ns in top)
        ), (text, expected)


def test_each_kind_walks_down_its_own_nesting() -> None:
    # A frame spanning the gap's start and an op inside it covering most of its time: the op is not the
    # frame's child (kinds nest separately), so the frame keeps its name and the op is named beside it.
    frames = _table([(0, 100_000, "/home/u/app.py(5): body"), (20_000, 40_000, "/home/u/app.py(9): prep")])
    frames = frames.drop(columns="cat")
    ops = _table([(30_000, 95_000, "aten::mm")])
    blame = HostBlame(ops, frames, "1")
    # body covers 80 us of [20, 120); prep 20 us (not more than half); aten::mm 65 us. body was open
    # when tracing began (the thread's first frame): named with its line, not as a def line.
    assert blame.blame(20_000, 120_000) == "app.py(5): body 80.0us; aten::mm 65.0us"


def test_gap_covered_only_by_an_ignored_annotation_names_it() -> None:
    """A `## ... ##` annotation (torchrec's awaitable wrapper) and a step marker are never named as the
    work, but a gap they alone cover is not "nothing recorded" (issue 23 §4)."""
    ops = pd.DataFrame(
        {
            "name": pd.Categorical(["ProfilerStep#1", "## KJTListSplitsAwaitable wait() ##"]),
            "cat": ["user_annotation", "user_annotation"],
            "tid": ["1", "1"],
            "start_ns": np.asarray([0, 100], dtype=np.int64),
            "end_ns": np.asarray([1000, 400], dtype=np.int64),
        }
    )
    frames = ops.iloc[:0]
    blame = HostBlame(ops, frames, "1")
    assert blame.blame(150, 300).startswith("host in ## KJTListSplitsAwaitable wait() ## (no op")
    assert blame.blame(500, 600).startswith("host in ProfilerStep#1 (no op")
    assert blame.blame(2000, 2100) == NOTHING_RECORDED
