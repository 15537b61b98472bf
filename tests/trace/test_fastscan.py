"""The regex fast path (`fastscan`) gives the same tables and the same errors as json.loads."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bubblescope.errors import TraceError
from bubblescope.trace.categories import BUCKET_OF_CATEGORY
from bubblescope.trace.fastscan import scan_events
from bubblescope.trace.load import stream_trace
from bubblescope.trace.tables import TraceTables, build_tables_streamed
from tests.trace import scenarios

DATA = Path(__file__).resolve().parents[1] / "data"
SHARED_SAMPLE = Path(__file__).resolve().parents[3] / "shared" / "data" / "h200_probe_trace.json.gz"
TABLES = ("ops", "frames", "runtime", "gpu", "waits", "gpu_annotations")


def _trace_files() -> list[Path]:
    files = [p for p in sorted(DATA.rglob("*")) if p.name.endswith((".json", ".json.gz"))]
    opened = {p: gzip.open(p) if p.name.endswith(".gz") else open(p, "rb") for p in files}
    found = []
    for path, handle in opened.items():
        with handle:
            if b'"traceEvents"' in handle.read():
                found.append(path)
    return found


TRACE_FILES = _trace_files()


def _load(path: Path, fast: bool, chunk_bytes: int) -> tuple[TraceTables, int]:
    """Tables of one file, and how many chunks came through the fast path."""
    streamed = stream_trace(path, chunk_bytes=chunk_bytes, fast=fast)
    chunks = list(streamed.chunks())
    fast_chunks = sum(not isinstance(chunk, list) for chunk in chunks)
    return build_tables_streamed(chunks, lambda: streamed.meta, path, rank=0), fast_chunks


def _assert_same(fast: TraceTables, slow: TraceTables) -> None:
    for name in TABLES:
        pd.testing.assert_frame_equal(getattr(fast, name), getattr(slow, name), check_exact=True, obj=name)
    fast_rest = (fast.rank, fast.origin_ns, fast.end_ns, fast.event_count, fast.format, fast.meta)
    assert fast_rest == (slow.rank, slow.origin_ns, slow.end_ns, slow.event_count, slow.format, slow.meta)


def _outcome(path: Path, fast: bool, chunk_bytes: int) -> TraceTables | str:
    try:
        return _load(path, fast, chunk_bytes)[0]
    except TraceError as exc:
        return f"TraceError: {exc}"


def test_trace_files_found() -> None:
    assert len(TRACE_FILES) >= 8, TRACE_FILES


@pytest.mark.parametrize("path", TRACE_FILES, ids=lambda p: str(p.relative_to(DATA)))
@pytest.mark.parametrize("chunk_bytes", [400, 3000, 1 << 24])
def test_fast_tables_equal_json_tables(path: Path, chunk_bytes: int) -> None:
    # At most ~50 chunks per file keeps the big recorded trace quick while still cutting it often.
    chunk_bytes = max(chunk_bytes, path.stat().st_size // 50)
    fast, fast_chunks = _load(path, True, chunk_bytes)
    slow, slow_fast_chunks = _load(path, False, chunk_bytes)
    assert slow_fast_chunks == 0
    # Every test trace is in the layout Kineto writes: the fast path must carry some of it.
    assert fast_chunks > 0, f"{path}: the fast path read no chunk"
    _assert_same(fast, slow)


def test_shared_sample_fast_equals_json(shared_dir: Path) -> None:
    sample = shared_dir / "data" / "h200_probe_trace.json.gz"
    if not sample.is_file():
        pytest.skip(f"{sample} is not present")
    for chunk_bytes in (1 << 16, 1 << 24):
        fast, fast_chunks = _load(sample, True, chunk_bytes)
        assert fast_chunks > 0
        _assert_same(fast, _load(sample, False, chunk_bytes)[0])


def _corrupt_variants(text: str) -> dict[str, str]:
    """Malformed or unusual versions of one trace's text, each a case the fast path must not hide."""
    kernel = '"cat": "kernel", "name": "kA"'
    return {
        "nan_ts": text.replace('"ts": 1700000000012.0', '"ts": NaN', 1),
        "inf_dur": text.replace('"dur": 28.0', '"dur": 1e400', 1),
        "string_ts": text.replace('"ts": 1700000000012.0', '"ts": "12"', 1),
        "bool_dur": text.replace('"dur": 28.0', '"dur": true', 1),
        "negative_dur": text.replace('"dur": 28.0', '"dur": -28.0', 1),
        "escaped_name": text.replace(kernel, '"cat": "kernel", "name": "k\\u0041"', 1),
        "escaped_ph": text.replace('{"ph": "X", ' + kernel, '{"ph": "\\u0058", ' + kernel, 1),
        "ph_overridden": text.replace('{"ph": "X", ' + kernel, '{"ph": "s", "ph": "X", ' + kernel, 1),
        "x_then_flow": text.replace('{"ph": "X", ' + kernel, '{"ph": "X", "ph": "f", ' + kernel, 1),
        "trailing_comma": text.replace("}]", "},]", 1),
        "double_comma": text.replace("}, {", "},, {", 1),
        "raw_tab_in_name": text.replace('"name": "kA"', '"name": "k\tA"', 1),
        "bad_escape": text.replace('"name": "kA"', '"name": "k\\qA"', 1),
        "duplicate_args_key": text.replace('"correlation": ', '"correlation": 1, "correlation": ', 1),
        "string_pid": text.replace('"pid": 4242', '"pid": "4242"', 1),
        "negative_zero_tid": text.replace('"tid": 4242', '"tid": -0', 1),
        "args_list": text.replace('"args": {}', '"args": []', 1),
        "missing_args": text.replace(', "args": {}', "", 1),
        "nested_args": text.replace('"args": {}', '"args": {"a": {"b": [[[1]]]}}', 1),
        "number_event": text.replace("}, {", "}, 7, {", 1),
        "truncated": text[: len(text) * 2 // 3],
        "extra_data": text + "x",
        "leading_zero": text.replace('"dur": 28.0', '"dur": 028.0', 1),
    }


@pytest.mark.parametrize("case", sorted(_corrupt_variants("")))
def test_odd_input_same_result_as_json(tmp_path: Path, case: str) -> None:
    text = json.dumps(scenarios.item_sync().trace())
    variant = _corrupt_variants(text)[case]
    assert variant != text, f"{case}: the replacement did not apply"
    path = tmp_path / "t.json"
    path.write_text(variant)
    for chunk_bytes in (300, 1 << 24):
        fast, slow = _outcome(path, True, chunk_bytes), _outcome(path, False, chunk_bytes)
        if isinstance(slow, str) or isinstance(fast, str):
            assert fast == slow
        else:
            _assert_same(fast, slow)


def test_scan_rejects_what_json_rejects() -> None:
    good = '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.5, "dur": 2, "args": {}}'
    columns = scan_events(good + ", " + good)
    assert columns is not None and len(columns) == 2
    assert (columns.cat, columns.ts, columns.dur, columns.args) == (
        ["kernel"] * 2,
        ["1.5"] * 2,
        ["2"] * 2,
        ["{}"] * 2,
    )
    for bad in (good + ",", good + ", ", good + " " + good, "[" + good + "]", good[:-1], ""):
        assert scan_events(bad) is None, bad


# Mostly printable ASCII, so many examples stay inside the fast grammar (quotes and backslashes
# still escape); ensure_ascii=False below adds raw non-ASCII text.
_TEXT = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF), max_size=8)
_SCALARS = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    _TEXT,
    st.booleans(),
    st.none(),
)
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3), max_leaves=6)
_EVENTS = st.fixed_dictionaries(
    {
        "ph": st.sampled_from(["X", "s", "f", "M", "i"]),
        "cat": st.sampled_from(["kernel", "cpu_op", "python_function", "ac2g", "cuda_runtime"]),
        "name": _TEXT,
        "pid": st.one_of(st.integers(-5, 5), _TEXT),
        "tid": st.one_of(st.integers(-5, 2**40), _TEXT),
        "ts": st.one_of(st.integers(0, 2**60), st.floats(0, 1e15)),
        "dur": st.one_of(st.integers(0, 10**6), st.floats(0, 1e6)),
        "args": st.dictionaries(_TEXT, _VALUES, max_size=4),
    }
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=st.lists(_EVENTS, min_size=1, max_size=5),
    indent=st.sampled_from([None, 2]),
    ascii_only=st.booleans(),
)
def test_scanned_columns_are_the_json_values(
    events: list[dict], indent: int | None, ascii_only: bool
) -> None:
    piece = json.dumps(events, indent=indent, ensure_ascii=ascii_only)[1:-1].strip()
    columns = scan_events(piece)
    if columns is None:
        return
    # Used events must be captured with their JSON values; others may be captured or left None.
    complete = [e for e in events if e["ph"] == "X" and e["cat"] in BUCKET_OF_CATEGORY]
    used = [i for i, cat in enumerate(columns.cat) if cat in BUCKET_OF_CATEGORY]
    assert [columns.cat[i] for i in used] == [e["cat"] for e in complete]
    assert [columns.name[i] for i in used] == [e["name"] for e in complete]
    assert [json.loads(columns.args[i]) for i in used] == [e["args"] for e in complete]
    for key in ("pid", "tid", "ts", "dur"):
        raw = [json.loads(getattr(columns, key)[i]) for i in used]
        assert raw == [e[key] for e in complete], key


