"""Make large traces and rank folders out of a real one, for the analysis benchmarks.

`replicate_steps(src, dst, copies)`: the real trace's events `copies` times one after another. Copy k's
timestamps are shifted by k x (the trace's span + 1 ms) and its ids (`correlation`, `External id`,
`Python id`, `Python parent id`, `Ev Idx`, `Record function id`, flow `id`) by k x (the largest id + 1),
so launches, flows and Python frames stay paired within their copy and never across copies. Metadata
events (`ph: M`) and top-level members are kept once. A 178,812-event vLLM trace copied 10 times is a
1.79 M-event file with 10x its steps, gaps and reads, which is what "linear in events and in gaps" needs.

`write_ranks(src, folder, ranks)`: `ranks` files `rank00000.trace.json.gz`, rank r being the real trace
with its ids shifted by r x (the largest id + 1), its timestamps by r us, and `distributedInfo.rank = r`.

Usage:
    .venv/bin/python benchmarks/replicate_trace.py steps SRC.json.gz DST.json --copies 10
    .venv/bin/python benchmarks/replicate_trace.py ranks SRC.json.gz FOLDER --ranks 64
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path
from typing import Any

ID_ARGS = ("correlation", "External id", "Python id", "Python parent id", "Ev Idx", "Record function id")
# Between two copies: the gap after one copy's last event and before the next one's first.
COPY_GAP_US = 1000.0


def read_trace(src: Path) -> dict[str, Any]:
    """The trace as a dict (a bare event array becomes {"traceEvents": [...]})."""
    raw = src.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    return doc if isinstance(doc, dict) else {"traceEvents": doc}


def _largest_id(events: list[dict]) -> int:
    largest = 0
    for event in events:
        if isinstance(event.get("id"), int):
            largest = max(largest, event["id"])
        args = event.get("args")
        if isinstance(args, dict):
            for key in ID_ARGS:
                if isinstance(args.get(key), int):
                    largest = max(largest, args[key])
    return largest


def _span_us(events: list[dict]) -> float:
    times = [
        (e["ts"], e["ts"] + (e.get("dur") or 0)) for e in events if isinstance(e.get("ts"), (int, float))
    ]
    return max(end for _, end in times) - min(start for start, _ in times)


def _shifted(event: dict, ts_us: float, id_shift: int) -> dict:
    """A copy of `event` with ts + ts_us and every id + id_shift (negative or absent ids kept)."""
    out = dict(event)
    if isinstance(out.get("ts"), (int, float)):
        out["ts"] = round(out["ts"] + ts_us, 3)
    if isinstance(out.get("id"), int) and out["id"] >= 0:
        out["id"] += id_shift
    args = out.get("args")
    if isinstance(args, dict):
        args = dict(args)
        for key in ID_ARGS:
            if isinstance(args.get(key), int) and args[key] >= 0:
                args[key] += id_shift
        out["args"] = args
    return out


def _write(doc: dict[str, Any], dst: Path) -> None:
    text = json.dumps(doc, separators=(",", ":")).encode()
    if dst.name.endswith(".gz"):
        # Level 1: the benchmark times reading, not how hard the file was compressed.
        dst.write_bytes(gzip.compress(text, compresslevel=1))
    else:
        dst.write_bytes(text)


def replicate_steps(src: Path, dst: Path, copies: int) -> int:
    """Write `copies` back-to-back copies of `src`'s events to `dst`; returns the event count. The
    output is written copy by copy, so a file of many GB needs memory for one copy only."""
    doc = read_trace(src)
    events = doc.pop("traceEvents")
    metadata = [e for e in events if e.get("ph") == "M"]
    timed = [e for e in events if e.get("ph") != "M"]
    period_us = _span_us(timed) + COPY_GAP_US
    id_shift = _largest_id(events) + 1
    opener = gzip.open if dst.name.endswith(".gz") else open
    # Level 1: the benchmark times reading, not how hard the file was compressed.
    with opener(dst, "wb", **({"compresslevel": 1} if dst.name.endswith(".gz") else {})) as out:
        out.write(b'{"traceEvents":[')
        out.write(",".join(json.dumps(e, separators=(",", ":")) for e in metadata).encode())
        for copy in range(copies):
            shifted = (_shifted(e, copy * period_us, copy * id_shift) for e in timed)
            text = ",".join(json.dumps(e, separators=(",", ":")) for e in shifted)
            out.write((b"," if metadata or copy else b"") + text.encode())
        rest = json.dumps(doc, separators=(",", ":"))[1:]
        out.write(b"]" + ((b"," + rest.encode()) if doc else b"}"))
    return len(metadata) + copies * len(timed)


def write_ranks(src: Path, folder: Path, ranks: int) -> list[Path]:
    """Write `ranks` rank files of `src` into `folder` (see the module docstring)."""
    doc = read_trace(src)
    events = doc["traceEvents"]
    id_shift = _largest_id(events) + 1
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank in range(ranks):
        shifted = [e if e.get("ph") == "M" else _shifted(e, float(rank), rank * id_shift) for e in events]
        info = {**(doc.get("distributedInfo") or {}), "rank": rank, "world_size": ranks}
        path = folder / f"rank{rank:05d}.trace.json.gz"
        _write({**doc, "distributedInfo": info, "traceEvents": shifted}, path)
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    steps = sub.add_parser("steps")
    steps.add_argument("src", type=Path)
    steps.add_argument("dst", type=Path)
    steps.add_argument("--copies", type=int, default=10)
    ranks = sub.add_parser("ranks")
    ranks.add_argument("src", type=Path)
    ranks.add_argument("folder", type=Path)
    ranks.add_argument("--ranks", type=int, default=64)
    args = parser.parse_args()
    if args.command == "steps":
        print(f"{args.dst}: {replicate_steps(args.src, args.dst, args.copies)} events")
    else:
        print(f"{args.folder}: {len(write_ranks(args.src, args.folder, args.ranks))} rank files")


if __name__ == "__main__":
    main()
