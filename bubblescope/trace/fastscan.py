"""Fast path for the events array: one regex split per chunk instead of a dict per event.

`scan_events` accepts a piece of the `traceEvents` array text (`event, event, ..., event`) only when
the whole piece tiles into events of two shapes, every one written in a strict subset of JSON:

- a complete event in the layout Kineto writes: `{"ph": "X", "cat": ..., "name": ..., "pid": ...,
  "tid": ..., "ts": ..., "dur": ..., "args": {...}}` (any JSON whitespace between tokens); its seven
  values are captured as raw text;
- any other object none of whose `"ph"` members is `"X"` (flows, metadata, instants), or none of
  whose `"cat"` members names a category a table reads: never used by the tables, so only validated.

Anything else (escapes in `cat`/`name`, NaN, other key orders, deeper nesting in `args`, a stray
comma) makes the piece fall back to `json.loads`, which gives the same tables or the same error: the
grammar below accepts nothing that JSON rejects, and a complete event it accepts has exactly one of
each key, so its captured values are the ones `json.loads` would return.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bubblescope.trace.categories import BUCKET_OF_CATEGORY

_WS = r"[ \t\n\r]*+"
# JSON strings: no raw control characters (json.loads is strict about them), valid escapes only.
_STR = r'"(?:[^"\\\x00-\x1f]++|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*+"'
# A string without escapes: its text between the quotes is its value.
_PLAIN = r'"[^"\\\x00-\x1f]*+"'
_NUM = r"-?+(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?+(?:[eE][-+]?+[0-9]++)?+"
_INT = r"-?+(?:0|[1-9][0-9]*+)"
_SCALAR = f"(?:{_STR}|{_NUM}|true|false|null)"


def _sequence(open_: str, item: str, close: str) -> str:
    """`open_ item, item, ... close` with `item` written once (the pattern stays small, so it compiles
    fast): each item is followed by a comma that no `close` follows, or by `close` itself."""
    return rf"{open_}{_WS}(?:{item}{_WS}(?:,{_WS}(?!{close})|(?={close})))*+{close}"


# Arrays nest two deep (Kineto's "Input Dims": [[1, 4096], []]); objects only at the args level.
_ARRAY1 = _sequence(r"\[", _SCALAR, r"\]")
_ARRAY2 = _sequence(r"\[", f"(?:{_SCALAR}|{_ARRAY1})", r"\]")
_VALUE = f"(?:{_SCALAR}|{_ARRAY2})"
_OBJECT = _sequence(r"\{", f"{_STR}{_WS}:{_WS}{_VALUE}", r"\}")
_ANY_VALUE = f"(?:{_VALUE}|{_OBJECT})"


def _key(name: str) -> str:
    return f'{_WS},{_WS}"{name}"{_WS}:{_WS}'


_COMPLETE = (
    rf'\{{{_WS}"ph"{_WS}:{_WS}"X"'
    + _key("cat")
    + r'"([^"\\\x00-\x1f]*+)"'
    + _key("name")
    + r'"([^"\\\x00-\x1f]*+)"'
    + _key("pid")
    + f"({_INT}|{_PLAIN})"
    + _key("tid")
    + f"({_INT}|{_PLAIN})"
    + _key("ts")
    + f"({_NUM})"
    + _key("dur")
    + f"({_NUM})"
    + _key("args")
    + f"({_OBJECT})"
    + rf"{_WS}\}}"
)
# Kineto's flow events (launch -> GPU op arrows) in its own layout: a third of a trace's events, so a
# literal pattern instead of the generic one below (10% less scan time). Keys distinct, ph not "X".
_FLOW = (
    rf'\{{{_WS}"ph"{_WS}:{_WS}"[sf]"'
    + _key("id")
    + _INT
    + _key("pid")
    + f"(?:{_INT}|{_PLAIN})"
    + _key("tid")
    + f"(?:{_INT}|{_PLAIN})"
    + _key("ts")
    + _NUM
    + _key("cat")
    + '"ac2g"'
    + _key("name")
    + '"ac2g"'
    + f'(?:{_key("bp")}"e")?+'
    + rf"{_WS}\}}"
)
# A member that is not "ph" (keys without escapes, so no spelled-out "ph" hides there), or a "ph"
# whose value is a plain string other than "X": the event is then never a complete event.
_OTHER = _sequence(
    r"\{",
    rf'(?:"(?!ph")[^"\\\x00-\x1f]*+"{_WS}:{_WS}{_ANY_VALUE}'
    rf'|"ph"{_WS}:{_WS}"(?!X")[^"\\\x00-\x1f]*+")',
    r"\}",
)
# An object whose every "cat" is a plain string of a category no table reads (Kineto's "overhead"
# and "Trace" spans, in any key order): never used, whatever its "ph".
_USED_CATEGORY = "|".join(re.escape(cat) for cat in BUCKET_OF_CATEGORY)
_UNUSED = _sequence(
    r"\{",
    rf'(?:"(?!cat")[^"\\\x00-\x1f]*+"{_WS}:{_WS}{_ANY_VALUE}'
    rf'|"cat"{_WS}:{_WS}"(?!(?:{_USED_CATEGORY})")[^"\\\x00-\x1f]*+")',
    r"\}",
)
# After an event: a comma that another event follows, or the end of the piece.
_ANY_EVENT = f"(?:{_COMPLETE}|{_FLOW}|{_OTHER}|{_UNUSED})"
_EVENT = re.compile(rf"{_ANY_EVENT}{_WS}(?:,{_WS}(?=\{{)|\Z)")
# The first event of a piece, followed by a comma or the array's end: when it is outside the grammar
# the whole piece would be, so the scan is skipped (a trace in another layout pays almost nothing).
_FIRST_EVENT = re.compile(rf"{_ANY_EVENT}{_WS}[,\]]")
_GROUPS = 7
_STRIDE = _GROUPS + 1


@dataclass
class EventColumns:
    """One chunk of events as raw JSON text columns, one entry per event in file order.

    Entries are None for events the tables never read (not `"ph": "X"`, or of an unused category).
    `cat` and `name` hold the string values; `pid`/`tid` an integer's digits or a quoted string;
    `ts`/`dur` a JSON number; `args` the args object's JSON text.
    """

    cat: list[str | None]
    name: list[str | None]
    pid: list[str | None]
    tid: list[str | None]
    ts: list[str | None]
    dur: list[str | None]
    args: list[str | None]

    def __len__(self) -> int:
        return len(self.cat)


def scan_events(piece: str) -> EventColumns | None:
    """Columns of a piece of the events array (`{...}, {...}`, no brackets), or None when any part
    of it is outside the fast grammar (the caller then parses it with json.loads)."""
    if not piece.startswith("{"):
        return None
    # split() interleaves the unmatched text between matches with the groups: all of it empty means
    # the matches tile the piece exactly.
    parts = _EVENT.split(piece)
    if any(parts[::_STRIDE]):
        return None
    return EventColumns(*(parts[k::_STRIDE] for k in range(1, _STRIDE)))


def event_at(text: str, pos: int) -> bool:
    """Whether the event starting at `text[pos]` is inside the fast grammar (a cheap probe)."""
    return _FIRST_EVENT.match(text, pos) is not None


def json_value_of(raw: str) -> int | str:
    """The value of a captured `pid`/`tid`: an int, or the text of a plain string."""
    return raw[1:-1] if raw.startswith('"') else int(raw)


def json_number_of(raw: str) -> int | float:
    """The value json.loads gives a JSON number: int without fraction or exponent, else float."""
    return float(raw) if any(c in raw for c in ".eE") else int(raw)
