"""`report`, `diff` and `gate` read a profile folder, its profile.json, its analysis or its trace, and give
the same answer for each (examples/profile/toy_decode.py, profiled on CPU with and without its extra read)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bubblescope.cli import app
from bubblescope.diff import reads_by_line, run_diff
from bubblescope.gate import run_gate
from tests.profile.conftest import TOY
from tests.profile.helpers import line_of

pytest.importorskip("torch")
pytestmark = pytest.mark.cpu_only

runner = CliRunner()
FORMS = ["{}", "{}/profile.json", "{}/analysis.json", "{}/trace.json.gz"]
STOP_LINE = f"toy_decode.py({line_of(TOY, 'READ-stop')}): main"
EXTRA_LINE = f"toy_decode.py({line_of(TOY, 'READ-extra')}): main"


@pytest.fixture
def profiles(toy_profiles: dict[str, Path]) -> dict[str, Path]:
    return toy_profiles


@pytest.mark.parametrize("form", FORMS)
def test_report_reads_every_form_and_keeps_the_call_chains(profiles: dict[str, Path], form: str) -> None:
    result = runner.invoke(app, ["report", form.format(profiles["toy_extra"]), "--format", "markdown"])
    assert result.exit_code == 0, result.output
    assert "Where each blocking read is called from" in result.output
    assert "not detectable" not in result.output
    for line in (STOP_LINE, EXTRA_LINE):
        assert line.replace("_", "\\_") in result.output


@pytest.mark.parametrize("form", FORMS)
def test_diff_names_the_added_line_for_every_form(profiles: dict[str, Path], form: str) -> None:
    diff = run_diff(form.format(profiles["toy"]), form.format(profiles["toy_extra"]))
    reads = diff["reads"]
    assert (reads["baseline_per_step"], reads["current_per_step"]) == (1.0, 2.0)
    assert reads["compared_by"] == "exact line"
    assert [(r["site"], r["op"]) for r in reads["added"]] == [(EXTRA_LINE, "Tensor.item")]
    assert reads["removed"] == []


@pytest.mark.parametrize("form", FORMS)
def test_gate_fails_on_the_added_read_for_every_form(profiles: dict[str, Path], form: str) -> None:
    verdict = run_gate(form.format(profiles["toy"]), form.format(profiles["toy_extra"]))
    reads = verdict["checks"][0]
    assert verdict["exit_code"] == 1 and reads["status"] == "fail"
    assert [s["site"] for s in reads["increased_sites"]] == [f"{EXTRA_LINE} [Tensor.item]"]
    # Nothing of bubblescope's own is blamed (its step close or profiler stop).
    assert "profiling/session.py" not in json.dumps(verdict)


def test_gate_cli_passes_a_profile_against_itself(profiles: dict[str, Path]) -> None:
    folder = str(profiles["toy"])
    result = runner.invoke(app, ["gate", "--baseline", folder, "--current", f"{folder}/trace.json.gz"])
    assert result.exit_code == 0, result.output


def test_a_copied_analysis_is_gated_as_an_analysis(profiles: dict[str, Path], tmp_path: Path) -> None:
    shutil.copy(profiles["toy_extra"] / "analysis.json", tmp_path / "current.json")
    verdict = run_gate(str(profiles["toy"]), str(tmp_path / "current.json"))
    assert verdict["current"]["kind"] == "analysis" and verdict["exit_code"] == 1


def test_a_profile_that_recorded_nothing_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "profile.json").write_text(
        json.dumps(
            {
                "schema": "bubblescope.profile/1",
                "environment": {"device": "cpu"},
                "settings": {},
                "steps": {"started": 0, "recorded": 0},
                "files": {"trace": None, "analysis": None, "report": None},
                "notices": ["no step was recorded"],
            }
        )
    )
    result = runner.invoke(app, ["report", str(tmp_path), "--format", "markdown"])
    assert result.exit_code == 2 and "no step was recorded" in result.output


def test_rows_without_a_captured_line_fall_back_to_the_trace_site() -> None:
    syncs = [
        {"site": "a.py(3): f", "line_exact": "a.py(3): f", "read_at": "lib.py(9): g", "line": "exact",
         "op": "aten::item", "per_step": 1.0},
        {"site": "model.py(10): forward", "line": "def", "op": "aten::nonzero", "per_step": 2.0},
        {"site": "model.py(20): forward", "op": "aten::item", "per_step": 1.0, "line": "partial",
         "lines_exact": [{"line_exact": "b.py(5): h", "read_at": "b.py(5): h", "per_step": 0.5}]},
    ]  # fmt: skip
    keyed, fallbacks = reads_by_line(syncs)
    assert keyed == {
        ("a.py(3): f → lib.py(9): g", "aten::item"): 1.0,
        ("model.py(10): forward", "aten::nonzero"): 2.0,
        ("b.py(5): h", "aten::item"): 0.5,
        ("model.py(20): forward", "aten::item"): 0.5,
    }
    assert fallbacks == 2


def test_a_read_that_only_moved_is_neither_added_nor_removed() -> None:
    """An edit above the generate() call shifts its line: the same read at the same library line, moved."""
    from bubblescope.diff import compute_diff, side_from
    from bubblescope.gate import GateInput, evaluate_gate

    def row(site: str, op: str) -> dict:
        return {"site": site, "line_exact": site, "read_at": "utils.py(383): __call__", "line": "exact",
                "op": op, "per_step": 1.0}  # fmt: skip

    before = [row("hf.py(56): main", "Tensor.__bool__")]
    after = [row("hf.py(72): main", "Tensor.__bool__"), row("hf.py(47): __call__", "Tensor.item")]
    analyses = [{"syncs": s, "summary": {"blocking_reads_per_step": float(len(s))}} for s in (before, after)]
    reads = compute_diff(
        side_from("a", "analysis", None, analyses[0]), side_from("b", "analysis", None, analyses[1])
    )
    reads = reads["reads"]
    assert [r["site"] for r in reads["added"]] == ["hf.py(47): __call__ → utils.py(383): __call__"]
    assert reads["removed"] == []
    assert [(m["from_site"], m["site"]) for m in reads["moved"]] == [
        ("hf.py(56): main → utils.py(383): __call__", "hf.py(72): main → utils.py(383): __call__")
    ]
    sides = [GateInput(str(i), "analysis", len(s), s) for i, s in enumerate((before, after))]
    increased = evaluate_gate(*sides, n_boot=10)["checks"][0]["increased_sites"]
    assert [s["site"] for s in increased] == ["hf.py(47): __call__ → utils.py(383): __call__ [Tensor.item]"]
