"""Malformed events (issue 18 §1, loading part): a one-line TraceError (exit 2 at the CLI) or the
event left out, never a traceback and never a numpy warning on the terminal."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from bubblescope.analysis.traces import analyze_traces
from bubblescope.errors import TraceError
from tests.trace import scenarios


def _events() -> list[dict]:
    return scenarios.item_sync().trace()["traceEvents"]


def _first(events: list[dict], cat: str) -> dict:
    return next(e for e in events if e.get("cat") == cat)


def _write(tmp_path: Path, events: list[dict] | str, name: str = "t.json") -> Path:
    path = tmp_path / name
    text = events if isinstance(events, str) else json.dumps({"traceEvents": events})
    path.write_text(text, encoding="utf-8")
    return path


def _outcome(path: Path, capfd: pytest.CaptureFixture[str]) -> dict | str:
    """The analysis, or the one-line error; fails on any warning or on output to the terminal."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            result: dict | str = analyze_traces([path])
        except TraceError as exc:
            result = str(exc)
            assert "\n" not in result and str(path) in result, result
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == "", captured
    return result


def _error(tmp_path: Path, capfd: pytest.CaptureFixture[str], events: list[dict] | str) -> str:
    result = _outcome(_write(tmp_path, events), capfd)
    assert isinstance(result, str), "expected a one-line TraceError"
    return result


def _edit(cat: str, key: str, value: object) -> Callable[[list[dict]], list[dict]]:
    def edit(events: list[dict]) -> list[dict]:
        _first(events, cat)[key] = value
        return events

    return edit


@pytest.mark.parametrize(
    ("cat", "key", "value", "expected"),
    [
        ("kernel", "name", {"a": 1}, "'name'"),
        ("cpu_op", "name", [1, 2], "'name'"),
        ("cuda_runtime", "tid", {"t": 1}, "'tid'"),
        ("cpu_op", "tid", [7], "'tid'"),
        ("kernel", "dur", "soon", "'dur'"),
        ("kernel", "dur", -5, "'dur'"),
        ("kernel", "dur", 1e30, "'dur'"),
        ("kernel", "dur", None, "lacks 'dur'"),
        ("kernel", "ts", 1e30, "'ts'"),
        ("kernel", "ts", [1], "'ts'"),
        ("kernel", "args", [1, 2], "args"),
        ("kernel", "args", "x", "args"),
    ],
)
def test_wrong_types_are_one_line_errors(
    tmp_path: Path, capfd, cat: str, key: str, value, expected: str
) -> None:
    message = _error(tmp_path, capfd, _edit(cat, key, value)(_events()))
    assert expected in message, message


@pytest.mark.parametrize("key", ["stream", "device"])
@pytest.mark.parametrize("value", [[1], {"s": 1}, "7x", 1.5e300, 10**30])
def test_args_stream_of_the_wrong_type(tmp_path: Path, capfd, key: str, value) -> None:
    events = _events()
    _first(events, "kernel")["args"][key] = value
    assert key in _error(tmp_path, capfd, events)


@pytest.mark.parametrize("first_ts", ["1e30", "-1e30", "1e999", "NaN", "Infinity", "-Infinity"])
def test_unusable_first_timestamp(tmp_path: Path, capfd, first_ts: str) -> None:
    events = _events()
    text = json.dumps({"traceEvents": events})
    first = next(e for e in events if "ts" in e and e.get("ph") == "X")
    old = f'"ts": {json.dumps(first["ts"])}'
    text = text.replace(old, f'"ts": {first_ts}', 1)
    message = _error(tmp_path, capfd, text)
    assert "'ts'" in message or "not valid JSON" in message, message


