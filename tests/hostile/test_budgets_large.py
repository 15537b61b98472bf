"""The inputs of issue 28's report at their reported sizes, each in a fresh `python -m bubblescope`:
exit 0 or 2 with one line, within 60 s and 2 GB (cli_runner's contract). Files are written to a
temporary folder and deleted after each case. Long (minutes in all): `pytest -m slow`."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.hostile import large_inputs as gen
from tests.hostile.cli_runner import run_subprocess

pytestmark = pytest.mark.slow


def _analyze(path: Path) -> list[str]:
    return ["analyze", str(path), "--format", "json"]


CASES: dict[str, tuple[Callable[[Path], Path], Callable[[Path], list[str]], int]] = {
    "metadata strings 180 MiB": (lambda d: gen.metadata_strings(d / "t.json", 180 << 20), _analyze, 0),
    "nested metadata 60 MiB": (lambda d: gen.metadata_nested(d / "t.json", 60 << 20), _analyze, 0),
    "args list 100 MB": (lambda d: gen.args_bytes(d / "t.json", 100_000_000), _analyze, 2),
    "args object 100 MB": (lambda d: gen.args_bytes(d / "t.json", 100_000_000, as_list=False), _analyze, 0),
    "50,000 files": (lambda d: gen.many_files(d / "f", 50_000), _analyze, 2),
    "5 M gzip members": (lambda d: gen.gzip_members(d / "t.json.gz", 5_000_000), _analyze, 2),
    "3 M orphan kernels": (lambda d: gen.orphan_kernels(d / "t.json", 3_000_000), _analyze, 2),
    "200,000 repeats (gate)": (
        lambda d: gen.record_repeats(d / "r.json", 200_000),
        lambda p: ["gate", "--baseline", str(p), "--current", str(p), "--format", "json"],
        2,
    ),
    "200,000 repeats (diff)": (
        lambda d: gen.record_repeats(d / "r.json", 200_000),
        lambda p: ["diff", str(p), str(p), "--format", "json"],
        2,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_issue_sized_input_is_bounded(tmp_path: Path, case: str) -> None:
    write, command, expected = CASES[case]
    folder = tmp_path / "input"
    folder.mkdir()
    try:
        outcome = run_subprocess(command(write(folder)))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert not outcome.problems(), (case, outcome.problems(), outcome.stderr[-500:])
    assert outcome.exit_code == expected, (case, outcome.exit_code, outcome.stderr[-500:])
