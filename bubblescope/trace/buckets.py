"""Events of one chunk grouped by table ("bucket") as per-field columns.

Within a bucket, events are grouped by category in the order each category's first complete event
appears, and in file order within a category (the same order on every run and every chunking).
"""

from __future__ import annotations

from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from bubblescope.errors import TraceError
from bubblescope.trace.categories import BUCKET_OF_CATEGORY
from bubblescope.trace.events import Event

# dict.fromkeys keeps first-seen order: the same bucket order on every run (a set would not).
BUCKET_NAMES = tuple(dict.fromkeys(BUCKET_OF_CATEGORY.values()))
_CATEGORIES = tuple(BUCKET_OF_CATEGORY)
_CODE_OF_CATEGORY = {cat: code for code, cat in enumerate(_CATEGORIES)}
# The event members each table reads (ops read no args; only GPU-side tables read pid).
_HOST_KEYS = ("ts", "dur", "name", "tid")
_KEYS_READ = {
    "ops": _HOST_KEYS,
    "frames": (*_HOST_KEYS, "args"),
    "runtime": (*_HOST_KEYS, "args"),
    **{
        name: (*_HOST_KEYS, "args", "pid")
        for name in ("kernel", "memcpy", "memset", "waits", "gpu_annotations")
    },
}
# One list comprehension per member: CPython 3.11+ specialises `event.ts` on a Struct slot, 3-4x
# faster per event than `map(attrgetter("ts"), ...)` (12 vs 42 ns per event and member, measured on
# a 27k-event chunk of the synthetic decode trace).
_COLUMN_OF: dict[str, Any] = {
    "ts": lambda events: [e.ts for e in events],
    "dur": lambda events: [e.dur for e in events],
    "name": lambda events: [e.name for e in events],
    "tid": lambda events: [e.tid for e in events],
    "pid": lambda events: [e.pid for e in events],
}


class Fields(NamedTuple):
    """The fields every table reads, one sequence per field over a bucket's events.

    `args` holds the bucket's events (their `.args` is an `events.Args` or None) for tables that read
    args members, else None; `first_ts` is the first event's `ts` as JSON gives it (the
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


def bucket_events(events: list[Event], left_out: list[int] | None = None) -> dict[str, Fields]:
    """Complete ('X') events of the used categories as per-bucket columns; empty buckets are absent.

    Args:
        events: one chunk, in file order.
        left_out: when given, `left_out[0]` grows by the complete events whose category is a list or
            an object (not read: no table takes them), for a counted warning.
    """
    # One pass: the category of complete events, None for the rest (a list or dict `ph` is not "X").
    keys = [event.cat if event.ph == "X" else None for event in events]
    try:
        # A dict lookup per event (C level) instead of factorizing every string: 40 vs 120 ns/event.
        codes = np.fromiter(map(_CODE_OF_CATEGORY.get, keys, repeat(-1)), dtype=np.int16, count=len(keys))
    except TypeError:
        # A category that is a list or dict names no table: those events are not read.
        if left_out is not None:
            left_out[0] += sum(isinstance(key, (list, dict)) for key in keys)
        keys = [key if isinstance(key, str) else None for key in keys]
        codes = np.fromiter(map(_CODE_OF_CATEGORY.get, keys, repeat(-1)), dtype=np.int16, count=len(keys))
    buckets: dict[str, Fields] = {}
    for name, parts in _ordered_rows(codes).items():
        rows = np.concatenate([rows for _, rows in parts]).tolist()
        # itemgetter of one index returns the item itself, not a 1-tuple.
        bucket = list(itemgetter(*rows)(events)) if len(rows) > 1 else [events[rows[0]]]
        # Each part is one category: one string object repeated (hashed once when factorized).
        cats = sum(((cat,) * len(part_rows) for cat, part_rows in parts), ())
        columns = {key: _COLUMN_OF[key](bucket) for key in _KEYS_READ[name] if key != "args"}
        buckets[name] = Fields(
            ts=columns["ts"],
            dur=columns["dur"],
            name=columns["name"],
            tid=columns["tid"],
            cat=cats,
            # The events themselves: `tables` reads `event.args.<member>` in one pass per member.
            args=bucket if "args" in _KEYS_READ[name] else None,
            pid=columns.get("pid"),
            first_ts=columns["ts"][0],
            events=bucket,
        )
    return buckets


def _ordered_rows(codes: np.ndarray) -> dict[str, list[tuple[str, np.ndarray]]]:
    """Per non-empty bucket, (category, row indices) of its events, category by category in the order
    each category first appears."""
    found = []
    for code in np.unique(codes[codes >= 0]).tolist():
        rows = np.flatnonzero(codes == code)
        found.append((int(rows[0]), _CATEGORIES[code], rows))
    found.sort(key=lambda item: item[0])
    buckets: dict[str, list[tuple[str, np.ndarray]]] = {}
    for _, cat, rows in found:
        buckets.setdefault(BUCKET_OF_CATEGORY[cat], []).append((cat, rows))
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