def test_scanned_columns_strings_and_numbers() -> None:
    kernel_args = {"grid": [[1], []], "s": 'a"b'}
    events = [
        {"ph": "X", "cat": "kernel", "name": "é k<1>", "pid": "GPU", "tid": -3, "ts": 1e3, "dur": 0},
        {"ph": "f", "id": 1, "cat": "ac2g", "name": "ac2g", "bp": "e"},
        {"cat": "overhead", "ph": "X", "name": "x", "ts": 1},
    ]
    events[0]["args"] = kernel_args
    columns = scan_events(json.dumps(events, ensure_ascii=False)[1:-1])
    assert columns is not None
    assert (columns.name, columns.pid) == (["é k<1>", None, None], ['"GPU"', None, None])
    assert columns.tid == ["-3", None, None]
    assert (columns.ts, columns.dur) == (["1000.0", None, None], ["0", None, None])
    assert json.loads(columns.args[0]) == kernel_args


@pytest.mark.parametrize(
    "args",
    ['{"a": 1,}', '{,"a": 1}', '{"a": [1, ]}', '{"a": [1,, 2]}', '{"a": [,1]}', '{"a" 1}', '{"a": [[1] [2]]}']
    + ['{"a": 01}', '{"a": 1.}', '{"a": .5}', '{"a": tru}', r'{"a": "x\q"}', '{"a": [[[1]]]}', '{"a": {}}'],
)
def test_scan_rejects_bad_or_deep_args(args: str) -> None:
    event = '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2, "args": %s}'
    assert scan_events(event % args) is None


