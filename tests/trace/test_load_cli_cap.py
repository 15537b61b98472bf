"""`--max-decompressed-mb` on every command that reads traces: a trace over the cap is one line, exit 2."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bubblescope.cli import app
from tests.trace import scenarios


def _bubblescope(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bubblescope", *args], capture_output=True, text=True, timeout=180
    )


def _big_trace(tmp_path: Path) -> Path:
    # A real trace padded past 1 MiB of JSON text with a long (valid) metadata string.
    text = scenarios.item_sync().trace()
    text["padding"] = "x" * (2 << 20)
    path = tmp_path / "trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps(text).encode()))
    return path


@pytest.mark.parametrize(
    "command",
    [
        ["analyze", "{trace}"],
        ["report", "{trace}", "--format", "markdown"],
        ["gate", "--baseline", "{trace}", "--current", "{trace}"],
    ],
    ids=["analyze", "report", "gate"],
)
def test_trace_over_the_cap_is_refused(tmp_path: Path, command: list[str]) -> None:
    trace = _big_trace(tmp_path)
    args = [part.replace("{trace}", str(trace)) for part in command]
    refused = _bubblescope(*args, "--max-decompressed-mb", "1")
    assert refused.returncode == 2, refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "more than the 1 MiB limit" in lines[0], refused.stderr
    accepted = _bubblescope(*args, "--max-decompressed-mb", "8")
    assert "limit" not in accepted.stderr and "Traceback" not in accepted.stderr, accepted.stderr


def test_ablate_takes_the_option_and_rejects_a_bad_value(tmp_path: Path) -> None:
    # rich sizes the help table from COLUMNS, not from the runner's terminal width.
    help_text = CliRunner().invoke(app, ["ablate", "--help"], env={"COLUMNS": "200"}).output
    assert "--max-decompressed-mb" in help_text
    bad = _bubblescope("analyze", str(_big_trace(tmp_path)), "--max-decompressed-mb", "0")
    assert bad.returncode == 2 and "must be positive" in bad.stderr, bad.stderr
