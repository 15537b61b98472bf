"""Special files and bombs (issue 18 §3, §4, the BOM of §10): only regular files are read, what is
skipped is named, and a bomb is refused after a bounded amount of work and memory."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bubblescope.analysis.traces import analyze_traces
from bubblescope.errors import TraceError
from bubblescope.trace.load import expand_trace_paths
from tests.trace import scenarios

# Each case runs in a child process with a time limit: a regression must fail, not hang the suite.
_CHILD = """
import json, sys
from bubblescope.analysis.traces import analyze_traces
from bubblescope.errors import TraceError
try:
    result = analyze_traces(sys.argv[1:])
    out = {"warnings": result["warnings"], "syncs": len(result["syncs"])}
except TraceError as exc:
    out = {"error": str(exc)}
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec from the forked (large) pytest parent.
with open("/proc/self/status") as status:
    peak_kb = next((int(l.split()[1]) for l in status if l.startswith("VmHWM:")), 0)
out["peak_rss_mb"] = peak_kb / 1024
print(json.dumps(out))
"""


def _analyze_in_child(*paths: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, *map(str, paths)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _trace(path: Path) -> Path:
    return scenarios.item_sync().write(path)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_in_a_folder_is_skipped_and_named(tmp_path: Path) -> None:
    _trace(tmp_path / "rank0.json")
    os.mkfifo(tmp_path / "rank1.json")
    result = _analyze_in_child(tmp_path)
    assert result["syncs"] == 1
    assert any("rank1.json: skipped (a FIFO (named pipe)" in w for w in result["warnings"]), result


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_given_directly_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "trace.json")
    result = _analyze_in_child(tmp_path / "trace.json")
    assert "a FIFO (named pipe), not a regular file" in result["error"], result


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_symlink_to_dev_zero(tmp_path: Path) -> None:
    _trace(tmp_path / "a_trace.json")
    (tmp_path / "z_trace.json").symlink_to("/dev/zero")
    result = _analyze_in_child(tmp_path)
    assert result["syncs"] == 1
    assert any(
        "z_trace.json: skipped (a character device (through a symlink)" in w for w in result["warnings"]
    )
    direct = _analyze_in_child(tmp_path / "z_trace.json")
    assert "a character device (through a symlink), not a regular file" in direct["error"], direct
    assert direct["peak_rss_mb"] < 300


def test_broken_symlink_in_a_folder(tmp_path: Path) -> None:
    _trace(tmp_path / "rank0.json")
    (tmp_path / "rank1.json").symlink_to(tmp_path / "missing.json")
    files = expand_trace_paths([tmp_path])
    assert [p.name for p in files] == ["rank0.json"]
    assert files.skipped == [f"{tmp_path / 'rank1.json'}: skipped (a symlink to nothing)"]


def test_folder_of_only_special_files(tmp_path: Path) -> None:
    (tmp_path / "a.json").symlink_to(tmp_path / "nowhere")
    with pytest.raises(TraceError, match="holds no .json or .json.gz trace .skipped 1"):
        expand_trace_paths([tmp_path])


def test_zero_bomb_is_refused_at_its_first_block(tmp_path: Path) -> None:
    # 100 gzip members of 100 MiB of zeros: a 10 MB file that inflates to 10 GiB.
    member = gzip.compress(bytes(100 << 20), compresslevel=9)
    path = tmp_path / "bomb.json.gz"
    with open(path, "wb") as handle:
        for _ in range(max(1, (10 << 20) // len(member))):
            handle.write(member)
    assert path.stat().st_size >= 9 << 20
    result = _analyze_in_child(path)
    assert "not valid JSON" in result["error"], result
    assert result["peak_rss_mb"] < 300, result


def test_valid_json_bomb_stops_at_the_cap(tmp_path: Path) -> None:
    # Whitespace is valid JSON: the cap, not the parser, must stop it, holding little of it.
    path = tmp_path / "spaces.json.gz"
    path.write_bytes(gzip.compress(b"[" + b" " * (256 << 20) + b"]", compresslevel=9))
    with pytest.raises(TraceError, match="more than the 64 MiB limit"):
        analyze_traces([path], max_decompressed_bytes=64 << 20)


def test_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    plain = _trace(tmp_path / "plain.json")
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    gz = tmp_path / "bom.json.gz"
    gz.write_bytes(gzip.compress(bom.read_bytes()))
    expected = analyze_traces([plain])
    for path in (bom, gz):
        result = analyze_traces([path])
        assert (result["devices"], result["syncs"]) == (expected["devices"], expected["syncs"])


@pytest.mark.parametrize("mark", [b"\xff\xfe", b"\xfe\xff"])
def test_utf16_byte_order_mark_is_named(tmp_path: Path, mark: bytes) -> None:
    text = json.dumps(scenarios.item_sync().trace())
    path = tmp_path / "utf16.json"
    path.write_bytes(mark + text.encode("utf-16-le" if mark == b"\xff\xfe" else "utf-16-be"))
    with pytest.raises(TraceError, match="UTF-16 byte order mark"):
        analyze_traces([path])


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("command", [["report", "{path}", "--format", "markdown"], ["analyze", "{path}"]])
def test_special_files_named_by_report_and_analyze(tmp_path: Path, command: list[str]) -> None:
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    for name, kind in (("fifo.json", "a FIFO (named pipe)"), ("zero.json", "a character device")):
        args = [part.replace("{path}", str(tmp_path / name)) for part in command]
        done = subprocess.run(
            [sys.executable, "-m", "bubblescope", *args], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and kind in lines[0] and "not a regular file" in lines[0], done.stderr
