"""The streamed msgspec parser gives what the standard library's json.loads gives, whatever the
chunking, the key order or the layout; invalid JSON is refused in one line."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pandas as pd
import pytest

from bubblescope.errors import TraceError
from bubblescope.trace.load import stream_trace
from bubblescope.trace.tables import TraceTables, build_tables, build_tables_streamed
from tests.trace import scenarios

DATA = Path(__file__).resolve().parents[1] / "data"
TABLES = ("ops", "frames", "runtime", "gpu", "waits", "gpu_annotations")


def _trace_files() -> list[Path]:
    found = []
    for path in sorted(DATA.rglob("*")):
        if path.name.endswith((".json", ".json.gz")):
            with gzip.open(path) if path.name.endswith(".gz") else open(path, "rb") as handle:
                if b'"traceEvents"' in handle.read():
                    found.append(path)
    return found


TRACE_FILES = _trace_files()


def _stdlib_doc(path: Path) -> dict:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


def _streamed(path: Path, chunk_bytes: int) -> TraceTables:
    streamed = stream_trace(path, chunk_bytes=chunk_bytes)
    return build_tables_streamed(streamed.chunks(), lambda: streamed.meta, path, rank=0)


def _sorted(table: pd.DataFrame) -> pd.DataFrame:
    # Rows are grouped by category within a chunk, and categories numbered as first seen, so another
    # chunking orders both differently: compare the rows' text, sorted.
    text = table.astype(str)
    return text.sort_values(list(text.columns), kind="stable", ignore_index=True)


def _assert_same(left: TraceTables, right: TraceTables) -> None:
    for name in TABLES:
        ours, theirs = getattr(left, name), getattr(right, name)
        assert [str(t) for t in ours.dtypes] == [str(t) for t in theirs.dtypes], name
        pd.testing.assert_frame_equal(_sorted(ours), _sorted(theirs), check_exact=True, obj=name)
    rest = ("rank", "origin_ns", "end_ns", "event_count", "format", "meta")
    assert [getattr(left, k) for k in rest] == [getattr(right, k) for k in rest]


def test_trace_files_found() -> None:
    assert len(TRACE_FILES) >= 8, TRACE_FILES


@pytest.mark.parametrize("path", TRACE_FILES, ids=lambda p: str(p.relative_to(DATA)))
@pytest.mark.parametrize("chunk_bytes", [400, 3000, 1 << 24])
def test_streamed_tables_equal_stdlib_json_tables(path: Path, chunk_bytes: int) -> None:
    # At most ~50 chunks per file keeps the big recorded trace quick while still cutting it often.
    chunk_bytes = max(chunk_bytes, path.stat().st_size // 50)
    doc = _stdlib_doc(path)
    events = doc.pop("traceEvents")
    reference = build_tables(events, doc, path, rank=0)
    streamed = _streamed(path, chunk_bytes)
    assert streamed.event_count == len(events)
    _assert_same(streamed, reference)


def _shuffled_keys(value: object, rng: random.Random) -> object:
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: _shuffled_keys(v, rng) for k, v in items}
    if isinstance(value, list):
        return [_shuffled_keys(v, rng) for v in value]
    return value


@pytest.mark.parametrize("seed", range(3))
def test_key_order_never_drops_events(tmp_path: Path, seed: int) -> None:
    # Debian 12's python3 (re of 3.11.2) made the old regex scanner drop such events silently.
    trace = scenarios.two_streams().trace()
    in_order = tmp_path / "ordered.json"
    in_order.write_text(json.dumps(trace))
    shuffled = tmp_path / "shuffled.json"
    shuffled.write_text(json.dumps(_shuffled_keys(trace, random.Random(seed)), indent=seed))
    for chunk_bytes in (200, 1 << 20):
        _assert_same(_streamed(shuffled, chunk_bytes), _streamed(in_order, chunk_bytes))
    expected_gpu = sum(e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") for e in trace["traceEvents"])
    assert len(_streamed(shuffled, 200).gpu) == expected_gpu > 0


def _refused(path: Path, chunk_bytes: int = 1 << 20) -> str:
    with pytest.raises(TraceError) as info:
        _streamed(path, chunk_bytes)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    return message


@pytest.mark.parametrize("bad", ["1.", "01", "1e", "-", "NaN", "Infinity", "'x'", "tru", "1 2", '"a\x01"'])
@pytest.mark.parametrize("chunk_bytes", [100, 1 << 20])
def test_invalid_json_values_are_refused(tmp_path: Path, bad: str, chunk_bytes: int) -> None:
    events = scenarios.item_sync().trace()["traceEvents"]
    text = json.dumps({"traceEvents": events})
    # The bad value as the ts of a late event: inside a chunk, not at a cut.
    marker = json.dumps([e for e in events if "ts" in e][-2]["ts"])
    at = text.rindex(f'"ts": {marker}')
    path = tmp_path / "bad.json"
    path.write_text(text[:at] + f'"ts": {bad}' + text[at + len(f'"ts": {marker}') :])
    assert "not valid JSON" in _refused(path, chunk_bytes)


@pytest.mark.parametrize(
    "text",
    [
        '{"traceEvents": [{"ph": "X"},]}',
        '{"traceEvents": [{"ph": "X"} {"ph": "X"}]}',
        '{"traceEvents": [{"ph": "X"}], }',
        '{"traceEvents": [{"ph": "X"}]',
        '{"traceEvents": [{"ph": "X"}]} x',
        '{"a" 1, "traceEvents": [{"ph": "X"}]}',
        '{"traceEvents": [{"ph": "X", "args": {"a": [1, 2}}]}',
        '{"traceEvents": [{"ph": "X"}], "traceEvents": [{"ph": "X"}]}',
    ],
)
def test_malformed_structure_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "t.json"
    path.write_text(text)
    for chunk_bytes in (1, 5, 1 << 20):
        message = _refused(path, chunk_bytes)
        assert "JSON" in message or "two 'traceEvents'" in message, message


def test_cut_inside_an_args_array_of_objects(tmp_path: Path) -> None:
    # `}, {` inside args makes the fast cut fail; the exact scan must find the real boundary.
    trace = scenarios.item_sync().trace()
    for event in trace["traceEvents"]:
        event.setdefault("args", {})["shapes"] = [{"a": 1}, {"b": [{"c": "}, {"}]}] * 20
    path = tmp_path / "nested.json"
    path.write_text(json.dumps(trace))
    meta = {k: v for k, v in trace.items() if k != "traceEvents"}
    reference = build_tables(trace["traceEvents"], meta, path, rank=0)
    for chunk_bytes in (50, 700, 5000):
        _assert_same(_streamed(path, chunk_bytes), reference)
