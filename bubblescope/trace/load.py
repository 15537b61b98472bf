"""Read a Kineto / Chrome trace file (plain or gzip) with a cap on its decompressed size.

Every failure is a `TraceError` naming the file and the problem in one line, so the CLI can print it
and exit 2. The parsed event list is handed to `tables.build_tables` and dropped right after: nothing
here keeps a dict per event alive beyond one load.
"""

from __future__ import annotations

import contextlib
import gc
import json
import mmap
import os
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bubblescope.errors import TraceError
from bubblescope.trace.fastscan import EventColumns, event_at, scan_events

DEFAULT_MAX_DECOMPRESSED_BYTES = 4 << 30
# Small enough that one chunk's strings reuse the same heap pages chunk after chunk (measured on the
# 1.2 M event benchmark: 16 MiB 0.28 s system time, 4 MiB 0.22 s; user time flat from 2 to 32 MiB).
DEFAULT_CHUNK_BYTES = 4 << 20
_SCAN_CHUNK_EVENTS = 100_000
_MAX_CUT_ATTEMPTS = 64
_EVENT_BOUNDARY = re.compile(r"\}\s*,\s*\{")
# Where the events array may end; the fast path checks that the text before it is whole events.
_ARRAY_END = re.compile(r"\}[ \t\n\r]*\]")
# A candidate array end inside an event costs one scan of the tail: give up early.
_MAX_TAIL_ATTEMPTS = 4
_WS = re.compile(r"[ \t\n\r]*")
_WS_CHARS = " \t\n\r"
# The C scanner behind json.loads, called one value at a time (no per-call Python wrapper).
_SCAN = json.JSONDecoder().scan_once
_scanstring = json.decoder.scanstring
_READ_CHUNK_BYTES = 1 << 20
_GZIP_MAGIC = b"\x1f\x8b"
# What bytes.strip() removes: ASCII whitespace.
_BLANK = re.compile(rb"[ \t\n\r\x0b\x0c]*")


@dataclass
class RawTrace:
    """A parsed trace before normalisation.

    Attributes:
        path: the file it came from.
        meta: top-level keys other than `traceEvents` (deviceProperties, distributedInfo, ...).
        events: the `traceEvents` list (dicts as parsed; dropped after `build_tables`).
        size_bytes: decompressed size.
    """

    path: Path
    meta: dict[str, Any]
    events: list[Any]
    size_bytes: int


def expand_trace_paths(paths: list[str | os.PathLike[str]]) -> list[Path]:
    """Files to load: each path as given, or the traces inside a folder (sorted).

    In a folder, files named like traces (`*trace*.json[.gz]`, as `bubblescope run` writes them beside
    its record.json and analysis.json) are taken when there are any; otherwise every `*.json` /
    `*.json.gz` (a folder of one trace per rank under other names). Hidden files are skipped.
    """
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            candidates = sorted(
                p
                for p in path.iterdir()
                if p.name.endswith((".json", ".json.gz")) and not p.name.startswith(".")
            )
            traces = [p for p in candidates if "trace" in p.name]
            found = traces or candidates
            if not found:
                raise TraceError(f"{path}: folder holds no .json or .json.gz trace")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise TraceError(f"{path}: no such file or folder")
    if not files:
        raise TraceError("no trace file given")
    return files


