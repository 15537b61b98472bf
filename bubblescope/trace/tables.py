"""Normalise a parsed Kineto trace into columnar pandas tables (integer ns, interned names).

One pass buckets the events by category (new and old Kineto names alike); each bucket then becomes
a DataFrame through per-column comprehensions, and the dicts are dropped. Tables:

- `ops`      host cpu_op and user_annotation ranges          name, cat, tid, start_ns, end_ns
- `frames`   Python frames (`with_stack=True`)               name, tid, start_ns, end_ns, py_id, parent_id
- `runtime`  CUDA runtime / driver calls                     name, api, tid, start_ns, end_ns, correlation
- `gpu`      kernels, memcpys, memsets                       name, kind, device, stream, start_ns, end_ns,
                                                             correlation, bytes
- `waits`    cuda_sync rows (GPU side of a sync)             name, device, stream, start_ns, end_ns,
                                                             correlation
- `gpu_annotations`  gpu_user_annotation rows                name, device, stream, start_ns, end_ns
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import repeat
from operator import methodcaller
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from bubblescope.errors import TraceError
from bubblescope.trace.buckets import Fields, bucket_columns, bucket_dicts, describe_bad_time, fields_of
from bubblescope.trace.fastscan import EventColumns, json_value_of

# Kineto writes a context-wide sync on stream 2**32-1 (unsigned -1) in some versions, -1 in others.
_UNSIGNED_MINUS_ONE = 4294967295
# Some Kineto versions put sync rows on a virtual thread `stream + 1000000` next to the stream's row.
_VIRTUAL_SYNC_ROW_OFFSET = 1000000

# A bucket as the table builders take it: event dicts, or columns from the fast path.
Bucket = Fields | list[dict[str, Any]]


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
    """Build the tables from an in-memory event list (see `build_tables_streamed`)."""
    return build_tables_streamed([events], lambda: meta, path, rank)


def build_tables_streamed(
    chunks: Iterable[list[Any] | EventColumns],
    meta_of: Callable[[], dict[str, Any]],
    path: Path,
    rank: int,
) -> TraceTables:
    """Bucket each chunk of events by category into columnar parts, drop the chunk, and join the parts.

    Args:
        chunks: in file order, event lists or fast-path text columns (one list, or
            `StreamedTrace.chunks()`).
        meta_of: called after the last chunk: the trace's top-level keys (rank, schema version).
        path: the file, for messages.
        rank: rank to use when the trace carries no `distributedInfo.rank`.

    Raises:
        TraceError: an event of a used category lacks `ts`/`dur`/`name` or carries a non-numeric time.
    """
    parts: dict[str, list[pd.DataFrame]] = {name: [] for name in (*_TABLE_BUILDERS, "gpu")}
    base_us: int | None = None
    event_count, legacy = 0, False
    for chunk in chunks:
        if isinstance(chunk, EventColumns):
            buckets = bucket_columns(chunk)
        else:
            buckets = bucket_dicts(chunk, path, offset=event_count)
        event_count += len(chunk)
        if base_us is None and any(buckets.values()):
            base_us = _base_us(buckets, path)
        if base_us is None:
            continue
        legacy = legacy or _has_legacy_names(buckets)
        for name, make in _TABLE_BUILDERS.items():
            if buckets[name]:
                parts[name].append(make(buckets[name], base_us, path))
        for kind in ("kernel", "memcpy", "memset"):
            if buckets[kind]:
                parts["gpu"].append(_gpu_table(buckets[kind], kind, base_us, path))
    tables = {
        name: _concat(parts[name]) if parts[name] else make([], 0, path)
        for name, make in _TABLE_BUILDERS.items()
    }
    gpu = _concat(parts["gpu"]) if parts["gpu"] else _gpu_table([], "kernel", 0, path)
    gpu["kind"] = pd.Categorical(gpu["kind"], categories=["kernel", "memcpy", "memset"])
    meta = meta_of()
    result = TraceTables(
        path=path,
        rank=_rank_of(meta, rank),
        gpu=gpu.sort_values("start_ns", kind="stable", ignore_index=True),
        origin_ns=0,
        end_ns=0,
        event_count=event_count,
        format=_format_of(meta, legacy),
        meta={k: v for k, v in meta.items() if k != "traceEvents"},
        **tables,
    )
    _set_extent(result)
    return result


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Row-wise join of same-shaped parts; categorical columns merge their categories."""
    if len(frames) == 1:
        return frames[0]
    columns: dict[str, Any] = {}
    for column in frames[0].columns:
        if isinstance(frames[0][column].dtype, pd.CategoricalDtype):
            columns[column] = union_categoricals([f[column] for f in frames])
        else:
            columns[column] = np.concatenate([f[column].to_numpy() for f in frames])
    return pd.DataFrame(columns)


