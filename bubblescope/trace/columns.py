"""One bucket of trace events (`buckets.Fields`) turned into validated columns: ns times, interned names.

tables.py builds every table from these; they live apart because each one is where a malformed trace is
caught: a missing or out-of-range time, a non-scalar name, a non-integer id becomes a one-line TraceError
naming the event, before any cast. They are also where the per-event cost is (the interning, the time
conversion), measured on the 1.79 M-event benchmark file (benchmarks/bench_analyze.py).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from itertools import count
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bubblescope.errors import TraceError
from bubblescope.trace.buckets import Fields, describe_bad_field

# Kineto writes a context-wide sync on stream 2**32-1 (unsigned -1) in some versions, -1 in others.
_UNSIGNED_MINUS_ONE = 4294967295


# |ts| and dur in µs must stay below this for ns to fit in int64 (9.2e18 ns), with room for sums.
_MAX_TIME_US = 9e15


def time_base_us(buckets: dict[str, Fields], path: Path) -> int:
    """The integer µs that times are taken relative to: the first used event's `ts`."""
    fields = next(iter(buckets.values()))
    ts = fields.first_ts
    if not (isinstance(ts, (int, float)) and not isinstance(ts, bool) and -_MAX_TIME_US < ts < _MAX_TIME_US):
        raise TraceError(f"{path}: {describe_bad_field(fields, 'ts', 'an unusable')}")
    return int(ts)


def times_ns(fields: Fields, base_us: int, path: Path) -> tuple[np.ndarray, np.ndarray]:
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


def interned(values: tuple | list[Any]) -> tuple[np.ndarray, list[Any]]:
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
    """`interned` of a label field; a list or dict there is a TraceError naming the event."""
    try:
        codes, uniques = interned(getattr(fields, key))
    except TypeError:
        raise TraceError(f"{path}: {describe_bad_field(fields, key, 'a list or object as')}") from None
    if any(not isinstance(u, (str, int, float)) or isinstance(u, bool) for u in uniques):
        raise TraceError(f"{path}: {describe_bad_field(fields, key, 'a non-scalar')}")
    return codes, uniques


def name_column(fields: Fields, path: Path) -> pd.Categorical:
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


def int_column(events: Any, attr: str, default: Any, path: Path, what: str | None = None) -> np.ndarray:
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


def tid_column(fields: Fields, path: Path) -> pd.Categorical:
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


def flag_by_category(fields: Fields, marker: str) -> np.ndarray:
    """[n] bool: the event's category name contains `marker` (decided once per distinct category)."""
    codes, uniques = interned(fields.cat)
    flags = np.asarray([marker in str(u) for u in uniques] + [False], dtype=bool)
    return flags[codes]


def device_stream(fields: Fields, path: Path) -> tuple[np.ndarray, np.ndarray]:
    # args.device / args.stream, else the event's pid / tid (older Kineto writes them only there).
    device = int_column(fields.args, "device", fields.pid, path, "device (args.device or pid)")
    stream = int_column(fields.args, "stream", fields.tid, path, "stream (args.stream or tid)")
    stream[stream == _UNSIGNED_MINUS_ONE] = -1
    return device, stream


def grid_x_column(events: Any) -> np.ndarray:
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
