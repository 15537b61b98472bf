"""Walk a trace's JSON text block by block: top-level metadata whole, the events array in chunks.

The text arrives in bounded blocks (`source.text_blocks`) and only about one chunk of it (4 MiB, ~25k
events) plus one block is held at a time. A chunk is cut at a `}` `,` `{` sequence past the chunk size
and decoded with msgspec (`events.parse_events`); a cut that falls inside an event (an args array of
objects) leaves the text unbalanced, which msgspec rejects at the very end, so the next candidate is
tried; after a few, an exact bracket-and-string scan finds the boundary. An error msgspec reports
before the end of a chunk is the file's own and is raised as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from bubblescope.errors import TraceError
from bubblescope.trace import json_scan
from bubblescope.trace.events import Event, decode_value, error_byte, event_error, parse_events

DEFAULT_CHUNK_BYTES = 4 << 20
# The top-level members the tables read (`tables._rank_of`, `tables._format_of`); every other member
# (deviceProperties, traceName, a 60 MiB blob) is skipped by `json_scan` without being built.
META_MEMBERS_READ = frozenset({"distributedInfo", "schemaVersion"})
# Those two are a few hundred bytes in a Kineto trace; they are decoded, so they are capped.
MAX_META_VALUE_BYTES = 1 << 20
# A Kineto trace has about 20 top-level members; each costs a Python step, so millions would be slow.
MAX_META_MEMBERS = 10_000
_MAX_CUT_ATTEMPTS = 4
# Events a trace may hold: one per this many bytes of its text cap (1.86 M at the default 512 MiB; a
# real 1.79 M-event trace is ~480 MB of text). Analysis holds 0.2-1 KB per event at its peak (1 KB with
# a GPU idle gap after every kernel: 1.86 M such events peak at 1.8 GB, 3 M took 2.65 GB and 78 s on a
# 2-core box), while the densest valid text is ~65 bytes per event, so the text cap alone let a trace take
# several times the memory its size suggests (benchmarks/bench_hostile.py).
BYTES_PER_EVENT_BUDGET = 288
# Nesting allowed in a top-level value (deviceProperties is 3 deep).
MAX_META_DEPTH = 100
# Read this far past the chunk size, so the next boundary is usually already held.
_MARGIN_BYTES = 256 << 10
_NONE_FOUND = object()


class _TooDeep(Exception):
    """A top-level value nested deeper than MAX_META_DEPTH."""


_WS = re.compile(rb"[ \t\n\r]*")
_EVENT_BOUNDARY = re.compile(rb"\}[ \t\n\r]*,[ \t\n\r]*\{")
_ARRAY_END = re.compile(rb"\}[ \t\n\r]*\]")
# A whole string, a bracket, or a quote whose string is not complete in the buffer.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]|"')
_SCALAR = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[-+.0-9eEa-zA-Z]+')


class TraceText:
    """Parse one trace's text as it streams in.

    Args:
        blocks: the decompressed text in blocks (`source.text_blocks`).
        path: the file, for messages.
        chunk_bytes: text per event chunk. Default 4 MiB.

    `chunks()` yields lists of `events.Event` in file order; `meta` (the top-level members other than
    `traceEvents`) and `event_count` are complete once it is exhausted.
    """

    def __init__(
        self,
        blocks: Iterator[bytes],
        path: Path,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        max_events: int | None = None,
    ) -> None:
        self.path = path
        self.max_events = max_events
        self.meta: dict[str, Any] = {}
        self.event_count = 0
        self._blocks = blocks
        self._chunk_bytes = max(1, chunk_bytes)
        self._buf = b""
        self._pos = 0
        self._base = 0
        self._eof = False

    def chunks(self) -> Iterator[list[Event]]:
        """Event chunks in file order. Raises TraceError on malformed, truncated or empty input."""
        first = self._peek()
        if first is None:
            raise TraceError(f"{self.path}: empty file")
        if first == b"[":
            yield from self._events()
            self._expect_end()
            return
        if first != b"{":
            raise self._bad("expected an object or array at the start")
        self._pos += 1
        found = False
        members = 0
        if self._peek() == b"}":
            self._pos += 1
        else:
            while True:
                key = self._key()
                if key == "traceEvents":
                    if found:
                        raise TraceError(f"{self.path}: two 'traceEvents' members (which one is the trace?)")
                    if self._peek() != b"[":
                        raise TraceError(f"{self.path}: 'traceEvents' is not a list")
                    found = True
                    yield from self._events()
                else:
                    self._member(key)
                members += 1
                if members > MAX_META_MEMBERS:
                    raise TraceError(
                        f"{self.path}: more than {MAX_META_MEMBERS} top-level members (a Kineto trace has "
                        "about 20); not a trace"
                    )
                char = self._peek()
                self._pos += 1
                if char == b"}":
                    break
                if char != b",":
                    raise self._bad("expected ',' or '}' after a member", -1)
        self._expect_end()
        if not found:
            raise TraceError(f"{self.path}: JSON has no 'traceEvents' (not a torch.profiler/Kineto trace)")

    def _fill(self, length: int) -> bool:
        """Hold at least `length` bytes from the current position if the text has them; drops the
        consumed prefix. Returns whether it does."""
        if len(self._buf) - self._pos >= length:
            return True
        # A view, not a slice: the held rest (up to a chunk) is copied once, by the join.
        parts: list[bytes | memoryview] = [memoryview(self._buf)[self._pos :]]
        have = len(parts[0])
        while have < length and not self._eof:
            block = next(self._blocks, None)
            if block is None:
                self._eof = True
                break
            parts.append(block)
            have += len(block)
        self._base += self._pos
        self._buf = b"".join(parts)
        self._pos = 0
        return have >= length

    def _more(self) -> bool:
        """Read at least one more block (doubling what is held). False at the end of the text."""
        held = len(self._buf) - self._pos
        return self._fill(max(held * 2, held + self._chunk_bytes)) or len(self._buf) - self._pos > held

    def _peek(self) -> bytes | None:
        """The next non-whitespace byte (position left on it), None at the end of the text."""
        while True:
            self._pos = _WS.match(self._buf, self._pos).end()  # type: ignore[union-attr]
            if self._pos < len(self._buf):
                return self._buf[self._pos : self._pos + 1]
            if not self._fill(1):
                return None

    def _bad(self, what: str, shift: int = 0) -> TraceError:
        at = self._base + self._pos + shift
        return TraceError(f"{self.path}: not valid JSON ({what} at byte {at} of the text)")

    def _expect_end(self) -> None:
        if self._peek() is not None:
            raise self._bad("extra data after the trace")

    def _key(self) -> str:
        if self._peek() != b'"':
            raise self._bad("expected a member name")
        key = self._value()
        if self._peek() != b":":
            raise self._bad("expected ':' after a member name")
        self._pos += 1
        self._peek()
        return key

    def _member(self, key: str) -> None:
        """Read a top-level member's value when the tables use it; move past it otherwise."""
        if key in META_MEMBERS_READ:
            self.meta[key] = self._value()
            return
        first = self._peek()
        if first not in (b"{", b"[", b'"'):
            # A number or a literal: a few bytes (`_value` refuses a longer one).
            self._value()
            return
        state = json_scan.ScanState()
        while True:
            try:
                end = json_scan.value_end(memoryview(self._buf)[self._pos :], state)
            except ValueError as exc:
                raise self._bad(f"top-level member {key[:40]!r}: {exc}") from None
            if end is not None:
                self._pos += end
                return
            # Nothing of the skipped value is kept: drop what was scanned, read the next block.
            self._pos = len(self._buf)
            if not self._fill(1):
                raise TraceError(f"{self.path}: JSON ends early (truncated file?)")

    def _value(self) -> Any:
        """Decode the value at the current position (a member name, or a member the tables read)."""
        self._peek()
        while True:
            try:
                end = _value_end(self._buf, self._pos)
            except _TooDeep:
                raise TraceError(
                    f"{self.path}: a top-level value is nested too deeply (more than {MAX_META_DEPTH} levels)"
                ) from None
            if end is not None:
                break
            if len(self._buf) - self._pos > MAX_META_VALUE_BYTES:
                raise TraceError(
                    f"{self.path}: a top-level value the analysis reads (or a member name) is larger than "
                    f"{MAX_META_VALUE_BYTES >> 20} MiB; not a Kineto trace"
                )
            if not self._more():
                raise TraceError(f"{self.path}: JSON ends early (truncated file?)")
        value = decode_value(self._buf[self._pos : end], self.path, self._base + self._pos)
        self._pos = end
        return value

    def _events(self) -> Iterator[list[Event]]:
        """Chunks of the array at the current `[`; leaves the position after its `]`."""
        self._pos += 1
        if self._peek() == b"]":
            raise TraceError(f"{self.path}: 'traceEvents' is empty")
        closes = False
        while not closes:
            if self._peek() == b"]":
                raise self._bad("a comma before the array's end")
            events, resume, closes = self._fast_cut() or self._exact_cut()
            self.event_count += len(events)
            if self.max_events is not None and self.event_count > self.max_events:
                raise TraceError(
                    f"{self.path}: more than {self.max_events} events (one per {BYTES_PER_EVENT_BUDGET} "
                    "bytes of the text limit: what analysis fits in ~2 GB); raise --max-decompressed-mb"
                )
            self._pos = resume
            yield events

    def _fast_cut(self) -> tuple[list[Event], int, bool] | None:
        """The next chunk cut at a candidate boundary past the chunk size, or at the array's end when
        the rest of the text is held; None when no candidate parses."""
        self._fill(self._chunk_bytes + _MARGIN_BYTES)
        while True:
            target = self._pos + self._chunk_bytes
            done = self._cut(_EVENT_BOUNDARY, target) if len(self._buf) > target else _NONE_FOUND
            if done is _NONE_FOUND and self._eof:
                done = self._cut(_ARRAY_END, self._pos)
            if done is not _NONE_FOUND:
                return done  # type: ignore[no-any-return]
            if self._eof:
                return None
            self._more()

    def _cut(self, boundary: re.Pattern[bytes], search_from: int) -> Any:
        """Try the first few candidate cuts from `search_from`: (events, where to go on, whether the
        array ended); None when none of them parses; `_NONE_FOUND` when the buffer holds none."""
        start = self._pos
        found = False
        for attempt, match in enumerate(boundary.finditer(self._buf, search_from)):
            found = True
            if attempt >= _MAX_CUT_ATTEMPTS:
                return None
            text = _bracketed(self._buf, start, match.start() + 1)
            try:
                events = parse_events(text)
            except msgspec.ValidationError as exc:
                raise event_error(exc, text, self.path, self.event_count, self._base + start - 1) from None
            except (msgspec.DecodeError, RecursionError) as exc:
                at = error_byte(exc)
                if at is not None and at < len(text) - 1:
                    # msgspec stopped before the cut: the text itself is bad, whatever the cut.
                    raise event_error(
                        exc, text, self.path, self.event_count, self._base + start - 1
                    ) from None
                continue
            if boundary is _ARRAY_END:
                return events, match.end(), True
            return events, match.end() - 1, False
        return None if found else _NONE_FOUND

    def _exact_cut(self) -> tuple[list[Event], int, bool]:
        """Find the chunk's end by scanning strings and brackets (slow path), then decode it."""
        while True:
            found = _events_end(self._buf, self._pos, self._pos + self._chunk_bytes)
            if found is not None:
                break
            if not self._more():
                raise TraceError(f"{self.path}: JSON ends early (truncated file?)")
        end, closes = found
        start = self._pos
        if not closes and self._buf[end : end + 1] != b",":
            self._pos = end
            raise self._bad("expected ',' or ']' after an event")
        text = _bracketed(self._buf, start, end)
        try:
            events = parse_events(text)
        except (msgspec.MsgspecError, RecursionError) as exc:
            raise event_error(exc, text, self.path, self.event_count, self._base + start - 1) from None
        return events, end + 1, closes


