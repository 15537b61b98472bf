"""Where JSON values end in streamed text, found with numpy instead of a Python loop over tokens.

The trace reader needs two answers without decoding: where a top-level member it does not read ends
(so a 60 MiB `deviceProperties` is skipped, never built), and where the event after a chunk boundary
ends (so one event with a 100 MB `args` is cut in linear time). Both follow the nesting depth outside
strings: escape pairs (`\\x`) are blanked first (same length, so indices hold), quotes then toggle
"inside a string", brackets outside strings move the depth, and a cumulative sum gives the depth after
every byte. Text is scanned in windows of `WINDOW_BYTES`, the state (depth, inside a string, a pending
backslash) carried between them, so memory stays a few times the window whatever the value's size.

What is skipped is checked for balance only (brackets and quotes), not decoded: a member nobody reads
may hold anything a JSON parser would accept and a few things it would not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

WINDOW_BYTES = 1 << 20
_ESCAPE_PAIR = re.compile(rb"\\.", re.DOTALL)
_QUOTE = ord('"')
# +1 for an opening bracket, -1 for a closing one, 0 for every other byte.
_STEP = np.zeros(256, dtype=np.int8)
_STEP[[ord("["), ord("{")]] = 1
_STEP[[ord("]"), ord("}")]] = -1
# The bytes a scan looks at: quotes and brackets.
_MARKS = (_STEP != 0) | (np.arange(256) == _QUOTE)


@dataclass
class ScanState:
    """Where a scan stands after the bytes it has seen.

    Attributes:
        depth: brackets open (relative to where the scan started).
        in_string: inside a string.
        pending_backslash: the last byte seen is an unpaired backslash, so the next byte is escaped.
    """

    depth: int = 0
    in_string: bool = False
    pending_backslash: bool = False


@dataclass
class Window:
    """What one scanned window holds that matters: `at` are the offsets (in the window) of its quotes
    and brackets, in order; `depth[i]` is the depth after byte `at[i]`;
    `closes[i]` says it is a closing bracket outside strings or the quote that ends a string."""

    at: np.ndarray
    depth: np.ndarray
    closes: np.ndarray


def scan_window(data: bytes | memoryview, state: ScanState) -> Window:
    """Scan `data` from `state` (updated in place to the state after it).

    Only quotes and brackets are looked at (found with one table lookup), so a window of string text
    costs a few vectorised passes and no Python step per byte.

    Args:
        data: the next bytes of the text (a window; keep it to about `WINDOW_BYTES`).
        state: the state before `data`.
    """
    raw = bytes(data)
    head = b""
    if state.pending_backslash and raw:
        head, raw = b"_", raw[1:]
    blanked = head + (_ESCAPE_PAIR.sub(b"__", raw) if b"\\" in raw else raw)
    # A backslash left unpaired at the end escapes the first byte of the next window.
    state.pending_backslash = blanked.endswith(b"\\")
    codes = np.frombuffer(blanked, dtype=np.uint8)
    at = np.flatnonzero(_MARKS[codes])
    kinds = codes[at]
    quotes = kinds == _QUOTE
    inside_after = (np.cumsum(quotes, dtype=np.int64) + int(state.in_string)) & 1
    outside = inside_after == 0
    steps = np.where(outside, _STEP[kinds], 0).astype(np.int64)
    depth = state.depth + np.cumsum(steps)
    closes = (outside & quotes) | (steps < 0)
    if len(at):
        state.depth = int(depth[-1])
        state.in_string = bool(inside_after[-1])
    return Window(at=at, depth=depth, closes=closes)


def value_end(data: bytes | memoryview, state: ScanState) -> int | None:
    """Index just after the end of the value being scanned (one that starts with `{`, `[` or `"` at
    `state`'s start, depth 0), or None when it goes on past `data`.

    Raises:
        ValueError: a closing bracket with nothing open (not JSON).
    """
    for start in range(0, len(data), WINDOW_BYTES):
        window = scan_window(data[start : start + WINDOW_BYTES], state)
        unbalanced = np.flatnonzero(window.depth < 0)
        ends = np.flatnonzero(window.closes & (window.depth == 0))
        if len(unbalanced) and (not len(ends) or unbalanced[0] < ends[0]):
            raise ValueError(
                f"a closing bracket with nothing open at byte {start + int(window.at[unbalanced[0]])}"
            )
        if len(ends):
            return start + int(window.at[ends[0]]) + 1
    return None


def events_end(buf: bytes, pos: int, target: int) -> tuple[int, bool] | None:
    """Where a chunk of an events array starting at `buf[pos]` (just inside `[`, between events) ends:
    (index just after the first event that ends at or past `target`, False), or (index of the array's
    `]`, True) when the array closes first; None when `buf` does not hold that much yet.
    """
    state = ScanState()
    view = memoryview(buf)
    for start in range(pos, len(buf), WINDOW_BYTES):
        window = scan_window(view[start : start + WINDOW_BYTES], state)
        offsets = start + window.at
        array_end = np.flatnonzero(window.depth < 0)
        event_end = np.flatnonzero(window.closes & (window.depth == 0) & (offsets + 1 >= target))
        if len(array_end) and (not len(event_end) or array_end[0] < event_end[0]):
            return int(offsets[array_end[0]]), True
        if len(event_end):
            return int(offsets[event_end[0]]) + 1, False
    return None


def max_depth(data: bytes | memoryview) -> int:
    """How deeply the JSON text `data` nests (0 for a scalar), without decoding it: a document can be
    refused for its depth before a parser recurses into it or a checker walks every element."""
    state = ScanState()
    deepest = 0
    for start in range(0, len(data), WINDOW_BYTES):
        window = scan_window(data[start : start + WINDOW_BYTES], state)
        if len(window.depth):
            deepest = max(deepest, int(window.depth.max()))
    return deepest
