"""Events of one chunk grouped by table ("bucket") as per-field columns.

Two sources give the same `Fields`: parsed event dicts (`bucket_dicts` then `fields_of`), and the
raw text columns of the regex fast path (`bucket_columns`, see `fastscan`). Within a bucket, events
are grouped by category in the order each category's first complete event appears, and in file
order within a category.
"""

from __future__ import annotations

import json
from operator import itemgetter
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from bubblescope.errors import TraceError
from bubblescope.trace.categories import BUCKET_OF_CATEGORY
from bubblescope.trace.fastscan import EventColumns, json_number_of, json_value_of

# dict.fromkeys keeps first-seen order: the same bucket order on every run (a set would not).
BUCKET_NAMES = tuple(dict.fromkeys(BUCKET_OF_CATEGORY.values()))
# The ops table reads no args, so the fast path leaves them unparsed (the grammar validated them).
_ARGS_UNREAD = frozenset({"ops"})
# Only GPU-side tables read pid and tid values (device and stream when args name none); host
# tables only label their threads.
_PID_READ = frozenset({"kernel", "memcpy", "memset", "waits", "gpu_annotations"})
_EMPTY: dict[str, Any] = {}


class Fields(NamedTuple):
    """The fields every table reads, one sequence per field over a bucket's events.

    On the fast path, `pid` is None for tables that do not read it, `args` None for `ops`, and
    `tid` holds the raw JSON text (`raw_tids`) where only its label is read (host tables).
    `first_ts` is the first event's `ts` as JSON gives it (int or float: the time base). `events`
    holds the event dicts on the dict path, for naming a bad event in a message; None on the fast
    path, whose grammar admits no bad time.
    """

    ts: Any
    dur: Any
    name: Any
    tid: Any
    cat: Any
    args: Any
    pid: Any
    first_ts: Any = None
    events: list[dict[str, Any]] | None = None
    raw_tids: bool = False


def _ordered_rows(codes: np.ndarray, uniques: Any, complete: np.ndarray) -> dict[str, list[np.ndarray]]:
    """Per bucket, the row indices of its complete events, category by category."""
    found = []
    for code, cat in enumerate(uniques):
        name = BUCKET_OF_CATEGORY.get(cat) if isinstance(cat, str) else None
        if name is None:
            continue
        rows = np.flatnonzero((codes == code) & complete)
        if len(rows):
            found.append((int(rows[0]), name, rows))
    # Order categories by their first *complete* event, so both paths agree whatever else the
    # chunk holds (the fast path does not read the category of other events).
    found.sort(key=lambda item: item[0])
    buckets: dict[str, list[np.ndarray]] = {name: [] for name in BUCKET_NAMES}
    for _, name, rows in found:
        buckets[name].append(rows)
    return buckets


def bucket_dicts(events: list[Any], path: Path, offset: int = 0) -> dict[str, list[dict[str, Any]]]:
    """Complete ('X') event dicts of the used categories, grouped by bucket name."""
    try:
        # Two flat comprehensions and a factorize beat one Python loop with branches per event.
        cats = [e.get("cat") for e in events]
        phases = [e.get("ph") for e in events]
    except AttributeError:
        bad = next(i for i, e in enumerate(events) if not isinstance(e, dict))
        what = type(events[bad]).__name__
        raise TraceError(f"{path}: event #{offset + bad} is a {what}, not an object") from None
    codes, uniques = pd.factorize(pd.Series(cats, dtype=object), use_na_sentinel=True)
    complete = np.asarray(phases, dtype=object) == "X"
    return {
        name: [events[i] for rows in parts for i in rows.tolist()]
        for name, parts in _ordered_rows(codes, uniques, complete).items()
    }


def fields_of(bucket: list[dict[str, Any]] | Fields, path: Path) -> Fields:
    """The columns of a bucket of event dicts (a `Fields` passes through)."""
    if isinstance(bucket, Fields):
        return bucket
    # One comprehension plus a C-level transpose beats one comprehension per field.
    try:
        rows = [
            (
                e["ts"],
                e["dur"],
                e.get("name"),
                e.get("tid"),
                e.get("cat"),
                e.get("args") or _EMPTY,
                e.get("pid"),
            )
            for e in bucket
        ]
    except KeyError:
        raise TraceError(f"{path}: {describe_bad_time(bucket)}") from None
    if not rows:
        return Fields(*([()] * 7), events=bucket)
    columns = list(zip(*rows, strict=True))
    return Fields(*columns, first_ts=columns[0][0], events=bucket)


def describe_bad_time(bucket: list[dict[str, Any]] | None) -> str:
    """Which event of a bucket lacks a numeric `ts`/`dur`, for a one-line message."""
    for i, event in enumerate(bucket or ()):
        for key in ("ts", "dur"):
            value = event.get(key)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                what = "lacks" if value is None else f"has a non-numeric ({value!r:.30})"
                where = f"event {event.get('name')!r} (cat {event.get('cat')!r}, #{i} of its kind)"
                return f"{where} {what} '{key}'"
    return "an event has an unreadable time"


def _json_values(raw: tuple[str, ...]) -> tuple[Any, ...]:
    """pid/tid raw texts to the values json.loads gives (decoded once per distinct text)."""
    decoded = {text: json_value_of(text) for text in set(raw)}
    return tuple(map(decoded.__getitem__, raw))


def _floats(raw: tuple[str, ...]) -> np.ndarray:
    """[n] float64 of JSON number texts, rounded exactly as json.loads + float() round them."""
    return np.fromiter(map(float, raw), dtype=np.float64, count=len(raw))


def bucket_columns(columns: EventColumns) -> dict[str, Fields | list[Any]]:
    """Fast-path buckets: per-field tuples straight from the raw text columns, no dict per event.

    Empty buckets are empty lists, as `bucket_dicts` gives them.
    """
    codes, uniques = pd.factorize(pd.Series(columns.cat, dtype=object), use_na_sentinel=True)
    buckets: dict[str, Fields | list[Any]] = {}
    for name, parts in _ordered_rows(codes, uniques, codes >= 0).items():
        if not parts:
            buckets[name] = []
            continue
        rows = np.concatenate(parts).tolist()
        # One C-level gather per column; itemgetter of one index returns the item, not a tuple.
        take = itemgetter(*rows) if len(rows) > 1 else (lambda seq, row=rows[0]: (seq[row],))
        ts_raw = take(columns.ts)
        args = None
        if name not in _ARGS_UNREAD:
            args = json.loads("[" + ",".join(take(columns.args)) + "]")
        buckets[name] = Fields(
            ts=_floats(ts_raw),
            dur=_floats(take(columns.dur)),
            name=take(columns.name),
            tid=_json_values(take(columns.tid)) if name in _PID_READ else take(columns.tid),
            # Each part is one category: repeat one string object (hashes once when factorized).
            cat=sum(((uniques[codes[part[0]]],) * len(part) for part in parts), ()),
            args=args,
            pid=_json_values(take(columns.pid)) if name in _PID_READ else None,
            first_ts=json_number_of(ts_raw[0]),
            raw_tids=name not in _PID_READ,
        )
    return buckets
