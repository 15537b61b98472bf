"""`bubblescope.profile()` on a CPU toy loop: steps, exact read lines, outputs on disk."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.profile.helpers import SCRIPTS, line_of, load_outputs, rows_by_site, site, trace_events

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.cpu_only

SCRIPT = "api_loop.py"
READS_PER_STEP = 5  # item, tolist (helper), nonzero, cpu, int() inside fakelib


def _run_api_loop(out: Path, form: str) -> tuple[dict, dict]:
    spec = importlib.util.spec_from_file_location("api_loop_under_test", SCRIPTS / SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(str(out), form)
    return load_outputs(out)


@pytest.fixture(scope="module")
def with_form(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, dict]:
    out = tmp_path_factory.mktemp("with") / "run"
    return (out, *_run_api_loop(out, "with"))


def test_outputs_written(with_form) -> None:
    out, analysis, record = with_form
    for name in ("trace.json.gz", "analysis.json", "report.html", "profile.json", "read_calls.json.gz"):
        assert (out / name).is_file(), name
    assert record["schema"] == "bubblescope.profile/1"
    assert record["steps"] == {"started": 6, "recorded": 3, "trailing_step_dropped": False}
    assert record["files"] == {"trace": "trace.json.gz", "analysis": "analysis.json", "report": "report.html"}
    assert analysis["schema"] == "bubblescope.analysis/1"
    assert not list(out.glob(".*.tmp")), "temporary files left behind"


def test_steps_are_annotations_and_counted(with_form) -> None:
    out, analysis, _ = with_form
    steps = [e for e in trace_events(out) if e.get("name") == "bubblescope.step" and e.get("ph") == "X"]
    assert len(steps) == 3  # warm-up step and the two after the window are not recorded
    assert analysis["step_source"] == "bubblescope.step"
    assert [s["blocking_reads"] for s in analysis["steps"]] == [READS_PER_STEP] * 3
    assert analysis["summary"]["blocking_reads_per_step"] == READS_PER_STEP
    assert any("CPU run" in w for w in analysis["warnings"])


def test_each_read_named_at_its_exact_line(with_form) -> None:
    _, analysis, _ = with_form
    rows = rows_by_site(analysis)
    expected = {
        (site(SCRIPT, "READ-item", "one_token"), "Tensor.item"),
        (site(SCRIPT, "READ-helper-tolist", "read_helper"), "Tensor.tolist"),
        (site(SCRIPT, "READ-nonzero", "one_token"), "torch.nonzero"),
        (site(SCRIPT, "READ-cpu", "one_token"), "Tensor.cpu"),
        (site(SCRIPT, "READ-lib-call", "one_token"), "Tensor.__int__"),
    }
    assert set(rows) == expected
    for row in rows.values():
        assert row["per_step"] == 1.0 and row["count"] == 3 and row["line"] == "exact"
        # A CPU run blocks on nothing: not measured is null, never 0 (bubblescope.analysis.not_measured).
        assert row["blocked_ns"] is None and row["bubble_ns"] is None


def test_helper_read_keeps_its_caller_chain(with_form) -> None:
    _, analysis, _ = with_form
    row = rows_by_site(analysis)[(site(SCRIPT, "READ-helper-tolist", "read_helper"), "Tensor.tolist")]
    assert row["stack"][:2] == [
        site(SCRIPT, "READ-helper-tolist", "read_helper"),
        site(SCRIPT, "CALL-helper", "one_token"),
    ]


def test_library_read_is_attributed_to_the_calling_line(with_form) -> None:
    _, analysis, _ = with_form
    row = rows_by_site(analysis)[(site(SCRIPT, "READ-lib-call", "one_token"), "Tensor.__int__")]
    lib_line = line_of(SCRIPTS / "site-packages" / "fakelib.py", "LIB-READ")
    assert row["read_at"] == f"fakelib.py({lib_line}): count_positive"
    assert row["stack"][:2] == [row["read_at"], site(SCRIPT, "READ-lib-call", "one_token")]


def test_trace_links_each_read_marker_inside_a_step(with_form) -> None:
    out, analysis, _ = with_form
    events = [e for e in trace_events(out) if e.get("ph") == "X"]
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in events if e["name"] == "bubblescope.step"]
    marks = [e for e in events if str(e.get("name", "")).startswith("bubblescope.read#")]
    assert len(marks) == 3 * READS_PER_STEP
    assert all(any(a <= m["ts"] < b for a, b in steps) for m in marks)
    # The item() read's marker encloses the ATen op that reads.
    items = [e for e in events if e["name"] == "aten::item"]
    assert items and all(
        any(m["ts"] <= i["ts"] and i["ts"] + i["dur"] <= m["ts"] + m["dur"] for m in marks) for i in items
    )


@pytest.mark.parametrize("form", ["bare", "module"])
def test_bare_and_module_level_step(tmp_path: Path, form: str) -> None:
    analysis, record = _run_api_loop(tmp_path / form, form)
    assert record["steps"]["recorded"] == 3
    assert analysis["summary"]["blocking_reads_per_step"] == READS_PER_STEP
    assert (site(SCRIPT, "READ-item", "one_token"), "Tensor.item") in rows_by_site(analysis)


def test_tap_off_and_restored(tmp_path: Path) -> None:
    import bubblescope

    original = torch.Tensor.item
    with bubblescope.profile(out=tmp_path, active=2, warmup=0, read_sites=False, progress=False) as prof:
        for _ in range(2):
            with prof.step():
                torch.ones(3).sum().item()
    analysis, record = load_outputs(tmp_path)
    assert record["settings"]["read_sites"] is False
    assert analysis["syncs"] == []
    assert torch.Tensor.item is original
    with bubblescope.profile(out=tmp_path / "on", active=1, warmup=0, progress=False) as prof:
        assert torch.Tensor.item is not original
        prof.step()
    assert torch.Tensor.item is original and "__int__" not in torch.Tensor.__dict__


def test_no_step_says_so(tmp_path: Path) -> None:
    import bubblescope

    with bubblescope.profile(out=tmp_path, active=2, warmup=1, progress=False):
        torch.ones(2).sum().item()
    record = json.loads((tmp_path / "profile.json").read_text())
    assert not (tmp_path / "analysis.json").exists()
    assert record["files"]["trace"] is None
    assert any("no step was recorded" in n for n in record["notices"])


def test_import_bubblescope_does_not_import_torch() -> None:
    code = "import sys, bubblescope; bubblescope.profile; bubblescope.step; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_trailing_bare_step_left_out(tmp_path: Path) -> None:
    import bubblescope

    with bubblescope.profile(out=tmp_path, active=8, warmup=1, progress=False) as prof:
        for _ in range(4):
            prof.step()
            torch.ones(3).sum().item()
        torch.ones(2).tolist()  # after the loop: inside the still-open last step
    analysis, record = load_outputs(tmp_path)
    assert record["steps"]["recorded"] == 3
    assert len(analysis["steps"]) == 2
    assert [s["blocking_reads"] for s in analysis["steps"]] == [1, 1]
    assert any("only 3 of 8 active steps" in n for n in record["notices"])
    assert any("last step ran until the session closed" in w for w in analysis["warnings"])