@pytest.mark.parametrize(
    "args", ["{}", "{ }", '{"a": []}', '{"a": [ ]}', '{"a": [[1, 2], [], [3]]}', '{"a": -0.5e-3, "b": null}']
)
def test_scan_accepts_json_args(args: str) -> None:
    event = '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2, "args": %s}'
    columns = scan_events(event % args)
    assert columns is not None and json.loads(columns.args[0]) == json.loads(args)


def test_other_key_order_falls_back_to_json(tmp_path: Path) -> None:
    trace = scenarios.item_sync().trace()
    trace["traceEvents"] = [dict(reversed(list(e.items()))) for e in trace["traceEvents"]]
    path = tmp_path / "reversed.json"
    path.write_text(json.dumps(trace))
    # One piece whose first event is outside the grammar: the probe sends it straight to json.loads.
    assert _load(path, True, 1 << 22)[1] == 0
    fast, _ = _load(path, True, 300)
    _assert_same(fast, _load(path, False, 300)[0])


@pytest.mark.parametrize(
    "flow",
    [
        '{"ph": "f", "id": 1, "pid": 0, "tid": 7, "ts": 1.5, "cat": "ac2g", "name": "ac2g", "bp": "e"}',
        '{"ph": "s", "id": 1, "pid": 4, "tid": 4, "ts": 1.5, "cat": "ac2g", "name": "ac2g"}',
        '{"ph": "f", "id": 1, "pid": 0, "tid": 7, "ts": 1, "cat": "ac2g", "name": "ac2g", "ph": "X"}',
    ],
)
def test_flow_events_are_read_as_unused(flow: str) -> None:
    columns = scan_events(flow)
    assert columns is not None and columns.cat == [None]


def test_flow_with_bad_json_is_rejected() -> None:
    assert (
        scan_events('{"ph": "f", "id": 01, "pid": 0, "tid": 7, "ts": 1, "cat": "ac2g", "name": "ac2g"}')
        is None
    )
