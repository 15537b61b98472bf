"""A queued gap is `dependency` only with evidence (issue 23 §4), on real public traces.

Each case names a GPU idle interval by the raw events' `ts` (µs as written in the file): the op whose
end opens it and the op whose start closes it. The test first checks those facts on the raw events
(no GPU op of the device runs inside the interval, the streams, whether the trace has any stream-wait
call), then the class and blame the analysis gives the queued piece that ends the interval.
"""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from functools import cache
from pathlib import Path

import pytest

from bubblescope.analysis.traces import analyze_ranks, gap_blames

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")

# (trace, gap start ts, gap end ts, stream that ran before (None: no op before), stream of the closing
#  op, expected class, a word the blame must hold, why)
CASES = [
    (
        "hta_a100_sampled_rank0",
        "1682725899072204",
        "1682725899131066",
        7,
        84,
        "dependency",
        "stream 7",
        "a cutlass gemm on stream 7 ends at +0; ncclKernel_SendRecv on stream 84 (launched earlier, "
        "correlation 7170295 < the gemm's 7170892) starts 58.9 ms later: the whole gap was queued and "
        "the op that opened it ran on another stream. The trace has no stream-wait call: the other "
        "stream is the evidence",
    ),
    (
        "hta_a100_sampled_rank0",
        "1682725898457064",
        "1682725898513678",
        7,
        7,
        "launch",
        "no stream wait",
        "a cutlass gemm on stream 7 ends; fbgemm _FP8rowwise_to_float on the same stream 7 starts 56.6 ms "
        "later, its launch returned at 1682725898457467; no stream-wait call anywhere in the trace and no "
        "other stream ran in between: nothing shows a dependency (the trace is a sampled one, events "
        "were filtered out)",
    ),
    (
        "tl_vllm_graph_decode_mi300x",
        None,
        "6520618861858.561",
        None,
        0,
        "launch",
        "no stream wait",
        "the first GPU op, Memcpy DtoD on stream 0 (the trace's only stream), starts 7.8 ms after its "
        "hipMemcpyAsync (6520618854021.96, 10.45 us) returned; the trace has no hipStreamWaitEvent",
    ),
    (
        "tm_vllm_h100",
        "3676599955061.44",
        "3676599955065.248",
        7,
        7,
        "dependency",
        "cudaStreamWaitEvent",
        "ncclDevKernel_AllReduce on stream 7 after a cudaStreamWaitEvent at 3676599947360.238 on the "
        "launching thread, issued after stream 7's previous launch: the wait call is the evidence",
    ),
]


@cache
def _raw(path: Path) -> tuple[list[dict], int]:
    with gzip.open(path, "rt") as handle:
        events = [e for e in json.load(handle, parse_float=Decimal)["traceEvents"] if e.get("ph") == "X"]
    waits = sum(1 for e in events if "StreamWaitEvent" in str(e.get("name")))
    return [e for e in events if e.get("cat") in GPU_CATS], waits


@cache
def _rank(path: Path):
    (rank,) = analyze_ranks([path])
    return rank


@pytest.mark.parametrize(
    ("name", "start_ts", "end_ts", "before", "after", "cls", "word", "why"),
    CASES,
    ids=[f"{c[0]}-{c[5]}-{i}" for i, c in enumerate(CASES)],
)
def test_queued_gap_class_needs_evidence(
    shared_dir: Path,
    name: str,
    start_ts: str | None,
    end_ts: str,
    before: int | None,
    after: int,
    cls: str,
    word: str,
    why: str,
) -> None:
    path = shared_dir / "data" / "real_traces" / f"{name}.json.gz"
    gpu, waits = _raw(path)
    end = Decimal(end_ts)
    # The raw facts the expected answer rests on.
    (closing,) = [e for e in gpu if e["ts"] == end and e["args"]["stream"] == after][:1]
    if start_ts is None:
        assert min(e["ts"] for e in gpu) == end, "the closing op is the trace's first GPU op"
    else:
        start = Decimal(start_ts)
        assert [e for e in gpu if e["ts"] + e["dur"] == start and e["args"]["stream"] == before]
        assert not [e for e in gpu if e["ts"] < end and e["ts"] + e["dur"] > start], "device idle inside"
    if cls == "launch":
        assert waits == 0, "no stream-wait call in the trace"
    rank = _rank(path)
    end_ns = rank.tables.origin_ns + int((end - Decimal(rank.tables.origin_ns) / 1000) * 1000)
    gaps = rank.gaps
    piece = gaps[(gaps["end_ns"] == end_ns).to_numpy() & (gaps["class"] != "outside").to_numpy()]
    assert len(piece) == 1, f"one piece ends at {end_ts}: {why}"
    assert piece["class"].iloc[0] == cls, f"{piece['class'].iloc[0]}, expected {cls}: {why}"
    (blame,) = gap_blames(rank)(piece)
    assert word in blame, f"blame {blame!r} lacks {word!r}: {why}"
    if cls == "launch":
        assert "waited" not in blame, why
    assert closing["name"] == piece["next_op"].iloc[0]
