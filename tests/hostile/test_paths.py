"""Issue 18 §5: an edited ablation or run folder cannot make bubblescope read or write outside it.

`ablate --reanalyze` rewrites records and analysis files named by the folder's own documents, and
`report` reads what they name; every such name is resolved and refused (exit 2, one line) when it
leaves the folder, before anything is written.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from bubblescope.ablate.plan import plan_ablation
from bubblescope.ablate.runner import run_ablation
from bubblescope.ablate.store import AblationStore
from bubblescope.capture.measure import RunSettings
from bubblescope.cli import main
from bubblescope.examples.toy_workload import make_workload

SETTINGS = RunSettings(steps=3, warmup=1, repeats=2, profile_steps=1)
INFO = {"name": "toy", "factory": "bubblescope.examples.toy_workload:make_workload", "preset": "tiny"}


@pytest.fixture(scope="module")
def measured_ablation(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real (toy, CPU) ablation with traces and analysis files, measured once for this module."""
    root = tmp_path_factory.mktemp("measured") / "abl"
    run_ablation(
        make_workload("tiny"),
        plan_ablation(["no_readback"]),
        AblationStore(root),
        settings=SETTINGS,
        workload_info=INFO,
        bandwidth=None,
    )
    return root


@pytest.fixture
def sandbox(tmp_path: Path, measured_ablation: Path) -> tuple[Path, Path]:
    """(a copy of the ablation, a sibling folder standing for 'anywhere else'), both under tmp_path."""
    root = tmp_path / "work" / "abl"
    shutil.copytree(measured_ablation, root)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    return root, outside


def _edit(path: Path, edit: Any) -> None:
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))


def _cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["bubblescope", *args])
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _record_edit(field: str, value: str):
    def edit(doc: dict[str, Any]) -> None:
        doc[field] = value

    return edit


def test_untouched_ablation_reanalyses(
    sandbox: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root, _ = sandbox
    code, err = _cli(monkeypatch, capsys, "ablate", "--reanalyze", "--out", str(root), "--format", "json")
    assert code == 0, err


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("analysis_file", "../../elsewhere/planted.analysis.json"),
        ("analysis_file", "ABSOLUTE/planted.analysis.json"),
        ("analysis_file", "../ablation.json"),
        ("trace", "../../elsewhere/stolen.trace.json.gz"),
        ("trace", "ABSOLUTE/stolen.trace.json.gz"),
    ],
)
def test_reanalyze_refuses_record_paths_outside(
    sandbox: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    field: str,
    value: str,
) -> None:
    root, outside = sandbox
    value = value.replace("ABSOLUTE", str(outside))
    # A real trace where the edited name points, so only the check can stop the read.
    shutil.copy(root / "runs" / "base.trace.json.gz", outside / "stolen.trace.json.gz")
    _edit(root / "runs" / "no_readback.json", _record_edit(field, value))
    before_inside, before_outside = _snapshot(root), _snapshot(outside)
    code, err = _cli(monkeypatch, capsys, "ablate", "--reanalyze", "--out", str(root))
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and field in err, err
    assert "refusing" in err or "not a file name" in err, err
    assert _snapshot(outside) == before_outside, "nothing written outside the ablation"
    assert _snapshot(root) == before_inside, "refused before anything was rewritten"


@pytest.mark.parametrize(
    ("key", "record"),
    [
        ("../../elsewhere/x", None),
        ("base", "../../elsewhere/base.json"),
        ("base", "ABSOLUTE/base.json"),
        ("base", "runs/no_readback.json"),
    ],
)
def test_reanalyze_refuses_manifest_keys_and_records_outside(
    sandbox: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    key: str,
    record: str | None,
) -> None:
    root, outside = sandbox
    shutil.copy(root / "runs" / "base.json", outside / "base.json")

    def edit(doc: dict[str, Any]) -> None:
        config = doc["configs"][0]
        config["key"] = key
        if record is not None:
            config["record"] = record.replace("ABSOLUTE", str(outside))

    _edit(root / "ablation.json", edit)
    before_outside = _snapshot(outside)
    code, err = _cli(monkeypatch, capsys, "ablate", "--reanalyze", "--out", str(root))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert _snapshot(outside) == before_outside
    assert (
        not (outside.parent / "x.json").exists()
        and not (root.parent.parent / "elsewhere" / "x.json").exists()
    )


def test_reanalyze_refuses_toggles_that_make_paths(
    sandbox: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root, _ = sandbox
    _edit(root / "ablation.json", lambda doc: doc.update(toggles=["../../../evil"], order=["../../../evil"]))
    code, err = _cli(monkeypatch, capsys, "ablate", "--reanalyze", "--out", str(root))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert not list(root.parent.parent.rglob("evil*"))


def test_reanalyze_refuses_a_trace_link_out_of_the_folder(
    sandbox: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root, outside = sandbox
    trace = root / "runs" / "base.trace.json.gz"
    shutil.move(trace, outside / "moved.trace.json.gz")
    trace.symlink_to(outside / "moved.trace.json.gz")
    code, err = _cli(monkeypatch, capsys, "ablate", "--reanalyze", "--out", str(root))
    assert code == 2 and "points outside" in err and len(err.strip().splitlines()) == 1, err


def test_report_does_not_read_outside_an_ablation(
    sandbox: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root, outside = sandbox
    shutil.copy(root / "runs" / "base.json", outside / "secret.json")
    _edit(root / "ablation.json", lambda doc: doc["configs"][0].update(record="../elsewhere/secret.json"))
    shutil.move(root, outside.parent / "abl")
    root = outside.parent / "abl"
    code, err = _cli(monkeypatch, capsys, "report", str(root), "--format", "markdown")
    assert code == 2 and "points outside" in err and len(err.strip().splitlines()) == 1, err


def test_report_does_not_read_an_analysis_file_outside_a_run(
    tmp_path: Path,
    measured_ablation: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    secret = tmp_path / "secret.analysis.json"
    shutil.copy(measured_ablation / "runs" / "base.analysis.json", secret)
    record = json.loads((measured_ablation / "runs" / "base.json").read_text())
    for name in ("../secret.analysis.json", str(secret)):
        record["analysis_file"] = name
        (run / "record.json").write_text(json.dumps(record))
        code, err = _cli(monkeypatch, capsys, "report", str(run), "--format", "markdown")
        assert code == 2 and "analysis_file" in err and "points outside" in err, err


def test_a_manifest_nested_deeper_than_any_real_one_is_refused(
    sandbox: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root, _ = sandbox
    manifest = root / "ablation.json"
    doc = json.loads(manifest.read_text())
    doc["configs"][0]["status"] = "DEEP"
    manifest.write_text(json.dumps(doc).replace('"DEEP"', "[" * 900 + "]" * 900))
    for args in (
        ["report", str(root), "--format", "markdown"],
        ["ablate", "--reanalyze", "--out", str(root)],
    ):
        code, err = _cli(monkeypatch, capsys, *args)
        assert code == 2 and "nested deeper than 64 levels" in err and len(err.strip().splitlines()) == 1, err
