"""Issue 18 §1 (CLI top level): an unexpected exception is one stderr line naming the file and asking
for a report, exit 2 — but under pytest or BUBBLESCOPE_DEBUG it propagates, so tests fail loudly."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import bubblescope.gate
from bubblescope.cli import app, internal_error_line, main
from tests.hostile.seeds import BASELINE_RECORD


class _Bug(RuntimeError):
    """Stands in for a bug deep inside a command."""


def _main(monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    monkeypatch.setattr(sys, "argv", ["bubblescope", *args])
    try:
        main()
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def _load_raises(path: str) -> None:
    record_path = Path(path)  # the name the top level looks for in the failing frames
    raise _Bug(f"boom in {record_path.name}")


@pytest.fixture
def buggy_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bubblescope.gate, "load_gate_input", _load_raises)


def test_unexpected_exception_is_one_line_naming_the_file(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], buggy_gate: None
) -> None:
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)
    monkeypatch.delenv("BUBBLESCOPE_DEBUG", raising=False)
    code = _main(monkeypatch, "gate", "--baseline", str(BASELINE_RECORD), "--current", str(BASELINE_RECORD))
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err
    assert "internal error while processing" in err and str(BASELINE_RECORD) in err
    assert "_Bug: boom in baseline.json" in err and "please report" in err


@pytest.mark.parametrize("debug", ["1", "yes"])
def test_debug_variable_shows_the_traceback(
    monkeypatch: pytest.MonkeyPatch, buggy_gate: None, debug: str
) -> None:
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)
    monkeypatch.setenv("BUBBLESCOPE_DEBUG", debug)
    with pytest.raises(_Bug):
        _main(monkeypatch, "gate", "--baseline", str(BASELINE_RECORD), "--current", str(BASELINE_RECORD))


def test_under_pytest_the_exception_propagates(monkeypatch: pytest.MonkeyPatch, buggy_gate: None) -> None:
    """A bug hit by any test through main() fails that test with the real traceback."""
    monkeypatch.delenv("BUBBLESCOPE_DEBUG", raising=False)
    assert "PYTEST_CURRENT_TEST" in __import__("os").environ
    with pytest.raises(_Bug):
        _main(monkeypatch, "gate", "--baseline", str(BASELINE_RECORD), "--current", str(BASELINE_RECORD))


def test_clirunner_keeps_the_exception_for_the_test(buggy_gate: None) -> None:
    """CliRunner (the STYLE's way to test commands) bypasses main(): the bug stays visible as exit 1
    with result.exception set, so `assert result.exit_code == 0` fails loudly."""
    result = CliRunner().invoke(
        app, ["gate", "--baseline", str(BASELINE_RECORD), "--current", str(BASELINE_RECORD)]
    )
    assert result.exit_code == 1 and isinstance(result.exception, _Bug)


def test_the_line_escapes_control_characters_and_falls_back_to_argv(tmp_path: Path) -> None:
    evil = tmp_path / "a\x1b]0;pwned\x07b.json"
    evil.write_text("{}")
    line = internal_error_line(ValueError("bad\nvalue\x1b[2J"), ["bubblescope", "analyze", str(evil)])
    assert "\x1b" not in line and "\x07" not in line and "\n" not in line
    assert "\\x1b]0;pwned\\x07b.json" in line and "bad\\nvalue\\x1b[2J" in line


@pytest.mark.parametrize("name", ["[/x].json", "[bold]x[/bold].json.gz", "[link=https:evil]x.json", "[/x"])
def test_markup_in_a_file_name_is_printed_as_is(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str
) -> None:
    """rich markup in a path never reaches a rich parser (MarkupError) nor gets styled away."""
    missing = tmp_path / name
    for args in (
        ["analyze", str(missing)],
        ["report", str(missing), "--format", "markdown"],
        ["gate", "--baseline", str(missing), "--current", str(missing)],
    ):
        code = _main(monkeypatch, *args)
        err = capsys.readouterr().err
        assert code == 2, (args, err)
        assert len(err.strip().splitlines()) == 1 and name in err, (args, err)


def test_markup_in_an_existing_trace_name_with_bad_content(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # "[/x]" in a path: a folder named "[" holding "x][bold].json".
    folder = tmp_path / "["
    folder.mkdir()
    trace = folder / "x][bold].json"
    trace.write_text('{"traceEvents": [')
    for args in (["analyze", str(trace)], ["report", str(trace), "--format", "markdown"]):
        code = _main(monkeypatch, *args)
        err = capsys.readouterr().err
        assert code == 2 and len(err.strip().splitlines()) == 1 and "[/x][bold].json" in err, (args, err)


@pytest.mark.parametrize(
    "args",
    [
        ["analyze", "--[/x]"],
        ["[/x]"],
        ["ablate", "--steps", "[/x]"],
        ["gate", "--baseline", "x"],
        ["report", "--format", "[bold]pdf"],
    ],
)
def test_usage_errors_are_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    code = _main(monkeypatch, *args)
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith("bubblescope: error: ") and "--help" in err, err


def test_the_installed_entry_point_prints_one_line_for_a_bug(tmp_path: Path) -> None:
    """A real process (no pytest variables): exit status 2, one stderr line, no traceback."""
    import os
    import subprocess

    script = (
        "import sys, bubblescope.gate as gate\n"
        "def load(path):\n"
        "    record_path = path\n"
        "    raise KeyError('boom')\n"
        "gate.load_gate_input = load\n"
        "from bubblescope.cli import main\n"
        "sys.argv = ['bubblescope', 'gate', '--baseline', sys.argv[1], '--current', sys.argv[1]]\n"
        "main()\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_CURRENT_TEST", "BUBBLESCOPE_DEBUG")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    done = subprocess.run(
        [sys.executable, "-c", script, str(BASELINE_RECORD)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"while processing {BASELINE_RECORD}" in done.stderr and "KeyError" in done.stderr
