"""The ablation's "predicted vs measured" table (`attribution.predicted_vs_measured`) as rows.

One table for every surface (console, HTML, Markdown): the prediction from the baseline's analysis with
its interval (or why it has none), both measured savings with theirs, the verdict and the reasons.
"""

from __future__ import annotations

from typing import Any

from bubblescope.report.cells import Rows, fmt_interval, num, plain

PREDICTED_TITLE = "Predicted vs measured (ms per token saved, 95% CI)"
PREDICTED_NOTE = (
    "Predicted from the baseline's analysis alone (docs/predictions.md); agrees = within 25% of a measured "
    "saving, or either value inside the other's interval. Predictions describe the baseline's profiled steps."
)
PREDICTED_HEADERS = [
    "switch",
    "what it removes (rule)",
    "predicted",
    "measured alone",
    "measured removed from all-on",
    "verdict",
    "why not (from the runs)",
]


def predicted_text(row: dict[str, Any]) -> str:
    """`0.138 [0.135, 0.169]`, `0.012 (no interval: ...)` or `no prediction: why`."""
    predicted = row.get("predicted_ms")
    if not isinstance(predicted, dict) or num(predicted.get("est")) is None:
        return f"no prediction: {plain(row.get('why_none'))}"
    if num(predicted.get("lo")) is None:
        return f"{float(predicted['est']):.3f} (no interval: {plain(row.get('no_interval'))})"
    return fmt_interval(predicted).removeprefix("not resolved (noise): ")


def verdict_text(row: dict[str, Any]) -> str:
    """`agrees with removed from all-on`, or `off by +95% of the removed-from-all-on saving`."""
    if row.get("verdict") == "agrees":
        return "agrees with " + " and ".join(plain(label) for label in row.get("agrees_with") or [])
    if row.get("verdict") != "off":
        return "no prediction"
    predicted = num((row.get("predicted_ms") or {}).get("est"))
    for key, label in (
        ("measured_removed_from_all_ms", "removed-from-all-on"),
        ("measured_alone_ms", "alone"),
    ):
        measured = num((row.get(key) or {}).get("est"))
        if predicted is not None and measured:
            return f"off: {(predicted - measured) / abs(measured) * 100:+.0f}% of the {label} saving"
    return "off"


def predicted_rows(rows: list[dict[str, Any]] | None) -> Rows:
    """Headers and one row per switch of `attribution.predicted_vs_measured`."""
    body = []
    for row in rows or []:
        if not isinstance(row, dict):
            continue
        body.append(
            [
                plain(row.get("switch")),
                plain(row.get("removes")) if row.get("removes") else "—",
                predicted_text(row),
                fmt_interval(row.get("measured_alone_ms")),
                fmt_interval(row.get("measured_removed_from_all_ms")),
                verdict_text(row),
                "; ".join(plain(r) for r in row.get("reasons") or []) or "—",
            ]
        )
    return PREDICTED_HEADERS, body