def _bracketed(buf: bytes, start: int, end: int) -> bytes:
    """`[` + buf[start:end] + `]` with one copy of the slice (a chunk is ~4 MiB; `+` would copy it
    three times)."""
    return b"".join((b"[", memoryview(buf)[start:end], b"]"))


def _value_end(buf: bytes, pos: int) -> int | None:
    """Index after the JSON value at `buf[pos]`, or None when it is not complete in `buf`."""
    if buf[pos : pos + 1] not in (b"{", b"["):
        match = _SCALAR.match(buf, pos)
        if match is None and buf[pos : pos + 1] == b'"':
            # A string whose closing quote is not held yet.
            return None
        if match is None:
            # Not a value: hand one byte to the decoder, which names the problem.
            return pos + 1 if pos < len(buf) else None
        return match.end() if match.end() < len(buf) else None
    depth = 0
    for token in _TOKEN.finditer(buf, pos):
        kind = token.group()
        if kind == b'"':
            return None
        depth += 1 if kind in (b"{", b"[") else -1 if kind in (b"}", b"]") else 0
        if depth == 0:
            return token.end()
        if depth > MAX_META_DEPTH:
            # Kept whole in the tables' meta and written out again: refuse it on every Python alike
            # (msgspec's own limit follows the interpreter's recursion limit).
            raise _TooDeep
    return None


def _events_end(buf: bytes, pos: int, target: int) -> tuple[int, bool] | None:
    """Where a chunk of the events array from `buf[pos]` ends: (index of the byte after the first
    event that ends past `target`, False) or (index of the array's `]`, True); None when `buf` does not
    hold that much yet. The byte in the first case should be a `,`; the caller checks. Linear in the
    text whatever an event holds (`json_scan`: one event with a 100 MB `args` took 30-130 s as a
    Python loop over its tokens)."""
    found = json_scan.events_end(buf, pos, target)
    if found is None or found[1]:
        return found
    after = _WS.match(buf, found[0]).end()  # type: ignore[union-attr]
    if after >= len(buf):
        return None
    return after, buf[after : after + 1] == b"]"
