"""What `report` makes of each argument: run folders, record files, ablations, analyses, traces, bad input."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from bubblescope.errors import BubblescopeError, RecordError
from bubblescope.report import load_inputs as li
from tests.report.helpers import ABLATION_DIR, HOSTILE_RUN_DIR, HOSTILE_TRACE, MINIMAL_RUN_FILE


def test_run_folder_loads_record_and_its_analysis() -> None:
    (item,) = li.load_inputs([HOSTILE_RUN_DIR])
    assert isinstance(item, li.RunInput)
    assert item.path.name == "record.json"
    assert item.analysis is not None and item.analysis["timeline"]["slices"]
    assert item.record["summary"]["tpot_ms"] == pytest.approx(7.59)


def test_folder_with_one_keyed_record_and_record_file_are_runs(tmp_path: Path) -> None:
    (by_folder,) = li.load_inputs([MINIMAL_RUN_FILE.parent])
    (by_file,) = li.load_inputs([MINIMAL_RUN_FILE])
    assert isinstance(by_folder, li.RunInput) and isinstance(by_file, li.RunInput)
    assert by_folder.path == by_file.path == MINIMAL_RUN_FILE
    assert by_file.analysis is None and by_file.warnings == []


def test_ablation_folder_loads_done_records_and_analyses() -> None:
    (item,) = li.load_inputs([ABLATION_DIR])
    assert isinstance(item, li.AblationInput)
    keys = {c["key"] for c in item.ablation["configs"]}
    # all_minus_pdl is "pending" in the fixture and has no record on disk: skipped without a warning.
    assert set(item.records) == keys - {"all_minus_pdl"}
    assert set(item.analyses) == {"base", "all"}
    assert item.warnings == []
    (same,) = li.load_inputs([ABLATION_DIR / "ablation.json"])
    assert isinstance(same, li.AblationInput) and set(same.records) == set(item.records)


def test_done_config_without_its_record_is_a_warning(tmp_path: Path) -> None:
    copy = tmp_path / "abl"
    shutil.copytree(ABLATION_DIR, copy)
    (copy / "runs" / "only_pdl.json").unlink()
    (item,) = li.load_inputs([copy])
    assert isinstance(item, li.AblationInput)
    assert "only_pdl" not in item.records
    assert any("only_pdl" in w for w in item.warnings)


def test_missing_analysis_file_is_a_warning_not_an_error(tmp_path: Path) -> None:
    shutil.copy(HOSTILE_RUN_DIR / "record.json", tmp_path / "record.json")
    (item,) = li.load_inputs([tmp_path])
    assert isinstance(item, li.RunInput) and item.analysis is None
    assert any("analysis.json" in w for w in item.warnings)


def test_analysis_json_is_a_trace_report_without_reanalysis() -> None:
    (item,) = li.load_inputs([HOSTILE_RUN_DIR / "analysis.json"])
    assert isinstance(item, li.TraceInput)
    assert item.analysis["schema"] == li.ANALYSIS_SCHEMA


def test_bare_traces_are_analysed_together(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[tuple[list[str], str | None]] = []

    def fake_analyze(paths: list[str], step_marker: str | None = None) -> dict:
        calls.append((paths, step_marker))
        return {"schema": li.ANALYSIS_SCHEMA, "inputs": [{"path": p} for p in paths]}

    import bubblescope.analysis.traces

    monkeypatch.setattr(bubblescope.analysis.traces, "analyze_traces", fake_analyze)
    gz_trace = tmp_path / "rank1.json.gz"
    gz_trace.write_bytes(gzip.compress(HOSTILE_TRACE.read_bytes()))
    items = li.load_inputs([HOSTILE_TRACE, MINIMAL_RUN_FILE, gz_trace], step_marker="decode_step_.*")
    assert [type(i).__name__ for i in items] == ["RunInput", "TraceInput"]
    assert calls == [([str(HOSTILE_TRACE), str(gz_trace)], "decode_step_.*")]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"schema": "bubblescope.run/1", "summary": ', "not valid JSON"),
        ('["schema", "bubblescope.run/1"]', "expected a JSON object"),
        ('{"schema": "bubblescope.run/9"}', "unknown schema"),
    ],
)
def test_bad_documents_are_one_line_errors(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "record.json"
    path.write_text(content)
    with pytest.raises(BubblescopeError) as info:
        li.load_inputs([path])
    assert message in str(info.value) and "\n" not in str(info.value)


def test_record_of_wrong_schema_inside_run_folder(tmp_path: Path) -> None:
    (tmp_path / "record.json").write_text(json.dumps({"schema": "bubblescope.ablation/1", "configs": []}))
    with pytest.raises(RecordError, match="expected 'bubblescope.run/1'"):
        li.load_inputs([tmp_path])


def test_missing_path_empty_folder_and_no_arguments(tmp_path: Path) -> None:
    with pytest.raises(li.ReportInputError, match="no such file"):
        li.load_inputs([tmp_path / "nope"])
    with pytest.raises(li.ReportInputError, match="neither ablation.json, a RunRecord"):
        li.load_inputs([tmp_path])
    with pytest.raises(li.ReportInputError, match="at least one"):
        li.load_inputs([])


def test_folder_with_several_records_asks_for_one(tmp_path: Path) -> None:
    for name in ("a.json", "b.json"):
        shutil.copy(MINIMAL_RUN_FILE, tmp_path / name)
    with pytest.raises(li.ReportInputError, match="several RunRecords"):
        li.load_inputs([tmp_path])


def test_ablation_with_malformed_configs(tmp_path: Path) -> None:
    (tmp_path / "ablation.json").write_text(json.dumps({"schema": li.ABLATION_SCHEMA, "configs": {"k": 1}}))
    with pytest.raises(RecordError, match="'configs' must be a list"):
        li.load_inputs([tmp_path])


def test_a_folder_of_traces_is_read_as_analyze_reads_it(tmp_path: Path) -> None:
    from tests.trace import scenarios

    scenarios.item_sync().write(tmp_path / "rank0.trace.json")
    (item,) = li.load_inputs([tmp_path])
    assert isinstance(item, li.TraceInput) and item.analysis["summary"]["blocking_reads_per_step"] == 1
