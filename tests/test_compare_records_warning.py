"""The gate's 'switch set differs' warning names the switches (it said 'baseline a list, current a list')."""

from __future__ import annotations

import copy
import json

from bubblescope.records.validate import compare_records
from tests.report.helpers import MINIMAL_RUN_FILE


def test_switch_set_warning_names_the_switches() -> None:
    baseline = json.loads(MINIMAL_RUN_FILE.read_text())
    baseline["switches"]["enabled"] = []
    current = copy.deepcopy(baseline)
    current["switches"]["enabled"] = ["bf16_lm_head", "bf16_gate"]
    warnings = compare_records(baseline, current)
    line = next(w for w in warnings if w.startswith("switch set differs"))
    assert "(baseline none, current bf16_gate, bf16_lm_head)" in line
    assert "a list" not in line