def read_trace_bytes(path: Path, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> bytes:
    """The file's JSON text as bytes, gunzipped when it starts with the gzip magic.

    Decompression runs in bounded chunks and stops as soon as the output passes
    `max_decompressed_bytes`, so a decompression bomb is rejected after reading at most that much.
    """
    try:
        with open(path, "rb") as handle:
            head = handle.read(2)
            handle.seek(0)
            if head != _GZIP_MAGIC:
                data = handle.read(max_decompressed_bytes + 1)
                if len(data) > max_decompressed_bytes:
                    raise TraceError(f"{path}: larger than the {max_decompressed_bytes} byte limit")
                return data
            return _gunzip_capped(handle, path, max_decompressed_bytes)
    except OSError as exc:
        raise TraceError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _gunzip_capped(handle: Any, path: Path, max_bytes: int) -> bytes:
    # wbits 16+MAX_WBITS: gzip header; a new decompressor per gzip member (concatenated members are legal)
    parts: list[bytes] = []
    total = 0
    decomp = zlib.decompressobj(16 + zlib.MAX_WBITS)
    pending = b""
    while True:
        if not pending:
            pending = handle.read(_READ_CHUNK_BYTES)
            if not pending:
                break
        try:
            out = decomp.decompress(pending, max_bytes + 1 - total)
        except zlib.error as exc:
            raise TraceError(f"{path}: corrupt gzip data ({exc})") from None
        pending = decomp.unconsumed_tail
        total += len(out)
        if total > max_bytes:
            raise TraceError(f"{path}: decompresses to more than the {max_bytes} byte limit")
        parts.append(out)
        if decomp.eof:
            pending = decomp.unused_data
            decomp = zlib.decompressobj(16 + zlib.MAX_WBITS)
            if not pending:
                pending = handle.read(_READ_CHUNK_BYTES)
                if not pending:
                    return b"".join(parts)
    if not decomp.eof:
        raise TraceError(f"{path}: truncated gzip (the file ends inside the compressed stream)")
    return b"".join(parts)


def parse_trace_bytes(data: bytes, path: Path) -> RawTrace:
    """Parse JSON text into a RawTrace; reject anything that is not a Chrome/Kineto trace."""
    if _blank(data):
        raise TraceError(f"{path}: empty file")
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: not valid JSON ({_first_line(exc)})") from None
    if isinstance(doc, list):
        # The Chrome trace format also allows a bare array of events.
        return RawTrace(path=path, meta={}, events=doc, size_bytes=len(data))
    if not isinstance(doc, dict):
        raise TraceError(f"{path}: JSON is a {type(doc).__name__}, not a trace object")
    events = doc.pop("traceEvents", None)
    if events is None:
        raise TraceError(f"{path}: JSON has no 'traceEvents' (not a torch.profiler/Kineto trace)")
    if not isinstance(events, list):
        raise TraceError(f"{path}: 'traceEvents' is a {type(events).__name__}, not a list")
    if not events:
        raise TraceError(f"{path}: 'traceEvents' is empty")
    return RawTrace(path=path, meta=doc, events=events, size_bytes=len(data))


def load_raw_trace(path: Path, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> RawTrace:
    """Read and parse one whole trace file into memory (the annotated-trace writer needs every event;
    analysis uses the bounded `stream_trace`)."""
    data = read_trace_bytes(path, max_decompressed_bytes)
    with gc_paused():
        return parse_trace_bytes(data, path)


class _BadJson(Exception):
    """Malformed JSON at character `index` (StopIteration cannot cross a generator boundary)."""

    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index


class StreamedTrace:
    """A trace parsed incrementally: `chunks()` yields about `chunk_bytes` of events at a time, so only
    one chunk is alive at a time; `meta` is complete once `chunks()` is exhausted.

    A chunk is an `EventColumns` (raw text columns, no dict per event) when the fast regex path
    (`fastscan`) accepts its text, else a list of event dicts from json.loads.

    Args:
        path: the file.
        text: its decompressed JSON text.
        chunk_bytes: JSON text per chunk. Default 4 MiB (about 25 000 Kineto events).
        fast: try the regex fast path first. Default True; False parses everything with json.loads.
    """

    def __init__(
        self, path: Path, text: str, chunk_bytes: int = DEFAULT_CHUNK_BYTES, fast: bool = True
    ) -> None:
        self.path = path
        self.meta: dict[str, Any] = {}
        self.size_bytes = len(text)
        self.event_count = 0
        self._text = text
        self._chunk_bytes = chunk_bytes
        self._fast = fast

    def chunks(self) -> Iterator[list[Any] | EventColumns]:
        """Event chunks in file order. Raises TraceError on malformed or truncated JSON."""
        text, self._text = self._text, ""
        try:
            yield from self._document(text)
        except IndexError:
            raise TraceError(f"{self.path}: JSON ends early (truncated file?)") from None
        except _BadJson as exc:
            raise TraceError(
                f"{self.path}: not valid JSON (unexpected content at character {exc.index})"
            ) from None
        except ValueError as exc:
            raise TraceError(f"{self.path}: not valid JSON ({_first_line(exc)})") from None

    def _document(self, text: str) -> Iterator[list[Any]]:
        idx = _skip_ws(text, 0)
        if idx >= len(text):
            raise TraceError(f"{self.path}: empty file")
        if text[idx] == "[":
            end = yield from self._events(text, idx)
            self._expect_end(text, end)
            return
        if text[idx] != "{":
            raise TraceError(f"{self.path}: not valid JSON (expected an object or array at the start)")
        idx = _skip_ws(text, idx + 1)
        found = False
        while text[idx] != "}":
            if text[idx] != '"':
                raise _BadJson(idx)
            key, idx = _scanstring(text, idx + 1)
            idx = _skip_ws(text, idx)
            if text[idx] != ":":
                raise _BadJson(idx)
            idx = _skip_ws(text, idx + 1)
            if key == "traceEvents":
                if text[idx] != "[":
                    raise TraceError(f"{self.path}: 'traceEvents' is not a list")
                found = True
                idx = yield from self._events(text, idx)
            else:
                try:
                    self.meta[key], idx = _SCAN(text, idx)
                except StopIteration as exc:
                    raise _BadJson(exc.value) from None
            idx = _skip_ws(text, idx)
            if text[idx] == ",":
                idx = _skip_ws(text, idx + 1)
            elif text[idx] != "}":
                raise _BadJson(idx)
        self._expect_end(text, idx + 1)
        if not found:
            raise TraceError(f"{self.path}: JSON has no 'traceEvents' (not a torch.profiler/Kineto trace)")

    def _events(self, text: str, idx: int) -> Iterator[list[Any] | EventColumns]:
        """Yield chunks of the array starting at text[idx] == '['; return the index after ']'.

        Bulk: cut the array text at an event boundary about every `chunk_bytes` and hand each piece
        to json.loads (C speed). A cut is a `}` `,` `{` sequence; one that falls inside an event leaves
        its braces unbalanced, so json.loads rejects it and the next candidate is tried. The last piece
        (where the array ends) goes through the scanner one event at a time, unless the fast path
        finds the array's end.
        """
        idx = _skip_ws(text, idx + 1)
        if text[idx] == "]":
            raise TraceError(f"{self.path}: 'traceEvents' is empty")
        while idx + self._chunk_bytes < len(text):
            cut = self._cut_after(text, idx, idx + self._chunk_bytes)
            if cut is None:
                break
            events, idx = cut
            self.event_count += len(events)
            yield events
        tail = self._fast_tail(text, idx) if self._fast and event_at(text, idx) else None
        if tail is not None:
            columns, end = tail
            self.event_count += len(columns)
            yield columns
            return end
        return (yield from self._events_one_by_one(text, idx))

    def _fast_tail(self, text: str, start: int) -> tuple[EventColumns, int] | None:
        """The last events as columns and the index after the array's `]`, when some `}` `]` ends
        a piece that the fast path reads as whole events (then that `]` closes the array)."""
        for attempt, match in enumerate(_ARRAY_END.finditer(text, start)):
            if attempt >= _MAX_TAIL_ATTEMPTS:
                return None
            columns = scan_events(text[start : match.start() + 1])
            if columns is not None:
                return columns, match.end()
        return None

    def _cut_after(self, text: str, start: int, target: int) -> tuple[list[Any] | EventColumns, int] | None:
        fast = self._fast and event_at(text, start)
        for attempt, match in enumerate(_EVENT_BOUNDARY.finditer(text, target)):
            if attempt >= _MAX_CUT_ATTEMPTS:
                return None
            # Whole events in the fast grammar are valid JSON: json.loads would accept this cut too.
            columns = scan_events(text[start : match.start() + 1]) if fast else None
            if columns is not None:
                return columns, match.end() - 1
            try:
                events = json.loads("[" + text[start : match.start() + 1] + "]")
            except ValueError:
                continue
            return events, match.end() - 1
        return None

    def _events_one_by_one(self, text: str, idx: int) -> Iterator[list[Any]]:
        scan, limit = _SCAN, _SCAN_CHUNK_EVENTS
        chunk: list[Any] = []
        while True:
            try:
                event, idx = scan(text, idx)
            except StopIteration as exc:
                # The scanner signals "no JSON value here" with StopIteration(position).
                raise _BadJson(exc.value) from None
            chunk.append(event)
            if len(chunk) >= limit:
                self.event_count += len(chunk)
                yield chunk
                chunk = []
            char = text[idx]
            if char in _WS_CHARS:
                idx = _skip_ws(text, idx)
                char = text[idx]
            if char == ",":
                idx += 1
                if text[idx] in _WS_CHARS:
                    idx = _skip_ws(text, idx)
            elif char == "]":
                break
            else:
                raise _BadJson(idx)
        self.event_count += len(chunk)
        if chunk:
            yield chunk
        return idx + 1

    def _expect_end(self, text: str, idx: int) -> None:
        if _skip_ws(text, idx) != len(text):
            raise TraceError(f"{self.path}: not valid JSON (extra data after the trace)")


def stream_trace(
    path: Path,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    fast: bool = True,
) -> StreamedTrace:
    """Read one trace file (capped) and prepare to parse it chunk by chunk (`fast`: see
    `StreamedTrace`)."""
    with _mapped_plain_file(path, max_decompressed_bytes) as mapped:
        data = mapped if mapped is not None else read_trace_bytes(path, max_decompressed_bytes)
        if _blank(data):
            raise TraceError(f"{path}: empty file")
        try:
            text = str(data, "utf-8")
        except UnicodeDecodeError as exc:
            raise TraceError(f"{path}: not valid JSON (not UTF-8 text: {_first_line(exc)})") from None
        del data
    return StreamedTrace(path, text, chunk_bytes, fast)


@contextlib.contextmanager
def _mapped_plain_file(path: Path, max_bytes: int) -> Iterator[mmap.mmap | None]:
    """The file mapped read-only when it is a non-empty, uncompressed regular file within the cap:
    decoding straight from the page cache skips a full bytes copy. None otherwise;
    `read_trace_bytes` then reads it and reports any problem."""
    try:
        handle = open(path, "rb")
    except OSError:
        yield None
        return
    with handle:
        size = os.fstat(handle.fileno()).st_size
        if size > max_bytes:
            raise TraceError(f"{path}: larger than the {max_bytes} byte limit")
        try:
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) if size else None
        except (OSError, ValueError):
            mapped = None
        if mapped is None or mapped[:2] == _GZIP_MAGIC:
            if mapped is not None:
                mapped.close()
            yield None
            return
        with mapped:
            yield mapped


def _blank(data: bytes | mmap.mmap) -> bool:
    """Empty or only ASCII whitespace (what bytes.strip() removes), without strip()'s full copy."""
    return _BLANK.fullmatch(data) is not None


def _skip_ws(text: str, idx: int) -> int:
    return _WS.match(text, idx).end()  # type: ignore[union-attr]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector: parsing allocates millions of acyclic dicts, and each
    collection pass rescans all of them (measured: json.loads of 1.2 M events 3.8 s -> 1.5 s)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
