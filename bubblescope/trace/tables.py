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
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from bubblescope.errors import TraceError
from bubblescope.trace.buckets import Fields, bucket_events, describe_bad_field, fields_of_dicts
from bubblescope.trace.events import Event
from bubblescope.trace.text import META_MEMBERS_READ

# Kineto writes a context-wide sync on stream 2**32-1 (unsigned -1) in some versions, -1 in others.
_UNSIGNED_MINUS_ONE = 4294967295
# Some Kineto versions put sync rows on a virtual thread `stream + 1000000` next to the stream's row.
_VIRTUAL_SYNC_ROW_OFFSET = 1000000
# |ts| and dur in µs must stay below this for ns to fit in int64 (9.2e18 ns), with room for sums.
_MAX_TIME_US = 9e15
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
                base_us = _base_us(buckets, path)
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


def _base_us(buckets: dict[str, Fields], path: Path) -> int:
    """The integer µs that times are taken relative to: the first used event's `ts`."""
    fields = next(iter(buckets.values()))
    ts = fields.first_ts
    if not (isinstance(ts, (int, float)) and not isinstance(ts, bool) and -_MAX_TIME_US < ts < _MAX_TIME_US):
        raise TraceError(f"{path}: {describe_bad_field(fields, 'ts', 'an unusable')}")
    return int(ts)


