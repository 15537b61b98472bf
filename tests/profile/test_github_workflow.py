"""examples/github-actions/bubblescope-profile-gate.yml: its steps' `run:` blocks, run with bash on CPU.

The workflow's own commands (not a copy) are read from the file and run in its order with its `env:`,
`RUNNER_TEMP` and `GITHUB_STEP_SUMMARY` as a runner sets them: the gate step on two profiles of the toy
loop (fast), and the whole base → pull request → gate sequence on two checkouts (slow: two profiled runs).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.profile.conftest import TOY
from tests.profile.helpers import line_of

WORKFLOW = (
    Path(__file__).resolve().parents[2] / "examples" / "github-actions" / "bubblescope-profile-gate.yml"
)
EXTRA_LINE = f"toy_decode.py({line_of(TOY, 'READ-extra')}): main"


def workflow_env() -> dict[str, str]:
    """The job's `env:` block (KEY: value lines, quotes dropped)."""
    text = WORKFLOW.read_text()
    block = re.search(r"\n    env:\n((?:      .*\n|\s*#.*\n)+)", text)
    assert block, "no job env block"
    pairs = re.findall(r"^      ([A-Z_]+): ?(.*)$", block.group(1), flags=re.M)
    return {key: value.strip().strip('"') for key, value in pairs}


def workflow_steps() -> dict[str, tuple[str | None, str]]:
    """name -> (working-directory or None, the `run: |` script) of each step that runs a script."""
    steps: dict[str, tuple[str | None, str]] = {}
    for chunk in re.split(r"\n      - ", WORKFLOW.read_text())[1:]:
        name = re.match(r"name: (.*)", chunk)
        run = re.search(r"\n        run: \|\n((?:          .*\n|\n)+)", chunk + "\n")
        if name and run:
            folder = re.search(r"\n        working-directory: (.*)", chunk)
            script = "\n".join(line[10:] for line in run.group(1).splitlines())
            steps[name.group(1)] = (folder.group(1) if folder else None, script)
    return steps


def run_step(name: str, root: Path) -> subprocess.CompletedProcess:
    folder, script = workflow_steps()[name]
    env = {
        **workflow_env(),
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "RUNNER_TEMP": str(root / "runner_temp"),
        "GITHUB_STEP_SUMMARY": str(root / "summary.md"),
        "HOME": os.environ.get("HOME", str(root)),
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
    }
    # GitHub runs `run:` blocks with `bash -e {0}`.
    return subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=root / folder if folder else root,
        env=env,
        capture_output=True,
        text=True,
    )


def test_the_workflow_profiles_both_sides_then_gates() -> None:
    steps = workflow_steps()
    assert list(steps)[-3:] == ["Profile the base", "Profile the pull request", "Gate"]
    assert workflow_env()["SCRIPT"] == "examples/profile/toy_decode.py"
    assert '>> "$GITHUB_STEP_SUMMARY"' in steps["Gate"][1]


@pytest.mark.parametrize(("current", "status"), [("toy_extra", 1), ("toy", 0)])
def test_gate_step_fails_on_an_added_read_and_writes_the_summary(
    toy_profiles: dict[str, Path], tmp_path: Path, current: str, status: int
) -> None:
    (tmp_path / "runner_temp").mkdir()
    shutil.copytree(toy_profiles["toy"], tmp_path / "runner_temp" / "base")
    shutil.copytree(toy_profiles[current], tmp_path / "runner_temp" / "head")
    result = run_step("Gate", tmp_path)
    assert result.returncode == status, result.stderr
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("## ") and summary == (tmp_path / "runner_temp" / "gate.md").read_text()
    assert ("more reads" in summary) == (status == 1)
    assert (EXTRA_LINE.replace("_", "\\_") in summary) == (status == 1)


@pytest.mark.slow
def test_the_whole_workflow_on_two_checkouts(tmp_path: Path) -> None:
    """base: the toy loop as it is; head: a pull request that turns its extra read on."""
    for side in ("base", "head"):
        target = tmp_path / side / "examples" / "profile" / "toy_decode.py"
        target.parent.mkdir(parents=True)
        source = TOY.read_text()
        if side == "head":
            source = source.replace("if args.extra_read:", "if True:")
        target.write_text(source)
    for name in ("Profile the base", "Profile the pull request"):
        result = run_step(name, tmp_path)
        assert result.returncode == 0, result.stderr
    gate = run_step("Gate", tmp_path)
    assert gate.returncode == 1, gate.stderr
    summary = (tmp_path / "summary.md").read_text()
    assert "more reads" in summary and EXTRA_LINE.replace("_", "\\_") in summary
