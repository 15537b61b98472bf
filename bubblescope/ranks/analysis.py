"""`RankAnalysis`: everything the detectors found in one rank's trace, tables included.

Its own module so that the pieces that read it (timeline, gap blame, per-rank results, the annotated
trace) can name the type without importing the pipeline in `analysis/traces.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bubblescope.trace.steps import StepWindows
from bubblescope.trace.tables import TraceTables


@dataclass
class RankAnalysis:
    """Everything found in one rank's trace (tables kept for the annotated trace and timeline)."""

    tables: TraceTables
    gpu: pd.DataFrame
    steps: StepWindows
    reads: pd.DataFrame
    gaps: pd.DataFrame
    devices: list[dict]
    launches: dict[str, int]
    warnings: list[str] = field(default_factory=list)
    gpu_measured: bool = True
    host_tid: str = ""
    # device -> [n_steps + 1] GPU interval bounds of the steps (`trace.steps.gpu_step_bounds`).
    gpu_bounds: dict[int, np.ndarray] = field(default_factory=dict)
    # read_id -> lost lead L in ns (the largest over devices; 0 for a read that drained no device).
    lost_lead_ns: pd.Series = field(default_factory=lambda: pd.Series(dtype=np.int64))
