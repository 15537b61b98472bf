"""Write the original trace plus bubblescope's findings on their own tracks, for ui.perfetto.dev.

Added: one process "bubblescope findings" with a track per device of idle gaps (one slice per gap,
named by class so Perfetto colours each class alike, blame in args), a track of host-blocking reads
(slices over the blocking calls with site, op and fix hint) and a track of the step windows.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bubblescope.files.atomic import write_json_atomic
from bubblescope.trace.load import DEFAULT_MAX_DECOMPRESSED_BYTES, load_raw_trace

if TYPE_CHECKING:
    from bubblescope.ranks.analysis import RankAnalysis

FINDINGS_PID = 7_770_000
MAX_BLAMED_GAPS = 2000
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
    """Re-read `rank`'s trace, append the findings, write it atomically (gzip if OUT ends in .gz).

    Args:
        rank: one rank's analysis (absolute-ns tables).
        blame: gap row -> blame text.
        out_path: destination `.json` or `.json.gz`.
    """
    raw = load_raw_trace(rank.tables.path, max_decompressed_bytes)
    events = raw.events
    events.extend(_metadata(rank))
    events.extend(_step_slices(rank))
    events.extend(_read_slices(rank))
    events.extend(_gap_slices(rank, blame))
    doc = dict(raw.meta)
    doc["traceEvents"] = events
    return write_json_atomic(out_path, doc, indent=None)


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


def _gap_slices(rank: RankAnalysis, blame) -> list[dict]:
    gaps = rank.gaps
    # Host blame scans the host ranges once per gap; name it for the largest gaps only.
    detailed = set(gaps["dur_ns"].nlargest(MAX_BLAMED_GAPS).index) if len(gaps) > MAX_BLAMED_GAPS else None
    events = []
    for index, gap in zip(gaps.index, gaps.to_dict("records"), strict=True):
        text = blame(gap) if detailed is None or index in detailed else gap["class"]
        args = {
            "class": gap["class"],
            "blame": text,
            "dur_us": _us(int(gap["dur_ns"])),
            "step": int(gap["step"]),
            "next_op": gap["next_op"],
        }
        events.append(
            _slice(
                GAPS_TID_BASE + int(gap["device"]),
                f"idle: {gap['class']}",
                int(gap["start_ns"]),
                int(gap["end_ns"]),
                args,
                CLASS_COLOUR.get(gap["class"]),
            )
        )
    return events
