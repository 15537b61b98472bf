"""Inputs an attacker would hand bubblescope, one kind per function, at any size (issue 28).

Each writer streams its file (a few KB held at a time), so a 200 MiB input costs the generator no
memory. The kinds: many events, many idle gaps, big top-level metadata (flat strings or nested), one
event with a huge `args`, many ranks, many files in a folder, many gzip members, kernels whose
correlation ids point nowhere, and a RunRecord with many repeats. `tests/hostile/test_budgets.py`
runs small sizes in the default suite and large ones under `slow`; `benchmarks/bench_hostile.py`
measures peak memory and time per kind at two sizes.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests.hostile.seeds import real_record

BASE_US = 1_700_000_000_000
_BLOCK = 1 << 20


def _step(index: int, kernels: int, gap_us: float) -> Iterator[dict[str, Any]]:
    """One decode step: a step annotation over `kernels` launches, each kernel `gap_us` after the last."""
    span_us = kernels * (10 + gap_us) + 10
    start = BASE_US + index * (span_us + 5)
    yield {
        "ph": "X",
        "cat": "user_annotation",
        "name": "bubblescope.step",
        "pid": 1,
        "tid": 1,
        "ts": start,
        "dur": span_us,
        "args": {},
    }
    for k in range(kernels):
        corr = index * kernels + k + 1
        launch = start + 1 + k * (10 + gap_us)
        yield {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": launch,
            "dur": 2,
            "args": {"correlation": corr},
        }
        yield {
            "ph": "X",
            "cat": "kernel",
            "name": f"k{k % 7}",
            "pid": 0,
            "tid": 7,
            "ts": launch + 3,
            "dur": 8,
            "args": {"device": 0, "stream": 7, "correlation": corr},
        }


def _write_trace(
    path: Path, events: Iterator[dict[str, Any]], head: Callable[[Any], None] | None = None
) -> Path:
    """`{<head members>, "traceEvents": [events]}`, written as it goes (gzip when the name says so)."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as out:
        out.write('{"schemaVersion": 1, ')
        if head is not None:
            head(out)
        out.write('"traceEvents": [')
        for i, event in enumerate(events):
            out.write(("," if i else "") + json.dumps(event))
        out.write("]}")
    return path


