"""Copy a trace's text with extra events put first in its `traceEvents`, one block at a time.

The annotated trace is the user's trace, byte for byte, plus bubblescope's findings. Only the top
level is walked: member names are read, the other members' values are skipped with `json_scan` (a
60 MiB `deviceProperties` is never held), and at the `[` of `traceEvents` the findings are written,
then the rest of the text is copied through. Memory is about one block of text (`source.BLOCK_BYTES`)
whatever the trace's size, and the text is read under the same decompressed-size cap as analysis.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from bubblescope.errors import TraceError
from bubblescope.files.atomic import write_stream_atomic
from bubblescope.trace import json_scan
from bubblescope.trace.source import text_blocks
from bubblescope.trace.text import MAX_META_VALUE_BYTES

_WS = re.compile(rb"[ \t\n\r]*")
_SCALAR = re.compile(rb"[-+.0-9eEa-zA-Z]*")


def splice_trace(
    source: Path, events: Iterable[dict[str, Any]], out_path: str | Path, max_decompressed_bytes: int | None
) -> Path:
    """Write `source`'s trace with `events` first in its events array to `out_path` (atomically; gzip
    when it ends in `.gz`).

    Args:
        source: a Kineto/Chrome trace (plain or gzip), already read once by the analysis.
        events: the events to add, each written as it comes.
        max_decompressed_bytes: the text cap (`--max-decompressed-mb`), as for analysis.

    Raises:
        TraceError: the text is over the cap, truncated, or has no events array (one line).
    """

    def fill(write: Callable[[bytes], Any]) -> None:
        splicer = _Splicer(text_blocks(source, max_decompressed_bytes), source, write)
        splicer.copy_to_events_array()
        for event in events:
            write(json.dumps(event, allow_nan=False, separators=(",", ":")).encode("utf-8") + b",")
        splicer.copy_rest()

    return write_stream_atomic(out_path, fill)


class _Splicer:
    """A cursor over the text's blocks; every block it leaves is written out unchanged."""

    def __init__(self, blocks: Iterator[bytes], path: Path, write: Callable[[bytes], Any]) -> None:
        self._blocks, self._path, self._write = blocks, path, write
        self._buf, self._pos = b"", 0

    def copy_to_events_array(self) -> None:
        """Write the text up to and including the `[` that opens the events array."""
        first = self._peek()
        if first == b"{":
            self._pos += 1
            while self._peek() == b'"':
                key = self._value(keep=True)
                if self._peek() != b":":
                    raise self._bad("expected ':' after a member name")
                self._pos += 1
                if _member_name(key, self._path) == "traceEvents":
                    first = self._peek()
                    break
                self._value(keep=False)
                if self._peek() != b",":
                    break
                self._pos += 1
        if first != b"[":
            raise TraceError(f"{self._path}: no 'traceEvents' array to annotate")
        self._pos += 1
        self._write(self._buf[: self._pos])

    def copy_rest(self) -> None:
        """Write the rest of the text (after `copy_to_events_array`)."""
        self._write(self._buf[self._pos :])
        for block in self._blocks:
            self._write(block)

    def _next_block(self) -> bool:
        self._write(self._buf)
        block = next(self._blocks, None)
        self._buf, self._pos = (block, 0) if block is not None else (b"", 0)
        return block is not None

    def _peek(self) -> bytes:
        """The next non-whitespace byte (position left on it); b"" at the end of the text."""
        while True:
            self._pos = _WS.match(self._buf, self._pos).end()  # type: ignore[union-attr]
            if self._pos < len(self._buf):
                return self._buf[self._pos : self._pos + 1]
            if not self._next_block():
                return b""

    def _value(self, keep: bool) -> bytes:
        """Move past the value at the position; its text when `keep` (a member name, capped)."""
        kept: list[bytes] = []
        if self._peek() not in (b"{", b"[", b'"'):
            # A number or a literal: only its characters, which may run into the next block.
            while True:
                self._pos = _SCALAR.match(self._buf, self._pos).end()  # type: ignore[union-attr]
                if self._pos < len(self._buf) or not self._next_block():
                    return b""
        state = json_scan.ScanState()
        while True:
            try:
                end = json_scan.value_end(memoryview(self._buf)[self._pos :], state)
            except ValueError as exc:
                raise self._bad(str(exc)) from None
            stop = len(self._buf) if end is None else self._pos + end
            if keep:
                kept.append(self._buf[self._pos : stop])
                if sum(map(len, kept)) > MAX_META_VALUE_BYTES:
                    raise TraceError(f"{self._path}: a member name is longer than 1 MiB; not a trace")
            self._pos = stop
            if end is not None:
                return b"".join(kept)
            if not self._next_block():
                raise TraceError(f"{self._path}: JSON ends early (truncated file?)")

    def _bad(self, what: str) -> TraceError:
        return TraceError(f"{self._path}: not valid JSON ({what})")


def _member_name(text: bytes, path: Path) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise TraceError(f"{path}: not valid JSON (a member name)") from None
