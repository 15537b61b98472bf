"""--help keeps its placeholders and lists --format's values (issue 16 §5, issue 18 §10)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from bubblescope.cli import app

runner = CliRunner()


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("run", ["reports/runs/UTC_TIME-PRESET-SWITCHES/", "trace.rankN.json.gz", "table|json"]),
        ("ablate", ["runs/KEY.json", "rankR/runs/", "table|json"]),
        ("analyze", ["OUT.rankN.json.gz", "table|json|markdown"]),
        ("gate", ["3% or 0.03", "table|markdown|json"]),
        ("report", ["html|markdown"]),
        ("diff", ["table|json|markdown|html", "BASELINE", "CURRENT"]),
    ],
)
def test_help_keeps_placeholders_and_shows_choices(command: str, expected: list[str]) -> None:
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "400"}, terminal_width=400)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    for needle in expected:
        assert needle in text, (command, needle)
    # What the Markdown help renderer made of `<placeholder>` before: empty brackets and dangling dashes.
    assert "/--/" not in text and "runs/.json" not in text and "trace.rank.json.gz" not in text
