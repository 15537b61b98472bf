"""The examples/profile scripts on CPU: they run, and their reads are named at the marked lines."""

from __future__ import annotations

import importlib.util
import runpy
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bubblescope.cli import app
from tests.profile.helpers import line_of, load_outputs, rows_by_site

pytest.importorskip("torch")
pytestmark = pytest.mark.cpu_only

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "profile"
runner = CliRunner()


@pytest.mark.slow
def test_gpt_fast_loop_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = EXAMPLES / "gpt_fast_loop.py"
    argv = [
        str(script),
        "--out",
        str(tmp_path),
        "--no-compile",
        "--tokens",
        "8",
        "--active",
        "4",
        "--warmup",
        "1",
    ]
    monkeypatch.setattr(sys, "argv", argv)
    runpy.run_path(str(script), run_name="__main__")
    analysis, record = load_outputs(tmp_path)
    assert record["steps"]["recorded"] == 4
    expected = f"gpt_fast_loop.py({line_of(script, 'READ-token')}): main"
    assert set(rows_by_site(analysis)) == {(expected, "Tensor.item")}
    assert analysis["summary"]["blocking_reads_per_step"] == 1.0


def test_empty_cache_loop_cli_steps_from_bubblescope_step(tmp_path: Path) -> None:
    script = EXAMPLES / "empty_cache_loop.py"
    result = runner.invoke(app, ["profile", "--out", str(tmp_path), "--", "python", str(script), "4"])
    assert result.exit_code == 0, result.output
    analysis, record = load_outputs(tmp_path)
    assert analysis["step_source"] == "bubblescope.step"
    assert record["steps"]["recorded"] == 4
    # On CPU empty_cache is not called; the one read is the final float() after the loop.
    rows = analysis["syncs"]
    assert [(r["op"], r["per_step"]) for r in rows] == [("Tensor.__float__", 0.0)]


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers not installed")
def test_hf_generate_reads_named_in_transformers_source(tmp_path: Path) -> None:
    import transformers.generation.utils as generation_utils

    script = EXAMPLES / "hf_generate.py"
    argv = ["profile", "--out", str(tmp_path), "--step-frame", "prepare_inputs_for_generation"]
    result = runner.invoke(
        app, [*argv, "--active", "4", "--warmup", "1", "--", "python", str(script), "--new-tokens", "8"]
    )
    assert result.exit_code == 0, result.output
    analysis, _ = load_outputs(tmp_path)
    source = Path(generation_utils.__file__).read_text().splitlines()
    stop_lines = [
        n for n, text in enumerate(source, 1) if "return bool(unfinished_sequences.max() == 0)" in text
    ]
    user_site = f"hf_generate.py({line_of(script, 'GENERATE-CALL')}): main"
    read_ats = {r["read_at"] for r in analysis["syncs"] if r["site"] == user_site}
    assert f"transformers/generation/utils.py({stop_lines[0]}): __call__" in read_ats


@pytest.mark.skipif(importlib.util.find_spec("transformers") is not None, reason="transformers is installed")
def test_hf_example_skips_cleanly_without_transformers() -> None:
    import subprocess

    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "hf_generate.py")], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0
    assert "transformers is not installed" in result.stderr
