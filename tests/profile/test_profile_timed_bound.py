"""A profiled own loop that timed its steps: every saving its reports promise fits the timed step
(issue 23 §2 for `profile --timed`), on the committed H200 recording of HF generate() with sampling."""

from __future__ import annotations

from pathlib import Path

import pytest

from bubblescope.analysis.timed_idle import bound_idle
from bubblescope.profiling.load import load_profile
from bubblescope.profiling.timing import attach_timed
from bubblescope.report.findings import fix_first

SAMPLE = Path(__file__).resolve().parents[2] / "reports/samples/profile-hf-sampling-pr-h200/pr"


def test_attach_timed_gives_the_bound_its_timed_step() -> None:
    analysis: dict = {"gpu_measured": False}
    attach_timed(analysis, {"samples_ns": [[1, 2]], "tpot_ms": 8.5, "tokens_per_step": 2})
    assert analysis["timed_step_ns"] == pytest.approx(17.0e6)


@pytest.mark.skipif(not SAMPLE.is_dir(), reason="the committed H200 profile sample is not in this checkout")
def test_findings_of_a_timed_profile_fit_its_timed_idle() -> None:
    analysis = load_profile(SAMPLE).analysis
    # TPOT 8.833 ms over 64 timed steps (profile.json), one token per step.
    assert analysis["timed_step_ns"] == pytest.approx(8.833e6, rel=1e-3)
    bound = bound_idle(analysis)
    assert bound is not None and bound["timed_step_ns"] == analysis["timed_step_ns"]
    idle_findings = [f for f in fix_first(analysis) if f.get("kind") != "kernel"]
    promised = sum(f["saving_ns_per_token"] or 0 for f in idle_findings)
    # The profiled step ran 2.46x the timed one; the list never promises more than the timed idle.
    assert 0 < promised <= bound["timed_idle_ns"] + 1
    assert bound["timed_idle_ns"] < analysis["timed_step_ns"]


@pytest.mark.skipif(not SAMPLE.is_dir(), reason="the committed H200 profile sample is not in this checkout")
def test_a_folder_without_analysis_is_named_once_in_the_diff_notes() -> None:
    # The sample's folders keep no analysis.json (the tree stays small): the loader's warning names the
    # folder, and diff printed "<folder>: <folder>: no analysis.json; ..." before.
    from bubblescope.diff import load_diff_side

    side = load_diff_side(SAMPLE)
    (note,) = [n for n in side.notes if "no analysis.json" in n]
    assert note.count(str(SAMPLE)) == 1
