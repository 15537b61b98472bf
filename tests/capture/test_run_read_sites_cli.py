"""`run` / `ablate` with and without `--no-read-sites`, and `ablate --reanalyze` re-merging the stored calls.

Expected lines come from the toy workload's source text (tests/capture/toy_lines.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bubblescope.cli import app
from tests.capture.toy_lines import EXPECTED, PLANTED, TOKEN_READ

pytestmark = pytest.mark.cpu_only
TOY = ["--workload", "bubblescope.examples.toy_workload:make_workload", "--preset", "tiny"]
FAST = ["--steps", "3", "--warmup", "1", "--repeats", "1", "--profile-steps", "2"]


def _lines(record: dict) -> set[str]:
    return {e["line_exact"] for row in record["analysis"]["syncs"] for e in row.get("lines_exact") or []}


def test_run_names_exact_lines_and_no_read_sites_turns_it_off(tmp_path: Path) -> None:
    on, off = tmp_path / "on", tmp_path / "off"
    result = CliRunner().invoke(app, ["run", *TOY, *FAST, "--toggle", "planted_sync", "--out", str(on)])
    assert result.exit_code == 0, result.output
    record = json.loads((on / "record.json").read_text())
    assert _lines(record) == EXPECTED and (on / "read_calls.json.gz").is_file()
    result = CliRunner().invoke(
        app, ["run", *TOY, *FAST, "--toggle", "planted_sync", "--no-read-sites", "--out", str(off)]
    )
    assert result.exit_code == 0, result.output
    record = json.loads((off / "record.json").read_text())
    assert record["settings"]["read_sites"] is False and _lines(record) == set()
    assert not (off / "read_calls.json.gz").exists()


def test_ablate_reanalyze_merges_the_stored_calls_again(tmp_path: Path) -> None:
    out = tmp_path / "abl"
    args = ["ablate", *TOY, *FAST, "--toggles", "planted_sync", "--out", str(out), "--format", "json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    runs = out / "runs"
    keys = sorted(p.name.removesuffix(".json") for p in runs.glob("*.json") if p.name.count(".") == 1)
    assert len(keys) == 2
    for key in keys:
        assert (runs / f"{key}.read_calls.json.gz").is_file()
        # Drop what the analysis derived, as a run analysed before this change would have it.
        path = runs / f"{key}.json"
        record = json.loads(path.read_text())
        record["analysis"]["syncs"] = [
            {
                k: v
                for k, v in row.items()
                if k not in ("lines_exact", "line_exact", "read_at", "stack", "line")
            }
            for row in record["analysis"]["syncs"]
        ]
        path.write_text(json.dumps(record))
    result = CliRunner().invoke(app, ["ablate", "--reanalyze", "--out", str(out), "--format", "json"])
    assert result.exit_code == 0, result.output
    by_reads = {}
    for key in keys:
        record = json.loads((runs / f"{key}.json").read_text())
        by_reads[record["analysis"]["blocking_reads_per_step"]] = _lines(record)
    # Baseline: the token read only; planted_sync on: both planted lines.
    assert by_reads == {1.0: {f"toy_workload.py({TOKEN_READ}): step"}, 2.0: EXPECTED}
    assert f"toy_workload.py({PLANTED}): step" in EXPECTED


def test_ablate_no_read_sites(tmp_path: Path) -> None:
    out = tmp_path / "abl"
    args = ["ablate", *TOY, *FAST, "--toggles", "planted_sync", "--no-read-sites", "--out", str(out)]
    result = CliRunner().invoke(app, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    assert not list((out / "runs").glob("*.read_calls.json.gz"))
    manifest = json.loads((out / "ablation.json").read_text())
    assert manifest["settings"]["read_sites"] is False


@pytest.mark.slow  # ~13 s on the shared 2-core box (the debug model's build and first steps)
def test_reference_debug_preset_names_its_token_read(tmp_path: Path) -> None:
    """The reference Ling workload reads each new token back with `.item()` in `LingWorkload.step`."""
    import inspect

    from reference_model.workload import LingWorkload

    lines, first = inspect.getsourcelines(LingWorkload.step)
    (offset,) = [i for i, text in enumerate(lines) if "token = int(" in text and ".item()" in text]
    expected = f"workload.py({first + offset}): step"
    out = tmp_path / "ling"
    result = CliRunner().invoke(app, ["run", "--preset", "debug", *FAST, "--out", str(out)])
    assert result.exit_code == 0, result.output
    record = json.loads((out / "record.json").read_text())
    (row,) = record["analysis"]["syncs"]
    assert row["per_step"] == 1.0 and row["line"] == "exact"
    assert [(e["line_exact"], e["per_step"]) for e in row["lines_exact"]] == [(expected, 1.0)]
    assert row["site"] != expected, "site stays the trace's (the decorated def's line)"
