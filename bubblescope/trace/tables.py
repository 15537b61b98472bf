"""Normalise a parsed Kineto trace into columnar pandas tables (integer ns, interned names).

One pass buckets the events by category (new and old Kineto names alike); each bucket then becomes
columns (numpy arrays, categoricals) and the events are dropped; each table is one DataFrame made
once from its joined columns (a DataFrame per chunk and table cost ~0.1 µs/event in pandas overhead on
the 1.7 M-event benchmark file). Tables:

- `ops`      host cpu_op and user_annotation ranges          name, cat, tid, start_ns, end_ns
- `frames`   Python frames (`with_stack=True`)               name, tid, start_ns, end_ns, py_id, parent_id
- `runtime`  CUDA runtime / driver calls                     name, api, tid, start_ns, end_ns, correlation
- `gpu`      kernels, memcpys, memsets                       name, kind, device, stream, start_ns, end_ns,
                                                             correlation, bytes, grid_x
                                                             (the launch grid's x; -1 unknown)
- `waits`    cuda_sync rows (GPU side of a sync)             name, device, stream, start_ns, end_ns,
                                                             correlation
- `gpu_annotations`  gpu_user_annotation rows                name, device, stream, start_ns, end_ns

Each column is decoded and checked in columns.py (ns times, interned names, integer ids); this file
buckets, assembles and joins the tables.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from bubblescope.errors import TraceError
from bubblescope.trace.buckets import Fields, bucket_events, fields_of_dicts
from bubblescope.trace.columns import (
    device_stream,
    flag_by_category,
    grid_x_column,
    int_column,
    name_column,
    tid_column,
    time_base_us,
    times_ns,
)
from bubblescope.trace.events import Event
from bubblescope.trace.text import META_MEMBERS_READ

# Some Kineto versions put sync rows on a virtual thread `stream + 1000000` next to the stream's row.
_VIRTUAL_SYNC_ROW_OFFSET = 1000000
# One table's columns from one chunk: numpy arrays and pandas Categoricals of equal length.
Columns = dict[str, Any]


@dataclass
class TraceTables:
    """All tables of one trace file (one rank). Times are absolute integer ns; `origin_ns` is the
    earliest event, the zero that reports use."""

    path: Path
    rank: int
    ops: pd.DataFrame
    frames: pd.DataFrame
    runtime: pd.DataFrame
    gpu: pd.DataFrame
    waits: pd.DataFrame
    gpu_annotations: pd.DataFrame
    origin_ns: int
    end_ns: int
    event_count: int
    format: str
    meta: dict[str, Any] = field(default_factory=dict)
    # Notes on what loading skipped or assumed, one line each (shown with the analysis warnings).
    warnings: list[str] = field(default_factory=list)


def category_mask(column: pd.Series, predicate: Callable[[str], bool]) -> np.ndarray:
    """[n] bool: `predicate(value)` for a categorical column, evaluated once per distinct value."""
    labels = column.cat.categories
    flags = np.asarray([bool(predicate(str(label))) for label in labels] + [False], dtype=bool)
    return flags[column.cat.codes.to_numpy()]


def category_labels(column: pd.Series) -> np.ndarray:
    """[n] object array of a categorical column's strings (one take, no per-row conversion)."""
    labels = np.asarray([str(label) for label in column.cat.categories] + [""], dtype=object)
    return labels[column.cat.codes.to_numpy()]


def build_tables(events: list[Any], meta: dict[str, Any], path: Path, rank: int) -> TraceTables:
    """Build the tables from an in-memory list of event dicts (see `build_tables_streamed`)."""
    return _build([fields_of_dicts(events, path)], len(events), meta, path, rank)


def build_tables_streamed(
    chunks: Iterable[list[Event]],
    meta_of: Callable[[], dict[str, Any]],
    path: Path,
    rank: int,
) -> TraceTables:
    """Bucket each chunk of events by category into columnar parts, drop the chunk, and join the parts.

    Args:
        chunks: in file order, lists of `events.Event` (`text.TraceText.chunks()`).
        meta_of: called after the last chunk: the trace's top-level keys (rank, schema version).
        path: the file, for messages.
        rank: rank to use when the trace carries no `distributedInfo.rank`.

    Raises:
        TraceError: an event of a used category lacks `ts`/`dur`/`name`, or has a time out of range or
            a field of the wrong type.
    """
    counted, left_out = [0], [0]

    def buckets() -> Iterable[dict[str, Fields]]:
        for chunk in chunks:
            counted[0] += len(chunk)
            found = bucket_events(chunk, left_out)
            # Events of no table (flows, instants) are freed now, not after the next chunk's decode.
            del chunk
            yield found

    parts = _table_parts(buckets(), path)
    tables = _finish(parts, counted[0], meta_of(), path, rank)
    if left_out[0]:
        tables.warnings.append(f"{left_out[0]} complete events with a list or object as 'cat' were left out")
    return tables


