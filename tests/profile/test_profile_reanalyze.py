"""`profiling.outputs.reanalyze`: a committed H200 profile folder re-analysed in a copy; profile.json's
analysis-derived fields follow the new analysis.json, everything the run recorded is kept."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from bubblescope.profiling.outputs import TOP_READS, reanalyze

SAMPLE = Path(__file__).resolve().parents[2] / "reports" / "samples" / "profile-gpt-fast-compiled-h200"


def test_reanalyze_refreshes_analysis_report_and_record(tmp_path: Path) -> None:
    folder = tmp_path / SAMPLE.name
    shutil.copytree(SAMPLE, folder)
    before = json.loads((folder / "profile.json").read_text())
    # Stale fields a re-analysis must replace, and run fields it must keep.
    stale = {**before, "summary": {"steps": -1}, "reads": [{"site": "stale"}], "notices": ["kept"]}
    (folder / "profile.json").write_text(json.dumps(stale))
    (folder / "report.html").write_text("stale")

    analysis = reanalyze(folder, timeline=False)

    assert json.loads((folder / "analysis.json").read_text()) == analysis
    record = json.loads((folder / "profile.json").read_text())
    assert record["summary"] == analysis["summary"]
    assert record["step_source"] == analysis["step_source"]
    assert [r["site"] for r in record["reads"]] == [s["site"] for s in analysis["syncs"][:TOP_READS]]
    assert [r["bubble_ns"] for r in record["reads"]] == [
        s["bubble_ns"] for s in analysis["syncs"][:TOP_READS]
    ]
    assert record["notices"][0] == "kept" and record["notices"][-1].startswith(
        "re-analysed from trace.json.gz"
    )
    for key in ("created_utc", "environment", "settings", "steps", "exit", "files"):
        assert record[key] == before[key], key
    assert "Host-blocking reads" in (folder / "report.html").read_text()