def _times_ns(fields: Fields, base_us: int, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Start and end in absolute integer ns. Subtracting an integer base first keeps the float
    product exact to the ns that the µs float carries (Kineto writes ns fractions: 123.456)."""
    ts_us = _float_column(fields, "ts", path)
    dur_us = _float_column(fields, "dur", path)
    # NaN fails every comparison, so `~(... < ...)` also catches it.
    bad_ts = ~(np.abs(ts_us) < _MAX_TIME_US)
    bad_dur = ~((dur_us >= 0) & (dur_us < _MAX_TIME_US))
    for key, bad in (("ts", bad_ts), ("dur", bad_dur)):
        if bad.any():
            raise TraceError(f"{path}: {describe_bad_field(fields, key, 'an out-of-range')}")
    start_ns = np.rint((ts_us - base_us) * 1000.0).astype(np.int64) + base_us * 1000
    dur_ns = np.rint(dur_us * 1000.0).astype(np.int64)
    return start_ns, start_ns + dur_ns


def _float_column(fields: Fields, key: str, path: Path) -> np.ndarray:
    """[n] float64 of a time field; a missing or non-numeric value is a TraceError naming the event."""
    values = getattr(fields, key)
    try:
        column = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        column = None
    if column is None or column.shape != (len(values),):
        raise TraceError(f"{path}: {describe_bad_field(fields, key, 'a non-numeric')}")
    return column


def _interned(values: tuple | list[Any]) -> tuple[np.ndarray, list[Any]]:
    """Factorize a column once: (codes [n] int64, unique values in first-seen order, as
    `pandas.factorize` gives them); None gets code -1.

    One dict lookup per value at C level: 33-59 ns per event against pandas.factorize's 70-300 on the
    names of the 1.79 M-event benchmark file (kernel names of ~200 characters cost the most). A list
    or dict value raises TypeError, as in pandas.
    """
    code_of: defaultdict[Any, int] = defaultdict(count().__next__)
    codes = np.fromiter(map(code_of.__getitem__, values), dtype=np.int64, count=len(values))
    uniques = list(code_of)
    if None in code_of:
        none = code_of[None]
        codes[codes == none] = -1
        codes[codes > none] -= 1
        del uniques[none]
    return codes, uniques


def _hashable_codes(fields: Fields, key: str, path: Path) -> tuple[np.ndarray, list[Any]]:
    """`_interned` of a label field; a list or dict there is a TraceError naming the event."""
    try:
        codes, uniques = _interned(getattr(fields, key))
    except TypeError:
        raise TraceError(f"{path}: {describe_bad_field(fields, key, 'a list or object as')}") from None
    if any(not isinstance(u, (str, int, float)) or isinstance(u, bool) for u in uniques):
        raise TraceError(f"{path}: {describe_bad_field(fields, key, 'a non-scalar')}")
    return codes, uniques


def _names(fields: Fields, path: Path) -> pd.Categorical:
    codes, uniques = _hashable_codes(fields, "name", path)
    if len(codes) and codes.min() < 0:
        raise TraceError(f"{path}: {describe_bad_field(fields, 'name', 'no')}")
    return _categorical(codes, [u if isinstance(u, str) else str(u) for u in uniques])


def _categorical(codes: np.ndarray, labels: list[str]) -> pd.Categorical:
    # Two raw values can print alike (7 and "7"); merge them so the categories stay unique.
    merged = list(dict.fromkeys(labels))
    if len(merged) != len(labels):
        remap = np.asarray([merged.index(label) for label in labels], dtype=np.int64)
        codes = remap[codes]
    return pd.Categorical.from_codes(codes, categories=merged)


def _arg_values(events: Any, attr: str, fallback: Any) -> list[Any]:
    """event.args.<attr> per event; `fallback` (a value, or a sequence per event) where args or the
    member is absent."""
    per_event = isinstance(fallback, (list, tuple))
    try:
        values = _ARG_OF[attr](events)
    except AttributeError:
        # Some events have no args at all (None): their member is absent too.
        values = [None if e.args is None else getattr(e.args, attr) for e in events]
    if None not in values:
        return values
    if per_event:
        return [f if v is None else v for v, f in zip(values, fallback, strict=True)]
    return [fallback if v is None else v for v in values]


def _int_column(events: Any, attr: str, default: Any, path: Path, what: str | None = None) -> np.ndarray:
    """[n] int64 of an args member of `events` (or its per-event fallback); a non-integer is a
    TraceError."""
    values = _arg_values(events, attr, default)
    try:
        column = np.asarray(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        column = None
    if column is None or column.shape != (len(values),):
        label = what or f"args.{_ARG_NAMES.get(attr, attr)!r}"
        raise TraceError(f"{path}: an event's {label} is not an integer") from None
    return column


_ARG_NAMES = {"python_id": "Python id", "python_parent_id": "Python parent id"}
# One list comprehension per member (see `buckets._COLUMN_OF`: specialised slot reads, 3-4x faster
# than `map(attrgetter(...))`).
_ARG_OF: dict[str, Callable[[Any], list[Any]]] = {
    "correlation": lambda events: [e.args.correlation for e in events],
    "device": lambda events: [e.args.device for e in events],
    "stream": lambda events: [e.args.stream for e in events],
    "bytes": lambda events: [e.args.bytes for e in events],
    "grid": lambda events: [e.args.grid for e in events],
    "python_id": lambda events: [e.args.python_id for e in events],
    "python_parent_id": lambda events: [e.args.python_parent_id for e in events],
}


def _tids(fields: Fields, path: Path) -> pd.Categorical:
    try:
        as_array = np.asarray(fields.tid) if fields.tid and type(fields.tid[0]) is int else None
    except (ValueError, OverflowError):
        as_array = None
    if as_array is not None and as_array.dtype.kind == "i" and as_array.shape == (len(fields.tid),):
        # All integers (Kineto's thread ids): numpy factorizes them ~10x faster than objects.
        codes, unique_tids = pd.factorize(as_array)
        return _categorical(codes, [str(u) for u in unique_tids.tolist()])
    codes, uniques = _hashable_codes(fields, "tid", path)
    if len(codes) and codes.min() < 0:
        codes = np.where(codes < 0, len(uniques), codes)
        uniques.append(None)
    return _categorical(codes, [str(u) for u in uniques])


def _flag_by_category(fields: Fields, marker: str) -> np.ndarray:
    """[n] bool: the event's category name contains `marker` (decided once per distinct category)."""
    codes, uniques = _interned(fields.cat)
    flags = np.asarray([marker in str(u) for u in uniques] + [False], dtype=bool)
    return flags[codes]


def _host_columns(fields: Fields, base_us: int, path: Path) -> dict[str, object]:
    """name, tid, start_ns, end_ns: the columns every host-side table starts with."""
    start_ns, end_ns = _times_ns(fields, base_us, path)
    return {"name": _names(fields, path), "tid": _tids(fields, path), "start_ns": start_ns, "end_ns": end_ns}


def _ops_table(fields: Fields, base_us: int, path: Path) -> Columns:
    is_annotation = _flag_by_category(fields, "nnotation").astype(np.int8)
    return {
        **_host_columns(fields, base_us, path),
        "cat": pd.Categorical.from_codes(is_annotation, categories=["cpu_op", "user_annotation"]),
    }


def _frames_table(fields: Fields, base_us: int, path: Path) -> Columns:
    return {
        **_host_columns(fields, base_us, path),
        "py_id": _int_column(fields.args, "python_id", -1, path),
        "parent_id": _int_column(fields.args, "python_parent_id", -1, path),
    }


def _runtime_table(fields: Fields, base_us: int, path: Path) -> Columns:
    is_driver = _flag_by_category(fields, "river").astype(np.int8)
    return {
        **_host_columns(fields, base_us, path),
        "api": pd.Categorical.from_codes(is_driver, categories=["runtime", "driver"]),
        "correlation": _int_column(fields.args, "correlation", -1, path),
    }


def _device_stream(fields: Fields, path: Path) -> tuple[np.ndarray, np.ndarray]:
    # args.device / args.stream, else the event's pid / tid (older Kineto writes them only there).
    device = _int_column(fields.args, "device", fields.pid, path, "device (args.device or pid)")
    stream = _int_column(fields.args, "stream", fields.tid, path, "stream (args.stream or tid)")
    stream[stream == _UNSIGNED_MINUS_ONE] = -1
    return device, stream


def _gpu_table(fields: Fields, kind: str, base_us: int, path: Path) -> Columns:
    start_ns, end_ns = _times_ns(fields, base_us, path)
    args = fields.args
    device, stream = _device_stream(fields, path)
    return {
        "name": np.asarray(_names(fields, path), dtype=object),
        "kind": np.full(len(start_ns), kind, dtype=object),
        "device": device,
        "stream": stream,
        "start_ns": start_ns,
        "end_ns": end_ns,
        "correlation": _int_column(args, "correlation", -1, path),
        "bytes": _int_column(args, "bytes", 0, path),
        "grid_x": _grid_x(args),
    }


def _grid_x(events: Any) -> np.ndarray:
    """[n] int64: the first member of `args.grid` where it is a non-negative integer, else -1.

    Lenient on purpose: the grid only refines the per-kernel bytes of known workloads, so a trace
    with odd grids keeps every other number instead of being refused."""
    values = _arg_values(events, "grid", None)
    column = np.full(len(values), -1, dtype=np.int64)
    for index, grid in enumerate(values):
        first = grid[0] if isinstance(grid, list) and grid else None
        if type(first) is int and 0 <= first < 2**62:
            column[index] = first
    return column


def _waits_table(fields: Fields, base_us: int, path: Path) -> Columns:
    start_ns, end_ns = _times_ns(fields, base_us, path)
    device, stream = _device_stream(fields, path)
    virtual = stream >= _VIRTUAL_SYNC_ROW_OFFSET
    stream[virtual] -= _VIRTUAL_SYNC_ROW_OFFSET
    return {
        "name": _names(fields, path),
        "device": device,
        "stream": stream,
        "start_ns": start_ns,
        "end_ns": end_ns,
        "correlation": _int_column(fields.args, "correlation", -1, path),
    }


def _gpu_annotation_table(fields: Fields, base_us: int, path: Path) -> Columns:
    start_ns, end_ns = _times_ns(fields, base_us, path)
    device, stream = _device_stream(fields, path)
    return {
        "name": _names(fields, path),
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
