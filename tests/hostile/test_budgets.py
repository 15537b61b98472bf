"""Every reader budget refuses in one line naming the option that lifts it, before the work is done
(issue 28). Small sizes here; the large inputs of the issue run under `slow` in test_budgets_large.py."""

from __future__ import annotations

from pathlib import Path

import pytest

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