def _steps(events: int, gap_us: float = 2.0) -> Iterator[dict[str, Any]]:
    """About `events` events in steps of 20 launches (41 events a step)."""
    for index in range(max(1, events // 41)):
        yield from _step(index, 20, gap_us)


def many_events(path: Path, events: int) -> Path:
    """A valid trace of about `events` events, kernels back to back (few gaps)."""
    return _write_trace(path, _steps(events, gap_us=0.0))


def many_gaps(path: Path, events: int) -> Path:
    """A valid trace of about `events` events where every kernel is followed by an idle gap."""
    return _write_trace(path, _steps(events, gap_us=40.0))


def _big_string(out: Any, size: int) -> None:
    out.write('"')
    for done in range(0, size, _BLOCK):
        out.write("x" * min(_BLOCK, size - done))
    out.write('"')


def metadata_strings(path: Path, total_bytes: int, values: int = 3) -> Path:
    """A small valid trace whose top-level metadata holds `values` strings of `total_bytes` in all."""

    def head(out: Any) -> None:
        for i in range(values):
            out.write(f'"blob{i}": ')
            _big_string(out, total_bytes // values)
            out.write(", ")

    return _write_trace(path, _steps(400), head)


def _repeated(out: Any, unit: str, count: int) -> None:
    """`count` copies of `unit` joined by commas, written a block at a time."""
    per_block = max(1, _BLOCK // (len(unit) + 1))
    for done in range(0, count, per_block):
        out.write(("," if done else "") + ",".join([unit] * min(per_block, count - done)))


def metadata_nested(path: Path, total_bytes: int) -> Path:
    """A small valid trace with one top-level member of `total_bytes` of nested objects and arrays."""
    unit = '{"a": [1, {"b": ["c", [2.5, null]]}], "d": {"e": true}}'

    def head(out: Any) -> None:
        out.write('"deviceProperties": [')
        _repeated(out, unit, max(1, total_bytes // (len(unit) + 1)))
        out.write("], ")

    return _write_trace(path, _steps(400), head)


def args_bytes(path: Path, total_bytes: int, as_list: bool = True) -> Path:
    """A small valid trace in which one cpu_op's `args` is `total_bytes` of data: a list of objects
    (`as_list`, the member the tables read is then not an object at all) or an object with one
    list member the tables never read."""
    item = '{"shape": [1, 2, 3], "name": "x"}'
    count = max(1, total_bytes // (len(item) + 1))

    def events() -> Iterator[dict[str, Any] | str]:
        yield from _steps(200)

    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as out:
        out.write('{"schemaVersion": 1, "traceEvents": [')
        for event in events():
            out.write(json.dumps(event) + ",")
        out.write(
            '{"ph": "X", "cat": "cpu_op", "name": "aten::big", "pid": 1, "tid": 1, '
            f'"ts": {BASE_US}, "dur": 1, "args": '
        )
        out.write("[" if as_list else '{"Input Dims": [')
        _repeated(out, item, count)
        out.write("]" if as_list else "]}")
        out.write("}]}")
    return path


def many_ranks(folder: Path, ranks: int, events: int) -> Path:
    """`ranks` trace files (`rank<N>.trace.json`) of about `events` events each, with distributedInfo."""
    folder.mkdir(parents=True, exist_ok=True)
    for rank in range(ranks):
        _write_trace(
            folder / f"rank{rank}.trace.json",
            _steps(events),
            lambda out, r=rank: out.write(f'"distributedInfo": {{"rank": {r}}}, '),
        )
    return folder


def many_files(folder: Path, files: int) -> Path:
    """A folder of `files` tiny valid trace files (one step each)."""
    folder.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"schemaVersion": 1, "traceEvents": list(_step(0, 2, 1.0))})
    for i in range(files):
        (folder / f"t{i:06d}.trace.json").write_text(text)
    return folder


def gzip_members(path: Path, members: int) -> Path:
    """A gzip file of `members` empty gzip members followed by one member holding a small trace."""
    empty = gzip.compress(b"", mtime=0)
    with open(path, "wb") as out:
        batch = empty * 4096
        for _ in range(members // 4096):
            out.write(batch)
        out.write(empty * (members % 4096))
        trace = json.dumps({"schemaVersion": 1, "traceEvents": list(_steps(200))}).encode()
        out.write(gzip.compress(trace, mtime=0))
    return path


def orphan_kernels(path: Path, kernels: int) -> Path:
    """A trace of one step whose `kernels` kernels carry correlation ids no runtime call has."""

    def events() -> Iterator[dict[str, Any]]:
        yield {
            "ph": "X",
            "cat": "user_annotation",
            "name": "bubblescope.step",
            "pid": 1,
            "tid": 1,
            "ts": BASE_US,
            "dur": kernels * 10 + 10,
            "args": {},
        }
        for k in range(kernels):
            yield {
                "ph": "X",
                "cat": "kernel",
                "name": "orphan",
                "pid": 0,
                "tid": 7,
                "ts": BASE_US + 1 + k * 10,
                "dur": 8,
                "args": {"device": 0, "stream": 7, "correlation": 10_000_000 + k},
            }

    return _write_trace(path, events())


def record_repeats(path: Path, repeats: int) -> Path:
    """The real CPU RunRecord with `repeats` repeats (each the first repeat's samples again)."""
    record = real_record()
    for key in ("samples_ns", "tokens_per_step", "host_samples_ns"):
        if isinstance(record.get(key), list) and record[key]:
            record[key] = [record[key][0]] * repeats
    if isinstance(record.get("repeat_wall_ns"), list) and record["repeat_wall_ns"]:
        record["repeat_wall_ns"] = [record["repeat_wall_ns"][0]] * repeats
    path.write_text(json.dumps(record))
    return path