def _build(
    bucket_list: list[dict[str, Fields]], event_count: int, meta: dict[str, Any], path: Path, rank: int
) -> TraceTables:
    return _finish(_table_parts(bucket_list, path), event_count, meta, path, rank)


def _table_parts(bucket_stream: Iterable[dict[str, Fields]], path: Path) -> tuple[dict[str, list], bool]:
    """Per table, its column parts (one dict of columns per chunk that has rows), and whether old
    category names were seen."""
    parts: dict[str, list[Columns]] = {name: [] for name in (*_TABLE_BUILDERS, "gpu")}
    base_us: int | None = None
    legacy = False
    # numpy would print a warning for each cast of a huge or NaN value; every such value is refused
    # with a TraceError before its cast, so the warnings would only repeat it.
    with np.errstate(all="ignore"):
        for buckets in bucket_stream:
            if not buckets:
                continue
            if base_us is None:
                base_us = time_base_us(buckets, path)
            legacy = legacy or _has_legacy_names(buckets)
            for name, make in _TABLE_BUILDERS.items():
                if name in buckets:
                    parts[name].append(make(buckets[name], base_us, path))
            for kind in ("kernel", "memcpy", "memset"):
                if kind in buckets:
                    parts["gpu"].append(_gpu_table(buckets[kind], kind, base_us, path))
            # Free this chunk's events before the next one is decoded, so that decode reuses their
            # memory (load + tables CPU lower in 3 of 3 alternating runs on the 1.7 M-event file).
            del buckets
    return parts, legacy


def _finish(
    parts_legacy: tuple[dict[str, list], bool], event_count: int, meta: dict[str, Any], path: Path, rank: int
) -> TraceTables:
    parts, legacy = parts_legacy
    empty = Fields(*([()] * 7))
    tables = {}
    # Each table's parts are dropped as soon as they are joined, and the unsorted GPU table as soon as
    # it is sorted: at most one extra copy of one table is alive at a time.
    for name, make in _TABLE_BUILDERS.items():
        table_parts = parts.pop(name)
        tables[name] = _concat(table_parts or [make(empty, 0, path)])
        table_parts.clear()
    gpu_parts = parts.pop("gpu")
    gpu = _concat(gpu_parts or [_gpu_table(empty, "kernel", 0, path)])
    gpu_parts.clear()
    gpu["kind"] = pd.Categorical(gpu["kind"], categories=["kernel", "memcpy", "memset"])
    gpu = gpu.sort_values("start_ns", kind="stable", ignore_index=True)
    result = TraceTables(
        path=path,
        rank=_rank_of(meta, rank),
        gpu=gpu,
        origin_ns=0,
        end_ns=0,
        event_count=event_count,
        format=_format_of(meta, legacy),
        # Only the members read here (the streamed reader skips the others without building them).
        meta={k: v for k, v in meta.items() if k in META_MEMBERS_READ},
        **tables,
    )
    _set_extent(result)
    return result


def _concat(parts: list[Columns]) -> pd.DataFrame:
    """One DataFrame from same-shaped column parts, joined row-wise; categorical columns merge their
    categories."""
    if len(parts) == 1:
        return _frame(parts[0])
    columns: Columns = {}
    for column, first in parts[0].items():
        if isinstance(first, pd.Categorical):
            columns[column] = union_categoricals([part[column] for part in parts])
        else:
            columns[column] = np.concatenate([part[column] for part in parts])
    return _frame(columns)


def _frame(columns: Columns) -> pd.DataFrame:
    # Object arrays stay object: pandas 3 would infer a string dtype for them.
    return pd.DataFrame(
        {
            key: pd.Series(values, dtype=object, copy=False)
            if isinstance(values, np.ndarray) and values.dtype == object
            else values
            for key, values in columns.items()
        }
    )


