"""RunRecord schema: round trip, validation errors are one-line RecordErrors."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from bubblescope.errors import RecordError
from bubblescope.records.run_record import load_record, save_record, summarize_samples, validate_record

FIXTURES = Path(__file__).parent / "data" / "gate"


def _record() -> dict:
    return json.loads((FIXTURES / "baseline.json").read_text())


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    record = _record()
    record["extra_field_added_within_v1"] = {"ok": True}
    save_record(record, tmp_path / "r" / "record.json")
    assert load_record(tmp_path / "r") == record
    assert load_record(tmp_path / "r" / "record.json") == record


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r.update(schema="bubblescope.run/2"), "schema"),
        (lambda r: r.pop("samples_ns"), "samples_ns"),
        (lambda r: r.update(samples_ns=[[1, -5]]), "samples_ns"),
        (lambda r: r.update(tokens_per_step=[[1]]), "shape"),
        (lambda r: r["summary"].pop("tpot_ms"), "tpot_ms"),
        (lambda r: r.update(trace=5), "trace"),
    ],
)
def test_invalid_records_are_rejected(mutate, message: str) -> None:
    record = copy.deepcopy(_record())
    mutate(record)
    with pytest.raises(RecordError, match=message):
        validate_record(record)


def test_unreadable_files_are_record_errors(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(RecordError, match="not valid JSON"):
        load_record(tmp_path / "bad.json")
    with pytest.raises(RecordError, match="not found"):
        load_record(tmp_path / "missing.json")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(RecordError, match="not a JSON object"):
        load_record(tmp_path / "list.json")


def test_save_refuses_an_invalid_record_and_leaves_no_file(tmp_path: Path) -> None:
    record = _record()
    record["schema"] = "other/1"
    with pytest.raises(RecordError):
        save_record(record, tmp_path / "record.json")
    assert not list(tmp_path.iterdir())


def test_summary_median_and_interval_bracket_each_other() -> None:
    summary = summarize_samples([[1_000_000, 2_000_000, 3_000_000]] * 2, [[1, 2, 1]] * 2)
    # median step 2.0 ms / mean 4/3 tokens per step -> 1.5 ms (wall time / tokens is 6/4 too)
    assert summary["tpot_ms"] == pytest.approx(1.5)
    lo, hi = summary["tpot_ci95_ms"]
    assert lo <= summary["tpot_ms"] <= hi
    assert summary["tokens"] == 8 and summary["repeats"] == 2 and summary["steps"] == 3
