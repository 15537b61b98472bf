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
    partial = [(s, e, n) for s, e, n in ranges if min(e, g1) - max(s, g0) > 0 and not (s <= g0 and e >= g1)]
    # Outermost: a partial range inside another partial range is not counted again.
    outer = [
        r
        for r in partial
        if not any(
            o is not r and o[0] <= r[0] and r[1] <= o[1] and (o[0], o[1]) != (r[0], r[1]) for o in partial
        )
    ]
    sums: dict[str, int] = {}
    for s, e, n in outer:
        sums[n] = sums.get(n, 0) + min(e, g1) - max(s, g0)
    return sums


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