def _host_columns(fields: Fields, base_us: int, path: Path) -> dict[str, object]:
    """name, tid, start_ns, end_ns: the columns every host-side table starts with."""
    start_ns, end_ns = times_ns(fields, base_us, path)
    return {
        "name": name_column(fields, path),
        "tid": tid_column(fields, path),
        "start_ns": start_ns,
        "end_ns": end_ns,
    }


def _ops_table(fields: Fields, base_us: int, path: Path) -> Columns:
    is_annotation = flag_by_category(fields, "nnotation").astype(np.int8)
    return {
        **_host_columns(fields, base_us, path),
        "cat": pd.Categorical.from_codes(is_annotation, categories=["cpu_op", "user_annotation"]),
    }


def _frames_table(fields: Fields, base_us: int, path: Path) -> Columns:
    return {
        **_host_columns(fields, base_us, path),
        "py_id": int_column(fields.args, "python_id", -1, path),
        "parent_id": int_column(fields.args, "python_parent_id", -1, path),
    }


def _runtime_table(fields: Fields, base_us: int, path: Path) -> Columns:
    is_driver = flag_by_category(fields, "river").astype(np.int8)
    return {
        **_host_columns(fields, base_us, path),
        "api": pd.Categorical.from_codes(is_driver, categories=["runtime", "driver"]),
        "correlation": int_column(fields.args, "correlation", -1, path),
    }


def _gpu_table(fields: Fields, kind: str, base_us: int, path: Path) -> Columns:
    start_ns, end_ns = times_ns(fields, base_us, path)
    args = fields.args
    device, stream = device_stream(fields, path)
    return {
        "name": np.asarray(name_column(fields, path), dtype=object),
        "kind": np.full(len(start_ns), kind, dtype=object),
        "device": device,
        "stream": stream,
        "start_ns": start_ns,
        "end_ns": end_ns,
        "correlation": int_column(args, "correlation", -1, path),
        "bytes": int_column(args, "bytes", 0, path),
        "grid_x": grid_x_column(args),
    }


def _waits_table(fields: Fields, base_us: int, path: Path) -> Columns:
    start_ns, end_ns = times_ns(fields, base_us, path)
    device, stream = device_stream(fields, path)
    virtual = stream >= _VIRTUAL_SYNC_ROW_OFFSET
    stream[virtual] -= _VIRTUAL_SYNC_ROW_OFFSET
    return {
        "name": name_column(fields, path),
        "device": device,
        "stream": stream,
        "start_ns": start_ns,
        "end_ns": end_ns,
        "correlation": int_column(fields.args, "correlation", -1, path),
    }


def _gpu_annotation_table(fields: Fields, base_us: int, path: Path) -> Columns:
    start_ns, end_ns = times_ns(fields, base_us, path)
    device, stream = device_stream(fields, path)
    return {
        "name": name_column(fields, path),
        "device": device,
        "stream": stream,
        "start_ns": start_ns,
        "end_ns": end_ns,
    }


def _rank_of(meta: dict[str, Any], fallback: int) -> int:
    info = meta.get("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("rank"), int):
        return int(info["rank"])
    return fallback


def _has_legacy_names(buckets: dict[str, Fields]) -> bool:
    firsts = [buckets[name].cat[0] for name in ("kernel", "runtime", "ops") if name in buckets]
    return any(cat in ("Kernel", "Runtime", "Operator") for cat in firsts)


def _format_of(meta: dict[str, Any], legacy: bool) -> str:
    if legacy:
        return "kineto-legacy"
    version = meta.get("schemaVersion")
    return f"kineto-v{version}" if version is not None else "chrome"


def _set_extent(tables: TraceTables) -> None:
    starts = [
        t["start_ns"].min()
        for t in (tables.ops, tables.frames, tables.runtime, tables.gpu, tables.waits)
        if len(t)
    ]
    ends = [
        t["end_ns"].max()
        for t in (tables.ops, tables.frames, tables.runtime, tables.gpu, tables.waits)
        if len(t)
    ]
    if not starts:
        raise TraceError(f"{tables.path}: no host, runtime or GPU events (not a torch.profiler trace)")
    tables.origin_ns = int(min(starts))
    tables.end_ns = int(max(ends))


_TABLE_BUILDERS: dict[str, Callable[[Fields, int, Path], Columns]] = {
    "ops": _ops_table,
    "frames": _frames_table,
    "runtime": _runtime_table,
    "waits": _waits_table,
    "gpu_annotations": _gpu_annotation_table,
}
