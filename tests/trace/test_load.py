"""Loading: every bad input is a one-line TraceError naming the file; quirks of real traces load."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from bubblescope.analysis.traces import analyze_traces
from bubblescope.errors import TraceError
from bubblescope.trace.load import expand_trace_paths, read_trace_bytes, stream_trace
from bubblescope.trace.tables import build_tables, build_tables_streamed
from tests.trace import scenarios
from tests.trace.builder import TraceBuilder


def _error(path: Path, **kwargs) -> str:
    with pytest.raises(TraceError) as info:
        analyze_traces([path], **kwargs)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    return message


def test_truncated_gzip(tmp_path: Path) -> None:
    data = gzip.compress(json.dumps(scenarios.item_sync().trace()).encode())
    path = tmp_path / "cut.json.gz"
    path.write_bytes(data[: len(data) // 2])
    assert "truncated gzip" in _error(path)


def test_corrupt_gzip(tmp_path: Path) -> None:
    path = tmp_path / "bad.json.gz"
    path.write_bytes(b"\x1f\x8b\x08\x00" + b"\xff" * 64)
    assert "gzip" in _error(path)


def test_not_json(tmp_path: Path) -> None:
    path = tmp_path / "notes.json"
    path.write_text("this is not json {")
    assert "not valid JSON" in _error(path)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text("")
    assert "empty file" in _error(path)


def test_json_without_trace_events(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"schema": "something/1", "rows": []}))
    assert "traceEvents" in _error(path)


def test_events_missing_fields(tmp_path: Path) -> None:
    trace = scenarios.item_sync().trace()
    kernel = next(e for e in trace["traceEvents"] if e.get("cat") == "kernel")
    del kernel["ts"]
    path = tmp_path / "missing.json"
    path.write_text(json.dumps(trace))
    message = _error(path)
    assert "'kA'" in message and "lacks 'ts'" in message


def test_event_with_non_numeric_duration(tmp_path: Path) -> None:
    trace = scenarios.item_sync().trace()
    next(e for e in trace["traceEvents"] if e.get("cat") == "cuda_runtime")["dur"] = "soon"
    path = tmp_path / "textdur.json"
    path.write_text(json.dumps(trace))
    assert "non-numeric" in _error(path)


def test_events_not_objects(tmp_path: Path) -> None:
    path = tmp_path / "ints.json"
    path.write_text(json.dumps({"traceEvents": [1, 2, 3]}))
    assert "not an object" in _error(path)


def test_trace_without_usable_events(tmp_path: Path) -> None:
    path = tmp_path / "meta_only.json"
    path.write_text(json.dumps({"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1}]}))
    assert "no host, runtime or GPU events" in _error(path)


def test_decompression_bomb_rejected_at_the_cap(tmp_path: Path) -> None:
    # 64 MiB of spaces compress to ~64 KiB; with a 1 MiB cap only ~1 MiB is ever inflated.
    path = tmp_path / "bomb.json.gz"
    path.write_bytes(gzip.compress(b"[" + b" " * (64 << 20) + b"]", compresslevel=9))
    assert path.stat().st_size < 200_000
    assert "more than the 1 MiB limit" in _error(path, max_decompressed_bytes=1 << 20)


def test_plain_file_over_the_cap(tmp_path: Path) -> None:
    path = scenarios.item_sync().write(tmp_path / "t.json")
    assert "larger than the 100 byte limit" in _error(path, max_decompressed_bytes=100)


def test_gzip_and_plain_read_the_same(tmp_path: Path) -> None:
    builder = scenarios.item_sync()
    plain = read_trace_bytes(builder.write(tmp_path / "a.json"))
    assert read_trace_bytes(builder.write(tmp_path / "a.json.gz")) == plain


def test_folder_of_ranks(tmp_path: Path) -> None:
    for rank in (0, 1):
        builder = scenarios.item_sync()
        builder.meta["distributedInfo"] = {"rank": rank, "world_size": 2}
        builder.write(tmp_path / "run" / f"rank{rank}.json.gz")
    assert [p.name for p in expand_trace_paths([tmp_path / "run"])] == ["rank0.json.gz", "rank1.json.gz"]
    result = analyze_traces([tmp_path / "run"])
    assert [(d["rank"], d["device"]) for d in result["devices"]] == [(0, 0), (1, 0)]
    assert [s["rank"] for s in result["steps"]] == [0, 1]
    (read,) = result["syncs"]
    assert (read["count"], read["per_step"]) == (2, 1.0)


def test_missing_path_and_empty_folder(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no such file"):
        expand_trace_paths([tmp_path / "nope.json"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(TraceError, match="no .json"):
        expand_trace_paths([tmp_path / "empty"])


def test_ns_fractions_survive_large_timestamps(tmp_path: Path) -> None:
    # Kineto writes µs since boot with ns fractions; at ~5e12 µs a float still resolves the ns.
    builder = scenarios.item_sync(TraceBuilder(base_us=5_156_338_342_787))
    trace = builder.trace()
    kernel = next(e for e in trace["traceEvents"] if e.get("name") == "kC")
    kernel["ts"] = round(builder.base_us + 67.123, 3)
    kernel["dur"] = 12.877
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    result = analyze_traces([path])
    # kC's launch returns at 65: the ns fraction lands in the queued piece [65, 67.123) (issue 14 §2).
    assert result["devices"][0]["idle_by_class_ns"]["launch"] == 2_000 + 2_123
    assert result["devices"][0]["busy_ns"] == 41_877


def test_chunked_parse_equals_single_chunk(tmp_path: Path) -> None:
    builder = scenarios.two_streams()
    builder.meta["distributedInfo"] = {"rank": 3}
    path = builder.write(tmp_path / "t.json.gz")
    whole = build_tables(builder.trace()["traceEvents"], builder.meta, path, rank=0)
    streamed = stream_trace(path, chunk_bytes=300)
    chunks = list(streamed.chunks())
    assert len(chunks) > 5
    chunked = build_tables_streamed(chunks, lambda: streamed.meta, path, rank=0)
    assert chunked.rank == whole.rank == 3
    assert chunked.event_count == whole.event_count == len(builder.trace()["traceEvents"])
    for name in ("ops", "frames", "runtime", "gpu", "waits"):
        left, right = getattr(whole, name).astype(str), getattr(chunked, name).astype(str)
        columns = list(left.columns)
        assert (
            left.sort_values(columns)
            .reset_index(drop=True)
            .equals(right.sort_values(columns).reset_index(drop=True))
        ), name


def test_metadata_after_events_and_bare_array(tmp_path: Path) -> None:
    trace = scenarios.item_sync().trace()
    events = trace.pop("traceEvents")
    path = tmp_path / "late_meta.json"
    path.write_text('{"traceEvents": ' + json.dumps(events) + ', "distributedInfo": {"rank": 5}}')
    assert analyze_traces([path])["devices"][0]["rank"] == 5
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(events))
    assert analyze_traces([bare])["syncs"][0]["count"] == 1


def test_truncated_plain_json_and_trailing_garbage(tmp_path: Path) -> None:
    text = json.dumps(scenarios.item_sync().trace())
    cut = tmp_path / "cut.json"
    cut.write_text(text[: len(text) * 2 // 3])
    message = _error(cut)
    assert "ends early" in message or "not valid JSON" in message
    extra = tmp_path / "extra.json"
    extra.write_text(text + " {}")
    assert "extra data" in _error(extra)


def test_run_folder_expands_to_its_traces_only(tmp_path: Path) -> None:
    from bubblescope.trace.load import expand_trace_paths

    for name in ("record.json", "analysis.json", "trace.rank0.json.gz", "trace.rank1.json.gz", ".x.tmp.json"):
        (tmp_path / name).write_text("{}")
    assert [p.name for p in expand_trace_paths([tmp_path])] == ["trace.rank0.json.gz", "trace.rank1.json.gz"]


def test_folder_without_trace_names_takes_every_json(tmp_path: Path) -> None:
    from bubblescope.trace.load import expand_trace_paths

    for name in ("rank0.json", "rank1.json.gz"):
        (tmp_path / name).write_text("{}")
    assert [p.name for p in expand_trace_paths([tmp_path])] == ["rank0.json", "rank1.json.gz"]
