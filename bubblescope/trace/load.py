"""Find and read Kineto / Chrome trace files (plain or gzip): regular files only, decompressed as they
are parsed, with a cap on the decompressed size.

Every failure is a `TraceError` naming the file and the problem in one line, so the CLI can print it
and exit 2. Analysis streams each file (`stream_trace`): the text is inflated and parsed one chunk at a
time and each chunk's events are dropped once bucketed, so memory follows the tables, not the file.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bubblescope.errors import TraceError
from bubblescope.trace.events import Event, decode_value
from bubblescope.trace.source import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    DEFAULT_MAX_TRACE_FILES,
    effective_cap,
    effective_file_cap,
    not_regular_reason,
    text_blocks,
    trace_file_cap,
    trace_size_cap,
)
from bubblescope.trace.text import BYTES_PER_EVENT_BUDGET, DEFAULT_CHUNK_BYTES, TraceText

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "DEFAULT_MAX_TRACE_FILES",
    "RawTrace",
    "StreamedTrace",
    "TracePaths",
    "expand_trace_paths",
    "gc_paused",
    "load_raw_trace",
    "parse_trace_bytes",
    "read_trace_bytes",
    "stream_trace",
    "trace_file_cap",
    "trace_size_cap",
]


@dataclass
class RawTrace:
    """A parsed trace before normalisation.

    Attributes:
        path: the file it came from.
        meta: top-level keys other than `traceEvents` (deviceProperties, distributedInfo, ...).
        events: the `traceEvents` list (dicts as parsed).
        size_bytes: decompressed size.
    """

    path: Path
    meta: dict[str, Any]
    events: list[Any]
    size_bytes: int


class TracePaths(list):
    """The trace files to read, in order; `skipped` says which folder entries were left out and why
    (one line each, for the analysis warnings)."""

    def __init__(self, files: list[Path], skipped: list[str]) -> None:
        super().__init__(files)
        self.skipped = skipped


def expand_trace_paths(paths: list[str | os.PathLike[str]]) -> TracePaths:
    """Files to load: each path as given, or the traces inside a folder (sorted).

    In a folder, files named like traces (`*trace*.json[.gz]`, as `bubblescope run` writes them beside
    its record.json and analysis.json) are taken when there are any; otherwise every `*.json` /
    `*.json.gz` (a folder of one trace per rank under other names). Hidden files are skipped, and so is
    anything that is not a regular file (a FIFO, a device, a symlink to one): reading it could hang or
    never end. A path given directly must be a regular file or a folder.

    Raises:
        TraceError: a path that does not exist or is not a regular file, a folder without traces, more
            trace files than the cap (`trace_file_cap`, --max-files; counted before any is opened).
    """
    files: list[Path] = []
    skipped: list[str] = []
    cap = effective_file_cap()
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(_folder_traces(path, skipped, cap - len(files)))
            continue
        reason = not_regular_reason(path)
        if reason is not None:
            suffix = "" if reason == "no such file or folder" else "; refusing to read it"
            raise TraceError(f"{path}: {reason}{suffix}")
        files.append(path)
        if len(files) > cap:
            raise TraceError(f"more than {cap} trace files given (one per rank); raise --max-files")
    if not files:
        raise TraceError("no trace file given")
    return TracePaths(files, skipped)


def _folder_traces(folder: Path, skipped: list[str], room: int) -> list[Path]:
    named = sorted(
        p for p in folder.iterdir() if p.name.endswith((".json", ".json.gz")) and not p.name.startswith(".")
    )
    # Counted from the names alone, so a folder of 50,000 files is refused before one is opened.
    candidates = sum("trace" in p.name for p in named) or len(named)
    if candidates > room:
        raise TraceError(
            f"{folder}: holds {candidates} trace files, more than the {effective_file_cap()} a command reads "
            "(one per rank); raise --max-files"
        )
    regular = []
    for candidate in named:
        reason = not_regular_reason(candidate)
        if reason is None:
            regular.append(candidate)
        else:
            skipped.append(f"{candidate}: skipped ({reason})")
    found = [p for p in regular if "trace" in p.name] or regular
    if not found:
        why = f" (skipped {len(skipped)} that are not regular files)" if named else ""
        raise TraceError(f"{folder}: folder holds no .json or .json.gz trace{why}")
    return found


def read_trace_bytes(path: Path, max_decompressed_bytes: int | None = None) -> bytes:
    """The file's whole JSON text (gunzipped, capped, BOM dropped), for callers that need it at once."""
    return b"".join(text_blocks(path, max_decompressed_bytes))


def parse_trace_bytes(data: bytes, path: Path) -> RawTrace:
    """Parse JSON text into a RawTrace; reject anything that is not a Chrome/Kineto trace."""
    if not data.strip():
        raise TraceError(f"{path}: empty file")
    doc = decode_value(data, path)
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


def load_raw_trace(path: Path, max_decompressed_bytes: int | None = None) -> RawTrace:
    """Read and parse one whole trace file into memory as dicts (the annotated-trace writer needs every
    event; analysis uses the bounded `stream_trace`)."""
    data = read_trace_bytes(path, max_decompressed_bytes)
    with gc_paused():
        return parse_trace_bytes(data, path)


class StreamedTrace:
    """A trace parsed as it is read: `chunks()` yields lists of `events.Event` of about `chunk_bytes`
    of text each; `meta` and `event_count` are complete once `chunks()` is exhausted.

    Args:
        path: the file.
        max_decompressed_bytes: cap on the JSON text (default `source.effective_cap(None)`).
        chunk_bytes: JSON text per chunk. Default 4 MiB (about 25 000 Kineto events).
    """

    def __init__(
        self, path: Path, max_decompressed_bytes: int | None = None, chunk_bytes: int = DEFAULT_CHUNK_BYTES
    ) -> None:
        self.path = path
        cap = effective_cap(max_decompressed_bytes)
        self._text = TraceText(text_blocks(path, cap), path, chunk_bytes, cap // BYTES_PER_EVENT_BUDGET)

    @property
    def meta(self) -> dict[str, Any]:
        return self._text.meta

    @property
    def event_count(self) -> int:
        return self._text.event_count

    def chunks(self) -> Iterator[list[Event]]:
        """Event chunks in file order. Raises TraceError on unreadable, malformed or truncated input."""
        return self._text.chunks()


def stream_trace(
    path: Path, max_decompressed_bytes: int | None = None, chunk_bytes: int = DEFAULT_CHUNK_BYTES
) -> StreamedTrace:
    """Prepare to read one trace file chunk by chunk (see `StreamedTrace`). The file is refused here
    when it is not a regular file."""
    reason = not_regular_reason(Path(path))
    if reason is not None:
        raise TraceError(f"{path}: {reason}; refusing to read it")
    return StreamedTrace(Path(path), max_decompressed_bytes, chunk_bytes)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector: parsing allocates millions of objects, and each collection
    pass would rescan all of them."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
