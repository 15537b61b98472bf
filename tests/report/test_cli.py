"""`bubblescope report` through typer's CliRunner: files written, Markdown printed, exit 2 on bad input."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bubblescope.cli import app
from tests.report.helpers import ABLATION_DIR, HOSTILE_RUN_DIR, HOSTILE_TRACE, MINIMAL_RUN_FILE

# Wide enough that typer's error panel does not cut the (long, temporary) paths out of the message.
runner = CliRunner(env={"COLUMNS": "400"})


def test_html_to_named_file(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "ablation.html"
    # -o never creates folders (issue 25): the folder must exist.
    refused = runner.invoke(app, ["report", str(ABLATION_DIR), "-o", str(out)])
    assert refused.exit_code == 2 and "does not exist" in refused.output and not out.parent.exists()
    out.parent.mkdir()
    result = runner.invoke(app, ["report", str(ABLATION_DIR), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert f"wrote {out}" in result.output
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "TPOT waterfall" in page
    assert not list(out.parent.glob(".*.tmp")), "atomic write left its temporary file behind"


def test_html_default_name_in_current_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["report", str(MINIMAL_RUN_FILE)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "report.html").is_file() and "wrote report.html" in result.output


def test_markdown_to_stdout_and_to_file(tmp_path: Path) -> None:
    result = runner.invoke(app, ["report", str(HOSTILE_RUN_DIR), "--format", "markdown"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("## Run: ") and "### Host-blocking reads" in result.output
    out = tmp_path / "summary.md"
    result = runner.invoke(app, ["report", str(ABLATION_DIR), "--format", "markdown", "-o", str(out)])
    assert result.exit_code == 0 and f"wrote {out}" in result.output
    assert out.read_text().startswith("## Ablation: ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["report"], "at least one"),
        (["report", "/definitely/not/here"], "no such file or folder"),
        (["report", "--format", "pdf", "x"], "pdf"),
    ],
)
def test_bad_arguments_exit_2(args: list[str], message: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_bad_documents_exit_2(tmp_path: Path) -> None:
    broken = tmp_path / "record.json"
    broken.write_text('{"schema": "bubblescope.run/1", ')
    result = runner.invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 2 and "not valid JSON" in result.output
    other = tmp_path / "x.json"
    other.write_text(json.dumps({"schema": "bubblescope.gate/1"}))
    result = runner.invoke(app, ["report", str(other)])
    assert result.exit_code == 2 and "unknown schema" in result.output


def test_output_that_is_a_folder_exits_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["report", str(MINIMAL_RUN_FILE), "-o", str(tmp_path)])
    assert result.exit_code == 2 and "is a folder" in result.output


def test_main_entry_point_prints_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Through `bubblescope.cli.main` (the installed script): one line on stderr, exit code 2."""
    import sys

    from bubblescope.cli import main

    argv = sys.argv
    sys.argv = ["bubblescope", "report", str(tmp_path / "missing")]
    try:
        with pytest.raises(SystemExit) as info:
            main()
    finally:
        sys.argv = argv
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("bubblescope: error: ") and "no such file" in err


@pytest.mark.skipif(
    importlib.util.find_spec("bubblescope.analysis.traces") is None,
    reason="bubblescope.analysis.traces absent",
)
def test_bare_trace_through_the_real_analysis(tmp_path: Path) -> None:
    out = tmp_path / "trace.html"
    result = runner.invoke(app, ["report", str(HOSTILE_TRACE), "-o", str(out)])
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert "One decode step (step" in page and "aten::item" in page
    assert "</script><script>" not in page
    md = runner.invoke(app, ["report", str(HOSTILE_TRACE), "--format", "markdown"])
    assert md.exit_code == 0 and "| probe.py(12): step | aten::item |" in md.output


@pytest.mark.skipif(
    importlib.util.find_spec("bubblescope.analysis.traces") is None,
    reason="bubblescope.analysis.traces absent",
)
def test_broken_trace_exits_2(tmp_path: Path) -> None:
    broken = tmp_path / "trace.json"
    broken.write_text('{"traceEvents": [{"ph": "X", "name": "k"')
    result = runner.invoke(app, ["report", str(broken)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "trace.json" in result.output


def test_html_without_plotly_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU box has no plotly: HTML says so (exit 2), Markdown still works."""
    import sys

    monkeypatch.setitem(sys.modules, "bubblescope.report.html", None)
    result = runner.invoke(app, ["report", str(MINIMAL_RUN_FILE), "-o", "unused.html"])
    assert result.exit_code == 2 and "needs plotly" in result.output
    result = runner.invoke(app, ["report", str(MINIMAL_RUN_FILE), "--format", "markdown"])
    assert result.exit_code == 0 and result.output.startswith("## Run:")
