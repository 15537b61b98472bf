"""`bubblescope profile -- python script.py ...` on a CPU toy script that was not written for bubblescope."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bubblescope.cli import app
from bubblescope.errors import ConfigError
from tests.profile.helpers import SCRIPTS, line_of, load_outputs, rows_by_site, site, trace_events

pytest.importorskip("torch")
pytestmark = pytest.mark.cpu_only

runner = CliRunner()
SCRIPT = "cli_loop.py"
SCRIPT_PATH = str(SCRIPTS / SCRIPT)
REPO_ROOT = Path(__file__).resolve().parents[2]


def _profile(out: Path, *options: str, tokens: int = 6, mode: str = "ok"):
    argv = ["profile", "--out", str(out), "--active", "3", "--warmup", "1", *options]
    return runner.invoke(app, [*argv, "--", "python", SCRIPT_PATH, str(tokens), mode])


def _expected_rows() -> set[tuple[str, str]]:
    return {
        (site(SCRIPT, "READ-bool", "decode_one_token"), "Tensor.__bool__"),
        (site(SCRIPT, "READ-tolist", "sample_ids"), "Tensor.tolist"),
    }


def test_step_frame_steps_and_exact_lines(tmp_path: Path) -> None:
    result = _profile(tmp_path, "--step-frame", "decode_one_token")
    assert result.exit_code == 0, result.output
    analysis, record = load_outputs(tmp_path)
    assert record["steps"] == {"started": 6, "recorded": 3, "trailing_step_dropped": False}
    assert record["command"][0] == "python"
    # What the user reads at the end: each read's line and count per step.
    bool_site = site(SCRIPT, "READ-bool", "decode_one_token")
    assert f"  1.0/step  {bool_site} [Tensor.__bool__]" in result.output
    # Each step runs from one decode_one_token call to the next, so sample_ids' read is inside it.
    assert [s["blocking_reads"] for s in analysis["steps"]] == [2, 2, 2]
    rows = rows_by_site(analysis)
    assert set(rows) == _expected_rows()
    tolist = rows[(site(SCRIPT, "READ-tolist", "sample_ids"), "Tensor.tolist")]
    assert tolist["stack"] == [
        site(SCRIPT, "READ-tolist", "sample_ids"),
        site(SCRIPT, "CALL-sample", "main"),
    ] + [f"{SCRIPT}({line_of(SCRIPT, 'CALL-main')}): <module>"]


def test_explicit_bubblescope_step_calls(tmp_path: Path) -> None:
    result = _profile(tmp_path, tokens=5, mode="explicit")
    assert result.exit_code == 0, result.output
    analysis, record = load_outputs(tmp_path)
    assert analysis["step_source"] == "bubblescope.step"
    assert record["settings"]["record_all"] is True
    # The last step ran until the script ended, so it is left out (and said so).
    assert [s["blocking_reads"] for s in analysis["steps"]] == [2] * 4
    assert any("last step ran until the session closed" in w for w in analysis["warnings"])
    assert set(rows_by_site(analysis)) == _expected_rows()


def test_step_marker(tmp_path: Path) -> None:
    result = _profile(tmp_path, "--step-marker", r"decode_step_\d+", tokens=4)
    assert result.exit_code == 0, result.output
    analysis, _ = load_outputs(tmp_path)
    assert analysis["step_source"] == r"regex:decode_step_\d+"
    assert [s["name"] for s in analysis["steps"]] == [f"decode_step_{i}" for i in range(4)]
    assert [s["blocking_reads"] for s in analysis["steps"]] == [2] * 4
    assert set(rows_by_site(analysis)) == _expected_rows()


def test_exit_code_and_argv_preserved(tmp_path: Path) -> None:
    result = _profile(tmp_path, "--step-frame", "decode_one_token", mode="exit3")
    assert result.exit_code == 3, result.output
    _, record = load_outputs(tmp_path)
    assert record["exit"] == {"code": 3, "error": None}


def test_script_that_raises_keeps_trace_and_analysis(tmp_path: Path) -> None:
    result = _profile(tmp_path, "--step-frame", "decode_one_token", mode="raise")
    assert result.exit_code == 1
    # The script's own traceback, as python prints it: from its first frame, none of bubblescope's.
    traceback = result.output[result.output.index("Traceback (most recent call last):") :]
    assert f'{SCRIPT}", line {line_of(SCRIPT, "CALL-main")}, in <module>' in traceback.splitlines()[1]
    assert f"line {line_of(SCRIPT, 'RAISE')}, in main" in traceback
    assert "RuntimeError: planted failure at token 4" in traceback
    assert "bubblescope" not in traceback.split("RuntimeError")[0]
    analysis, record = load_outputs(tmp_path)
    assert record["exit"]["code"] == 1 and record["exit"]["error"].startswith("RuntimeError: planted")
    assert record["steps"]["recorded"] == 3
    assert set(rows_by_site(analysis)) == _expected_rows()
    assert any(e.get("name") == "bubblescope.step" for e in trace_events(tmp_path))


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bubblescope", "profile", *args],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT)},
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--", "python", "no_such_script.py"], "script not found: no_such_script.py"),
        (["--step-frame", "(", "--", "python", SCRIPT_PATH, "1", "ok"], "is not a valid regex"),
        (["--step-frame", "a", "--step-marker", "b", "--", SCRIPT_PATH], "not both"),
        (["--active", "0", "--", SCRIPT_PATH], "--active >= 1"),
        (["--timed", "8", "--step-marker", "x", "--", SCRIPT_PATH], "--timed needs step boundaries"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    result = _cli("--out", str(tmp_path), *args)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        (["--step-frame", "does_not_exist"], "--step-frame 'does_not_exist' matched no call"),
        (["--step-frame", "decode_one_token", "--warmup", "9"], "matched 2 call(s), all warm-up"),
        (["--step-marker", "nothing_.*"], "--step-marker 'nothing_.*' matched no annotation"),
    ],
)
def test_a_selector_that_matches_nothing_is_an_error(
    tmp_path: Path, selector: list[str], message: str
) -> None:
    """A ConfigError: `bubblescope.cli.main` prints it as one line and exits 2 (test_bad_input_...)."""
    argv = ["profile", "--out", str(tmp_path), *selector, "--", "python", SCRIPT_PATH, "2", "ok"]
    result = runner.invoke(app, argv)
    assert isinstance(result.exception, ConfigError), result.output
    assert message in str(result.exception) and len(str(result.exception).splitlines()) == 1
    assert (tmp_path / "profile.json").is_file()
