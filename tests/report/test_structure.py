"""Layering (issue 16 §7): gate needs no capture layer, no logic in cli/, capture does not render."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "bubblescope"


def _imports(relative: str) -> set[str]:
    """Every bubblescope module `relative` imports, at the top or inside a function."""
    tree = ast.parse((PACKAGE / relative).read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("bubblescope")}


def test_gate_diff_and_reports_import_without_capture_or_torch() -> None:
    code = (
        "import sys, bubblescope.gate, bubblescope.diff, bubblescope.report.markdown, "
        "bubblescope.report.analysis_console, bubblescope.report.gate_markdown, "
        "bubblescope.report.diff_render;"
        "bad = [m for m in sys.modules if m.startswith(('bubblescope.capture', 'torch'))];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_layer_reaches_up() -> None:
    assert not any(m.startswith("bubblescope.capture") for m in _imports("gate.py"))
    assert not any(m.startswith("bubblescope.cli") for m in _imports("ablate/toggles.py"))
    assert not any(m.startswith("bubblescope.report") for m in _imports("capture/measure.py"))
    assert "bubblescope.report.markdown" not in _imports("report/tp_rows.py")
