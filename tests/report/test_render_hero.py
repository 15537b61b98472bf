"""tools/render_hero.py (the README's image): a PNG of the requested size from a committed sample, and a
one-line exit 2 for a missing sample."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests.report.helpers import chromium_path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tools/render_hero.py"
SAMPLE = REPO / "reports/samples/ablation-ling3-flash-e256-h200/runs/base.json"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=180, check=False
    )


@pytest.mark.browser
@pytest.mark.skipif(chromium_path() is None, reason="chromium not installed (apt-get install chromium)")
@pytest.mark.skipif(not SAMPLE.is_file(), reason="committed e256 sample missing")
def test_hero_png_of_the_requested_size(tmp_path: Path) -> None:
    out = tmp_path / "hero.png"
    done = _run("--out", str(out), "--width", "900", "--height", "700")
    assert done.returncode == 0, done.stderr
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])  # IHDR
    assert (width, height) == (900, 700)
    assert not list(tmp_path.glob("*.partial.png"))


def test_missing_sample_is_one_line_exit_2(tmp_path: Path) -> None:
    done = _run("--sample", str(tmp_path / "nope.json"), "--out", str(tmp_path / "x.png"))
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "no such sample" in done.stderr
    assert not (tmp_path / "x.png").exists()