def test_list_phase_and_odd_categories_are_left_out(tmp_path: Path, capfd) -> None:
    # Events that no table reads may be of any shape: they are skipped, the rest is analysed.
    reference = _outcome(_write(tmp_path, _events(), "ref.json"), capfd)
    events = _events()
    events += [
        {"ph": ["X"], "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "pid": 0, "tid": 7},
        {"ph": {"X": 1}, "cat": "cpu_op", "name": "x", "ts": 1, "dur": 1},
        {"ph": "X", "cat": {"a": "kernel"}, "name": {"n": 1}, "ts": "x", "dur": 1},
        {"ph": "X", "cat": ["kernel"], "name": [], "ts": None},
        {"ph": "i", "cat": "kernel", "name": [1], "tid": {}},
    ]
    path = _write(tmp_path, events)
    result = _outcome(path, capfd)
    assert isinstance(result, dict), result
    assert f"{path}: 2 complete events with a list or object as 'cat' were left out" in result["warnings"]
    assert result["devices"] == reference["devices"]
    assert result["syncs"] == reference["syncs"]


@pytest.mark.parametrize("where", ["skipped", "name", "top"])
def test_nesting_deeper_than_a_thousand_levels(tmp_path: Path, capfd, where: str) -> None:
    # msgspec's depth limit follows the interpreter's (~1000 on 3.11, higher from 3.12): either the
    # value is refused as too deep, or it is read and then refused (or skipped) by its type.
    deep = "[" * 1200 + "]" * 1200
    events = json.dumps(_events())
    if where == "skipped":
        text = events.replace('"ph": "X"', f'"deep": {deep}, "ph": "X"', 1)
    elif where == "name":
        text = events.replace('"name": ', f'"name": {deep}, "x": ', 1)
    else:
        text = events[:-1] + f", {deep}]"
    result = _outcome(_write(tmp_path, '{"traceEvents": ' + text + "}"), capfd)
    if isinstance(result, str):
        expected = {"skipped": "nested too deeply", "name": "'name'", "top": "not an object"}[where]
        assert "nested too deeply" in result or expected in result, result
    else:
        assert where == "skipped", result


def test_deep_metadata(tmp_path: Path, capfd) -> None:
    deep = "[" * 3000 + "]" * 3000
    text = '{"distributedInfo": ' + deep + ', "traceEvents": ' + json.dumps(_events()) + "}"
    assert "nested too deeply" in _error(tmp_path, capfd, text)


def test_deep_metadata_the_analysis_does_not_read_is_skipped(tmp_path: Path, capfd) -> None:
    deep = "[" * 3000 + '"]}\\\\"' + "]" * 3000
    text = '{"deviceProperties": ' + deep + ', "traceEvents": ' + json.dumps(_events()) + "}"
    result = _outcome(_write(tmp_path, text), capfd)
    assert isinstance(result, dict) and result["inputs"][0]["events"] == len(_events()), result


def test_unbalanced_skipped_metadata_is_refused(tmp_path: Path, capfd) -> None:
    text = '{"deviceProperties": [1]], "traceEvents": ' + json.dumps(_events()) + "}"
    assert "not valid JSON" in _error(tmp_path, capfd, text)


@pytest.mark.parametrize("escape", ["\\ud800", "\\udfff", "x\\ud83dy"])
def test_lone_surrogate_in_a_name(tmp_path: Path, capfd, escape: str) -> None:
    text = json.dumps({"traceEvents": _events()}).replace('"name": "kA"', f'"name": "k{escape}A"', 1)
    message = _error(tmp_path, capfd, text)
    assert "surrogate" in message and escape.strip("xy") in message, message


def test_paired_surrogates_are_text(tmp_path: Path, capfd) -> None:
    text = json.dumps({"traceEvents": _events()}).replace('"name": "kA"', '"name": "k\\ud83d\\ude00A"', 1)
    result = _outcome(_write(tmp_path, text), capfd)
    assert isinstance(result, dict)


def test_events_that_are_not_objects(tmp_path: Path, capfd) -> None:
    events: list = _events()
    events.insert(3, [1, 2])
    message = _error(tmp_path, capfd, events)
    assert "event #3 is not an object" in message, message


def test_cli_exit_2_with_one_line(tmp_path: Path) -> None:
    events = _edit("kernel", "name", {"a": [1]})(_events())
    path = _write(tmp_path, events)
    done = subprocess.run(
        [sys.executable, "-c", "from bubblescope.cli import main; main()", "analyze", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "'name'" in lines[0], done.stderr
