"""`bubblescope ablate` through typer's CliRunner: ablation.json, records, resume, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from bubblescope.cli import app
from bubblescope.errors import BubblescopeError

TOY = ["--workload", "bubblescope.examples.toy_workload:make_workload", "--preset", "tiny"]
FAST = ["--steps", "6", "--warmup", "1", "--repeats", "2", "--profile-steps", "1"]


def test_ablate_writes_manifest_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "abl"
    args = [
        "ablate",
        *TOY,
        *FAST,
        "--toggles",
        "no_readback,planted_sync",
        "--order",
        "planted_sync,no_readback",
        "--out",
        str(out),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "ablation.json").read_text())
    assert manifest["schema"] == "bubblescope.ablation/1"
    assert manifest["order"] == ["planted_sync", "no_readback"]
    assert len(manifest["configs"]) == 4 and all(c["status"] == "done" for c in manifest["configs"])
    assert all((out / c["record"]).is_file() for c in manifest["configs"])
    rows = {r["name"]: r for r in manifest["attribution"]["switches"]}
    assert rows["planted_sync"]["removed_reads_per_step"] and rows["no_readback"]["removed_reads_per_step"]
    assert "interaction" in result.output
    # Piped stderr (not a terminal): one line per finished repeat and configuration, in the order they
    # happened, rather than a bar that prints only its final state.
    progress = [
        line for line in result.stderr.splitlines() if line.startswith(("measuring", "configuration"))
    ]
    assert progress[0] == "measuring 4 configurations of 2 timed repeats", progress
    expected = []
    for index in range(1, 5):
        expected += [f"configuration {index}/4: timed repeat {r}/2 done" for r in (1, 2)]
        expected.append(f"configuration {index}/4 done: ")
    assert [line[: len(want)] for line, want in zip(progress[1:], expected, strict=True)] == expected, (
        progress
    )

    again = CliRunner().invoke(app, args + ["--format", "json"])
    assert again.exit_code == 0
    assert "4 configurations on disk, 0 to measure" in " ".join(again.stderr.split())
    assert json.loads(again.stdout)["attribution"] == manifest["attribution"]


def test_ablate_unknown_toggle_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["ablate", *TOY, "--toggles", "no_readback,bogus", "--out", str(tmp_path)]
    )
    assert isinstance(result.exception, BubblescopeError) and result.exception.exit_code == 2
    assert "valid switches" in str(result.exception)
