"""`bubblescope run` piped (not a terminal) prints plain lines: a noisy TPOT says so there too, the
interval uses the same dash as every other surface, and counts take their plural."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from bubblescope.cli.run import _print_plain
from tests.report.helpers import MINIMAL_RUN_FILE


def _record(tpot_ms: float, lo_ms: float, hi_ms: float, tokens: int) -> dict:
    record = copy.deepcopy(json.loads(MINIMAL_RUN_FILE.read_text()))
    record["summary"].update(tpot_ms=tpot_ms, tpot_ci95_ms=[lo_ms, hi_ms], tokens=tokens)
    return record


def test_plain_line_flags_a_noisy_tpot(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # The CPU debug run of the README walk: 67.28 ms in [45.97, 99.86].
    _print_plain(_record(67.28, 45.97, 99.86, 192), tmp_path, [])
    first = capsys.readouterr().out.splitlines()[0]
    assert "45.97\u00a0ms – 99.86\u00a0ms" in first and "(noisy: ±" in first and first.endswith("192 tokens")


def test_plain_line_of_a_tight_tpot_has_no_noise_note(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _print_plain(_record(7.93, 7.867, 8.001, 1), tmp_path, [])
    first = capsys.readouterr().out.splitlines()[0]
    assert "noisy" not in first and first.endswith("1 token")
