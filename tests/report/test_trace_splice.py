"""`analyze --annotate` streams the trace: the user's text copied through unchanged with the findings
first in `traceEvents`, memory about one block whatever the trace's size, under the analysis' text cap."""

from __future__ import annotations

import gzip
import json
import tracemalloc
from pathlib import Path

import pytest

from bubblescope.errors import TraceError
from bubblescope.report.trace_splice import splice_trace
from bubblescope.trace import source

FINDINGS = [
    {"ph": "X", "name": "idle: sync", "pid": 7, "tid": 1, "ts": 1.5, "dur": 2.0, "args": {"blame": "x"}}
]
# Members before and after the events that a naive scan would trip on: "traceEvents" inside a string,
# brackets and escaped quotes in strings, a nested object, numbers and literals.
TEXT = (
    b'\xef\xbb\xbf{"schemaVersion": 1, "note": "a \\"traceEvents\\": [ here ]", '
    b'"deviceProperties": [{"name": "H200", "x": [1, 2, {"y": "]}"}]}], "flag": true, '
    b'"traceEvents": [{"ph": "X", "name": "k[0]", "ts": 1, "dur": 2}, {"ph": "i", "name": "s\\u00e9"}],'
    b' "traceName": "t", "n": -1.5e3}'
)


def _spliced(tmp_path: Path, text: bytes, name: str = "out.json") -> bytes:
    trace = tmp_path / "trace.json"
    trace.write_bytes(text)
    out = splice_trace(trace, iter(FINDINGS), tmp_path / name, None)
    data = out.read_bytes()
    return gzip.decompress(data) if name.endswith(".gz") else data


@pytest.mark.parametrize("block_bytes", [1, 7, 64, 4 << 20])
def test_text_is_copied_unchanged_with_findings_first(tmp_path: Path, monkeypatch, block_bytes: int) -> None:
    # Blocks as small as one byte: member names, escapes and values cut at every possible place.
    monkeypatch.setattr(source, "BLOCK_BYTES", block_bytes)
    written = _spliced(tmp_path, TEXT)
    inserted = json.dumps(FINDINGS[0], separators=(",", ":")).encode() + b","
    original = TEXT[3:]  # the byte order mark is dropped, as analysis reads the text
    at = original.index(b'"traceEvents": [') + len(b'"traceEvents": [')
    assert written == original[:at] + inserted + original[at:]
    doc = json.loads(written)
    assert doc["traceEvents"][0] == FINDINGS[0] and len(doc["traceEvents"]) == 3
    assert doc["note"] == 'a "traceEvents": [ here ]' and doc["n"] == -1500.0


def test_bare_array_and_gzip_output(tmp_path: Path) -> None:
    written = _spliced(tmp_path, b' [{"ph": "X", "name": "k"}]', "out.json.gz")
    assert json.loads(written) == [*FINDINGS, {"ph": "X", "name": "k"}]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b'{"traceName": "t"}', "no 'traceEvents' array"),
        (b'{"traceEvents": {"a": 1}}', "no 'traceEvents' array"),
        (b'{"meta": [1, 2', "ends early"),
        (b'{"meta": ]}', "no 'traceEvents' array"),
        (b'{"bad\\x": 1, "traceEvents": [{}]}', "not valid JSON"),
    ],
)
def test_bad_text_is_one_line(tmp_path: Path, text: bytes, message: str) -> None:
    with pytest.raises(TraceError, match=message):
        _spliced(tmp_path, text)
    assert not (tmp_path / "out.json").exists(), "no partial output"


def _peak_bytes(tmp_path: Path, megabytes: int) -> int:
    """Peak traced memory of splicing a trace of about `megabytes` MB: half a metadata string before
    the events, half events."""
    event = b'{"ph": "X", "name": "kernel", "ts": 1, "dur": 2, "args": {"correlation": 1}},'
    half = (megabytes << 20) // 2
    events = event * (half // len(event))
    text = b'{"deviceProperties": "' + b"x" * half + b'", "traceEvents": [' + events[:-1] + b"]}"
    trace = tmp_path / f"trace{megabytes}.json"
    trace.write_bytes(text)
    size = len(text)
    del text, events
    tracemalloc.start()
    try:
        out = splice_trace(trace, iter(FINDINGS), tmp_path / "out.json", None)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.stat().st_size == size + len(json.dumps(FINDINGS[0], separators=(",", ":"))) + 1
    return peak


def test_memory_is_bounded_by_a_block_not_the_trace(tmp_path: Path, monkeypatch) -> None:
    """Three times the trace, the same peak: a block of text and json_scan's window (a few MiB), where
    loading the trace held all of it (and ~1 KB per event as dicts)."""
    monkeypatch.setattr(source, "BLOCK_BYTES", 1 << 20)
    small, large = _peak_bytes(tmp_path, 8), _peak_bytes(tmp_path, 24)
    assert large < 16 << 20, f"peak {large / 2**20:.1f} MiB for a 24 MB trace"
    assert large - small < 2 << 20, f"peak grew from {small / 2**20:.1f} to {large / 2**20:.1f} MiB"


def test_the_analysis_text_cap_applies(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    trace.write_bytes(TEXT)
    with pytest.raises(TraceError, match="--max-decompressed-mb"):
        splice_trace(trace, iter(FINDINGS), tmp_path / "out.json", 100)