def _base_us(buckets: dict[str, Any], path: Path) -> int:
    for bucket in buckets.values():
        if isinstance(bucket, Fields):
            return int(bucket.first_ts)
        if bucket:
            ts = bucket[0].get("ts")
            if isinstance(ts, (int, float)):
                return int(ts)
            raise TraceError(f"{path}: {describe_bad_time(bucket)}")
    return 0


def _times_ns(fields: Fields, base_us: int, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Start and end in absolute integer ns. Subtracting an integer base first keeps the float
    product exact to the ns that the µs float carries (Kineto writes ns fractions: 123.456)."""
    try:
        ts_us = np.asarray(fields.ts, dtype=np.float64)
        dur_us = np.asarray(fields.dur, dtype=np.float64)
    except (TypeError, ValueError):
        raise TraceError(f"{path}: {describe_bad_time(fields.events)}") from None
    start_ns = np.rint((ts_us - base_us) * 1000.0).astype(np.int64) + base_us * 1000
    dur_ns = np.rint(dur_us * 1000.0).astype(np.int64)
    if len(dur_ns) and (dur_ns.min() < 0 or not np.isfinite(ts_us).all()):
        raise TraceError(f"{path}: an event of category {fields.cat[0]!r} has a negative or non-finite time")
    return start_ns, start_ns + dur_ns


def _interned(values: tuple | list[Any]) -> tuple[np.ndarray, list[Any]]:
    """Factorize a column once: (codes [n] int, unique values); None gets code -1."""
    codes, uniques = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=True)
    return codes, list(uniques)


def _names(fields: Fields, path: Path) -> pd.Categorical:
    codes, uniques = _interned(fields.name)
    if len(codes) and codes.min() < 0:
        raise TraceError(f"{path}: an event of category {fields.cat[0]!r} lacks 'name'")
    return _categorical(codes, [u if isinstance(u, str) else str(u) for u in uniques])


def _categorical(codes: np.ndarray, labels: list[str]) -> pd.Categorical:
    # Two raw values can print alike (7 and "7"); merge them so the categories stay unique.
    merged = list(dict.fromkeys(labels))
    if len(merged) != len(labels):
        remap = np.asarray([merged.index(label) for label in labels], dtype=np.int64)
        codes = remap[codes]
    return pd.Categorical.from_codes(codes, categories=merged)


def _int_column(args: list[dict[str, Any]], key: str, default: int, path: Path) -> np.ndarray:
    # map + methodcaller: the per-event lookup runs without a Python frame per event.
    get = methodcaller("get", key, default)
    try:
        return np.fromiter(map(get, args), dtype=np.int64, count=len(args))
    except AttributeError:
        raise TraceError(f"{path}: an event has non-object 'args'") from None
    except (TypeError, ValueError, OverflowError):
        pass  # a null (Python parent id of a root frame) or a bad value: take the slow path
    try:
        values = list(map(get, args))
    except AttributeError:
        raise TraceError(f"{path}: an event has non-object 'args'") from None
    try:
        return np.asarray([default if v is None else v for v in values], dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        raise TraceError(f"{path}: args.{key!r} holds a non-integer value") from None


def _tids(fields: Fields) -> pd.Categorical:
    codes, uniques = _interned(fields.tid)
    if len(codes) and codes.min() < 0:
        codes = np.where(codes < 0, len(uniques), codes)
        uniques.append(None)
    # Raw JSON texts (fast path) label as their values would: 426 -> "426", "\"x\"" -> "x".
    label = (lambda u: str(json_value_of(u) if u is not None else u)) if fields.raw_tids else str
    return _categorical(codes, [label(u) for u in uniques])


def _flag_by_category(fields: Fields, marker: str) -> np.ndarray:
    """[n] bool: the event's category name contains `marker` (decided once per distinct category)."""
    codes, uniques = _interned(fields.cat)
    flags = np.asarray([marker in str(u) for u in uniques] + [False], dtype=bool)
    return flags[codes]


def _host_columns(fields: Fields, base_us: int, path: Path) -> dict[str, object]:
    """name, tid, start_ns, end_ns: the columns every host-side table starts with."""
    start_ns, end_ns = _times_ns(fields, base_us, path)
    return {"name": _names(fields, path), "tid": _tids(fields), "start_ns": start_ns, "end_ns": end_ns}


def _ops_table(bucket: Bucket, base_us: int, path: Path) -> pd.DataFrame:
    fields = fields_of(bucket, path)
    is_annotation = _flag_by_category(fields, "nnotation").astype(np.int8)
    return pd.DataFrame(
        {
            **_host_columns(fields, base_us, path),
            "cat": pd.Categorical.from_codes(is_annotation, categories=["cpu_op", "user_annotation"]),
        }
    )


def _frames_table(bucket: Bucket, base_us: int, path: Path) -> pd.DataFrame:
    fields = fields_of(bucket, path)
    args = fields.args
    return pd.DataFrame(
        {
            **_host_columns(fields, base_us, path),
            "py_id": _int_column(args, "Python id", -1, path),
            "parent_id": _int_column(args, "Python parent id", -1, path),
        }
    )


def _runtime_table(bucket: Bucket, base_us: int, path: Path) -> pd.DataFrame:
    fields = fields_of(bucket, path)
    is_driver = _flag_by_category(fields, "river").astype(np.int8)
    return pd.DataFrame(
        {
            **_host_columns(fields, base_us, path),
            "api": pd.Categorical.from_codes(is_driver, categories=["runtime", "driver"]),
            "correlation": _int_column(fields.args, "correlation", -1, path),
        }
    )


def _device_stream(fields: Fields, path: Path) -> tuple[np.ndarray, np.ndarray]:
    # dict.get over three iterables: one C call per event; a non-dict args raises TypeError there.
    try:
        devices = list(map(dict.get, fields.args, repeat("device"), fields.pid))
        streams = list(map(dict.get, fields.args, repeat("stream"), fields.tid))
    except (AttributeError, TypeError):
        raise TraceError(f"{path}: a GPU event has non-object 'args'") from None
    try:
        device = np.asarray(devices, dtype=np.int64)
        stream = np.asarray(streams, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        raise TraceError(f"{path}: a GPU event has a non-integer device or stream") from None
    stream[stream == _UNSIGNED_MINUS_ONE] = -1
    return device, stream


def _gpu_table(bucket: Bucket, kind: str, base_us: int, path: Path) -> pd.DataFrame:
    fields = fields_of(bucket, path)
    start_ns, end_ns = _times_ns(fields, base_us, path)
    args = fields.args
    device, stream = _device_stream(fields, path)
    return pd.DataFrame(
        {
            "name": pd.Series(_names(fields, path), dtype=object),
            "kind": kind,
            "device": device,
            "stream": stream,
            "start_ns": start_ns,
            "end_ns": end_ns,
            "correlation": _int_column(args, "correlation", -1, path),
            "bytes": _int_column(args, "bytes", 0, path),
        }
    )


def _waits_table(bucket: Bucket, base_us: int, path: Path) -> pd.DataFrame:
    fields = fields_of(bucket, path)
    start_ns, end_ns = _times_ns(fields, base_us, path)
    args = fields.args
    device, stream = _device_stream(fields, path)
    virtual = stream >= _VIRTUAL_SYNC_ROW_OFFSET
    stream[virtual] -= _VIRTUAL_SYNC_ROW_OFFSET
    return pd.DataFrame(
        {
            "name": _names(fields, path),
            "device": device,
            "stream": stream,
            "start_ns": start_ns,
            "end_ns": end_ns,
            "correlation": _int_column(args, "correlation", -1, path),
        }
    )


def _gpu_annotation_table(bucket: Bucket, base_us: int, path: Path) -> pd.DataFrame:
    fields = fields_of(bucket, path)
    start_ns, end_ns = _times_ns(fields, base_us, path)
    device, stream = _device_stream(fields, path)
    return pd.DataFrame(
        {
            "name": _names(fields, path),
            "device": device,
            "stream": stream,
            "start_ns": start_ns,
            "end_ns": end_ns,
        }
    )


def _rank_of(meta: dict[str, Any], fallback: int) -> int:
    info = meta.get("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("rank"), int):
        return int(info["rank"])
    return fallback


def _has_legacy_names(buckets: dict[str, Any]) -> bool:
    firsts = [_first_cat(buckets[name]) for name in ("kernel", "runtime", "ops") if buckets[name]]
    return any(cat in ("Kernel", "Runtime", "Operator") for cat in firsts)


def _first_cat(bucket: Fields | list[dict[str, Any]]) -> Any:
    return bucket.cat[0] if isinstance(bucket, Fields) else bucket[0].get("cat")


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


_TABLE_BUILDERS: dict[str, Callable[[Bucket, int, Path], pd.DataFrame]] = {
    "ops": _ops_table,
    "frames": _frames_table,
    "runtime": _runtime_table,
    "waits": _waits_table,
    "gpu_annotations": _gpu_annotation_table,
}
