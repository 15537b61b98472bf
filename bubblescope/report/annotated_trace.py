"""Write the original trace plus bubblescope's findings on their own tracks, for ui.perfetto.dev.

Added: one process "bubblescope findings" with a track per device of idle gaps (one slice per gap,
named by class so Perfetto colours each class alike, blame in args), a track of host-blocking reads
(slices over the blocking calls with site, op and fix hint) and a track of the step windows.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from bubblescope.report.trace_splice import splice_trace
from bubblescope.trace.load import DEFAULT_MAX_DECOMPRESSED_BYTES

if TYPE_CHECKING:
    from bubblescope.ranks.analysis import RankAnalysis

FINDINGS_PID = 7_770_000
MAX_BLAMED_GAPS = 2000
GAP_ROWS_PER_BLOCK = 10_000
STEPS_TID, READS_TID, GAPS_TID_BASE = 1, 2, 10
# Chrome trace reserved colour names; Perfetto keys colour on the name, so class names differ too.
CLASS_COLOUR = {
    "sync": "terrible",
    "host": "bad",
    "launch": "yellow",
    "dependency": "olive",
    "outside": "grey",
}


def annotated_paths(out_path: str | Path, n_ranks: int) -> list[Path]:
    """Output file per rank: OUT itself for one rank, else OUT with `.rank<N>` before `.json`."""
    out = Path(out_path)
    if n_ranks == 1:
        return [out]
    stem, _, suffix = out.name.partition(".json")
    return [out.with_name(f"{stem}.rank{r}.json{suffix}") for r in range(n_ranks)]


def write_annotated_trace(
    rank: RankAnalysis,
    blame,
    out_path: str | Path,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> Path:
    """Copy `rank`'s trace with the findings added, atomically (gzip if OUT ends in .gz).

    The trace's text is streamed through (`trace_splice`: about one block held, under the same
    decompressed-size cap as analysis) and the findings are written one by one, so memory does not grow
    with the trace's size beyond the analysis itself.

    Args:
        rank: one rank's analysis (absolute-ns tables).
        blame: gap row -> blame text.
        out_path: destination `.json` or `.json.gz`.
        max_decompressed_bytes: the text cap (`--max-decompressed-mb`).
    """
    findings = itertools.chain(
        _metadata(rank), _step_slices(rank), _read_slices(rank), _gap_slices(rank, blame)
    )
    return splice_trace(rank.tables.path, findings, out_path, max_decompressed_bytes)


def _us(ns: int) -> float:
    # Kineto's own unit: µs with ns fractions.
    return round(ns / 1000.0, 3)


def _metadata(rank: RankAnalysis) -> list[dict]:
    threads = [(STEPS_TID, "steps"), (READS_TID, "host-blocking reads")]
    threads += [(GAPS_TID_BASE + int(d["device"]), f"GPU {d['device']} idle gaps") for d in rank.devices]
    events = [
        {
            "ph": "M",
            "name": "process_name",
            "pid": FINDINGS_PID,
            "tid": 0,
            "args": {"name": "bubblescope findings"},
        },
        {"ph": "M", "name": "process_sort_index", "pid": FINDINGS_PID, "tid": 0, "args": {"sort_index": -1}},
    ]
    events += [
        {"ph": "M", "name": "thread_name", "pid": FINDINGS_PID, "tid": tid, "args": {"name": name}}
        for tid, name in threads
    ]
    return events


def _slice(tid: int, name: str, start_ns: int, end_ns: int, args: dict, cname: str | None = None) -> dict:
    event = {
        "ph": "X",
        "cat": "bubblescope",
        "name": name,
        "pid": FINDINGS_PID,
        "tid": tid,
        "ts": _us(start_ns),
        "dur": _us(end_ns - start_ns),
        "args": args,
    }
    if cname:
        event["cname"] = cname
    return event


def _step_slices(rank: RankAnalysis) -> list[dict]:
    steps = rank.steps
    return [
        _slice(
            STEPS_TID,
            f"step {i}",
            int(steps.start_ns[i]),
            int(steps.end_ns[i]),
            {"marker": steps.names[i], "source": steps.source},
        )
        for i in range(len(steps))
    ]


def _read_slices(rank: RankAnalysis) -> list[dict]:
    events = []
    for read in rank.reads.itertuples(index=False):
        args = {
            "site": read.site,
            "op": read.op,
            "api": read.api,
            "kind": read.kind,
            "blocked_us": _us(int(read.blocked_ns)),
            "hint": read.hint,
        }
        events.append(
            _slice(
                READS_TID,
                f"blocking read: {read.op or read.api}",
                int(read.start_ns),
                int(read.end_ns),
                args,
                "terrible",
            )
        )
        events.append(
            {
                "ph": "i",
                "s": "p",
                "cat": "bubblescope",
                "name": f"sync at {read.site}",
                "pid": FINDINGS_PID,
                "tid": READS_TID,
                "ts": _us(int(read.start_ns)),
            }
        )
    return events


def _gap_slices(rank: RankAnalysis, blame) -> Iterator[dict]:
    gaps = rank.gaps
    # Host blame scans the host ranges once per gap; name it for the largest gaps only.
    detailed = set(gaps["dur_ns"].nlargest(MAX_BLAMED_GAPS).index) if len(gaps) > MAX_BLAMED_GAPS else None
    for first in range(0, len(gaps), GAP_ROWS_PER_BLOCK):
        # Rows as dicts a block at a time: one dict per gap of a whole trace is ~1 KB each.
        block = gaps.iloc[first : first + GAP_ROWS_PER_BLOCK]
        yield from _gap_block_slices(block, detailed, blame)


def _gap_block_slices(block, detailed: set | None, blame) -> Iterator[dict]:
    for index, gap in zip(block.index, block.to_dict("records"), strict=True):
        text = blame(gap) if detailed is None or index in detailed else gap["class"]
        args = {
            "class": gap["class"],
            "blame": text,
            "dur_us": _us(int(gap["dur_ns"])),
            "step": int(gap["step"]),
            "next_op": gap["next_op"],
        }
        yield _slice(
            GAPS_TID_BASE + int(gap["device"]),
            f"idle: {gap['class']}",
            int(gap["start_ns"]),
            int(gap["end_ns"]),
            args,
            CLASS_COLOUR.get(gap["class"]),
        )
