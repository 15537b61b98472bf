"""Every reader budget refuses in one line naming the option that lifts it, before the work is done
(issue 28). Small sizes here; the large inputs of the issue run under `slow` in test_budgets_large.py."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hostile import large_inputs
from tests.hostile.cli_runner import Outcome, run_in_process


def _analyze(*args: str) -> Outcome:
    return run_in_process(["analyze", *args, "--format", "json"])


def _one_line_error(outcome: Outcome) -> str:
    """The one stderr line of an exit-2 outcome (the fuzzer's contract checked too)."""
    assert outcome.exit_code == 2 and not outcome.problems(), (outcome.problems(), outcome.stderr)
    return outcome.stderr.strip()


def _fine(outcome: Outcome) -> None:
    assert outcome.exit_code == 0 and not outcome.problems(), (outcome.problems(), outcome.stderr)


def test_folder_over_the_file_cap_is_refused_naming_max_files(tmp_path: Path) -> None:
    folder = large_inputs.many_files(tmp_path / "f", 3)
    line = _one_line_error(_analyze(str(folder), "--max-files", "2"))
    assert "holds 3 trace files" in line and "--max-files" in line
    _fine(_analyze(str(folder), "--max-files", "3"))


@pytest.mark.parametrize("command", ["report", "diff", "gate"])
def test_every_trace_reading_command_has_max_files(tmp_path: Path, command: str) -> None:
    folder = large_inputs.many_files(tmp_path / "f", 3)
    trace = next(folder.iterdir())
    args = {
        "report": ["report", str(folder), "--format", "markdown"],
        "diff": ["diff", str(folder), str(trace), "--format", "json"],
        "gate": ["gate", "--baseline", str(trace), "--current", str(trace)],
    }[command]
    outcome = run_in_process([*args, "--max-files", "2"])
    if command == "gate":
        # A gate side is one file: the option is there and a single file is within any cap.
        _fine(outcome)
        return
    assert "--max-files" in _one_line_error(outcome)


def test_gzip_members_are_bounded_by_the_text_cap(tmp_path: Path) -> None:
    # At a 1 MiB text cap the bound is its floor, 1024 members.
    over = large_inputs.gzip_members(tmp_path / "over.json.gz", 1100)
    line = _one_line_error(_analyze(str(over), "--max-decompressed-mb", "1"))
    assert "gzip members" in line and "--max-decompressed-mb" in line
    within = large_inputs.gzip_members(tmp_path / "within.json.gz", 1000)
    _fine(_analyze(str(within), "--max-decompressed-mb", "1"))


def test_metadata_the_analysis_does_not_read_is_skipped_at_any_size(tmp_path: Path) -> None:
    path = large_inputs.metadata_strings(tmp_path / "meta.json", 6 << 20)
    _fine(_analyze(str(path)))


def test_nested_metadata_and_big_args_are_read(tmp_path: Path) -> None:
    for path in (
        large_inputs.metadata_nested(tmp_path / "nested.json", 2 << 20),
        large_inputs.args_bytes(tmp_path / "args.json", 2 << 20, as_list=False),
    ):
        _fine(_analyze(str(path)))


@pytest.mark.parametrize("command", ["gate", "diff", "report"])
def test_record_over_the_sample_cap_is_refused_before_statistics(tmp_path: Path, command: str) -> None:
    record = large_inputs.record_repeats(tmp_path / "record.json", 40)
    samples = 40 * len(large_inputs.real_record()["samples_ns"][0])
    args = {
        "gate": ["gate", "--baseline", str(record), "--current", str(record)],
        "diff": ["diff", str(record), str(record), "--format", "json"],
        "report": ["report", str(record), "--format", "markdown"],
    }[command]
    line = _one_line_error(run_in_process([*args, "--max-samples", str(samples - 1)]))
    assert f"holds {samples} samples (40 repeats)" in line and "--max-samples" in line
    _fine(run_in_process([*args, "--max-samples", str(samples)]))


def test_document_depth_is_refused_from_the_text(tmp_path: Path) -> None:
    deep = tmp_path / "analysis.json"
    deep.write_text('{"schema": "bubblescope.analysis/1", "x": ' + "[" * 70 + "]" * 70 + "}")
    line = _one_line_error(run_in_process(["report", str(deep), "--format", "markdown"]))
    assert "nested deeper than 64 levels" in line


def test_events_are_bounded_by_the_text_cap_while_reading(tmp_path: Path) -> None:
    # 1 MiB of text allows 3640 events (one per 288 bytes), however densely they are written.
    over = large_inputs.orphan_kernels(tmp_path / "over.json", 4200)
    line = _one_line_error(_analyze(str(over), "--max-decompressed-mb", "1"))
    assert "more than 3640 events" in line and "--max-decompressed-mb" in line
    _fine(
        _analyze(
            str(large_inputs.orphan_kernels(tmp_path / "within.json", 3600)), "--max-decompressed-mb", "1"
        )
    )


# Each input kind of issue 28 at a size drawn small (1 to 4 units of its scale): the fuzzer's contract
# (exit 0 or 2, one line on 2, no traceback, bounded time and memory) holds for every draw.
KIND_WRITERS = {
    "events": lambda d, n: large_inputs.many_events(d / "t.json", 400 * n),
    "gaps": lambda d, n: large_inputs.many_gaps(d / "t.json", 400 * n),
    "metadata strings": lambda d, n: large_inputs.metadata_strings(d / "t.json", n << 20),
    "nested metadata": lambda d, n: large_inputs.metadata_nested(d / "t.json", n << 19),
    "args list": lambda d, n: large_inputs.args_bytes(d / "t.json", n << 19),
    "args object": lambda d, n: large_inputs.args_bytes(d / "t.json", n << 19, as_list=False),
    "ranks": lambda d, n: large_inputs.many_ranks(d / "r", n, 200),
    "files": lambda d, n: large_inputs.many_files(d / "f", n),
    "gzip members": lambda d, n: large_inputs.gzip_members(d / "t.json.gz", 300 * n),
    "orphan kernels": lambda d, n: large_inputs.orphan_kernels(d / "t.json", 300 * n),
}


@settings(
    max_examples=6,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(kind=st.sampled_from(sorted(KIND_WRITERS)), units=st.integers(1, 4))
def test_every_generated_kind_keeps_the_contract(tmp_path: Path, kind: str, units: int) -> None:
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    outcome = _analyze(str(KIND_WRITERS[kind](folder, units)), "--max-files", "3")
    assert outcome.exit_code in (0, 2) and not outcome.problems(), (kind, units, outcome.problems())
