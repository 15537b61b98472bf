"""The HTML page of one measured run, written beside its RunRecord (asked for by the CLI, not by capture)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bubblescope.files.atomic import write_text_atomic
from bubblescope.records.run_record import load_record, save_record


def report_path_for(record_path: Path) -> Path:
    """`record.json` -> `report.html`; `rank0.json` -> `rank0.report.html` (beside the record)."""
    stem = record_path.name.removesuffix(".json")
    return record_path.parent / ("report.html" if stem == "record" else f"{stem}.report.html")


def _full_analysis(record: dict[str, Any], folder: Path) -> dict[str, Any] | None:
    name = record.get("analysis_file")
    if not isinstance(name, str) or not name:
        return None
    try:
        return json.loads((folder / name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_run_report(record_path: Path) -> tuple[dict[str, Any], str | None]:
    """Render the run's HTML report, write it beside the record and save the record pointing at it.

    Returns:
        (the updated record, a notice for the user when the page could not be rendered).
    """
    record = load_record(record_path)
    try:
        from bubblescope.report.html import render_run_html

        # Inside the try: the renderer imports plotly, and a GPU box may lack it.
        page = render_run_html(record, _full_analysis(record, record_path.parent))
    except ImportError as exc:
        return record, f"HTML report skipped ({exc}); render it later with `bubblescope report`"
    target = report_path_for(record_path)
    write_text_atomic(target, page)
    record["report"] = target.name
    save_record(record, record_path)
    return record, None
