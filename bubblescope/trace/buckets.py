"""Events of one chunk grouped by table ("bucket") as per-field columns.

Within a bucket, events are grouped by category in the order each category's first complete event
appears, and in file order within a category (the same order on every run and every chunking).
"""

from __future__ import annotations

from operator import attrgetter
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from bubblescope.errors import TraceError
from bubblescope.trace.categories import BUCKET_OF_CATEGORY
from bubblescope.trace.events import Event

# dict.fromkeys keeps first-seen order: the same bucket order on every run (a set would not).
BUCKET_NAMES = tuple(dict.fromkeys(BUCKET_OF_CATEGORY.values()))
_FIELDS = attrgetter("ts", "dur", "name", "tid", "cat", "args", "pid")


class Fields(NamedTuple):
    """The fields every table reads, one sequence per field over a bucket's events.

    `args` holds `events.Args` (or None); `first_ts` is the first event's `ts` as JSON gives it (the
    time base); `events` the bucket's events, for naming a bad one in a message.
    """

    ts: Any
    dur: Any
    name: Any
    tid: Any
    cat: Any
    args: Any
    pid: Any
    first_ts: Any = None
    events: list[Event] | None = None


def bucket_events(events: list[Event]) -> dict[str, Fields]:
    """Complete ('X') events of the used categories as per-bucket columns; empty buckets are absent."""
    # One pass: the category of complete events, None for the rest (a list or dict `ph` is not "X").
    cats = [event.cat if event.ph == "X" else None for event in events]
    try:
        codes, uniques = pd.factorize(pd.Series(cats, dtype=object), use_na_sentinel=True)
    except TypeError:
        # A category that is a list or dict names no table: those events are not read.
        cats = [cat if isinstance(cat, str) else None for cat in cats]
        codes, uniques = pd.factorize(pd.Series(cats, dtype=object), use_na_sentinel=True)
    buckets: dict[str, Fields] = {}
    for name, parts in _ordered_rows(codes, uniques).items():
        rows = np.concatenate(parts).tolist() if len(parts) > 1 else parts[0].tolist()
        bucket = [events[i] for i in rows]
        columns = list(zip(*map(_FIELDS, bucket), strict=True))
        buckets[name] = Fields(*columns, first_ts=columns[0][0], events=bucket)
    return buckets


def _ordered_rows(codes: np.ndarray, uniques: Any) -> dict[str, list[np.ndarray]]:
    """Per non-empty bucket, the row indices of its events, category by category."""
    found = []
    for code, cat in enumerate(uniques):
        name = BUCKET_OF_CATEGORY.get(cat) if isinstance(cat, str) else None
        if name is None:
            continue
        rows = np.flatnonzero(codes == code)
        found.append((int(rows[0]), name, rows))
    found.sort(key=lambda item: item[0])
    buckets: dict[str, list[np.ndarray]] = {}
    for _, name, rows in found:
        buckets.setdefault(name, []).append(rows)
    return buckets


def fields_of_dicts(events: list[Any], path: Path) -> dict[str, Fields]:
    """Buckets of in-memory event dicts (tests, `build_tables`): encoded once and decoded as a file
    would be, so both give the same tables and the same errors."""
    import msgspec

    from bubblescope.trace.events import decode_events

    try:
        text = msgspec.json.encode(events)
    except (TypeError, ValueError, OverflowError) as exc:
        raise TraceError(f"{path}: events cannot be encoded as JSON ({exc})") from None
    return bucket_events(decode_events(text, path))


def describe_bad_field(fields: Fields, key: str, problem: str) -> str:
    """`event 'name' (cat 'kernel', #i of its kind) <problem> '<key>'` for the first bad event."""
    column = getattr(fields, key)
    for i, value in enumerate(column):
        if not _is_ok(key, value):
            event = fields.events[i] if fields.events else None
            name = event.name if event is not None else None
            shown = f"{type(value).__name__} {value!r:.30}" if value is not None else None
            what = f"lacks '{key}'" if shown is None else f"has {problem} '{key}' ({shown})"
            return f"event {name!r:.60} (cat {fields.cat[i]!r}, #{i} of its kind) {what}"
    return f"an event has {problem} '{key}'"


def _is_ok(key: str, value: Any) -> bool:
    if key in ("ts", "dur"):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return ok and -9e15 < value < 9e15 and value == value and (key == "ts" or value >= 0)
    if key == "name":
        return isinstance(value, (str, int, float)) and not isinstance(value, bool)
    return value is None or isinstance(value, (str, int, float))
