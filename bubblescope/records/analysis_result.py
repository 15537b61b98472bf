"""`bubblescope.analyze` and `bubblescope.load_analysis`: an analysis as DataFrames, in a notebook.

The result holds the `bubblescope.analysis/1` dict (what `bubblescope analyze --format json` prints)
and, for traces analysed in this process, the per-rank analyses behind it. Each table is built from
those on first access and kept (unlike HTA, which recomputes a table on every call): sorting, filtering
or plotting one never re-reads or re-analyses a trace. Column meanings and units: docs/api.md.
Never imports torch.
"""

from __future__ import annotations

import copy
import os
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from bubblescope.errors import BubblescopeError, RecordError
from bubblescope.records import result_frames as frames

ANALYSIS_FILE = "analysis.json"


class TracesNotKeptError(BubblescopeError):
    """A table that only traces analysed in this process hold, asked of a result loaded from JSON."""


class AnalysisResult:
    """One analysis: the `bubblescope.analysis/1` dict and its tables as pandas DataFrames.

    Tables (each built once, on first access; `_ns` columns are integer nanoseconds, `start_ns`
    relative to the rank's first trace event; `<NA>` marks a value that was not measured):

    - `steps`: one row per decode step and rank (durations, GPU busy/idle by class, reads, kernels).
    - `reads`: one row per blocking-read site (`.item()`, `.cpu()`, nonzero, synchronize, …) with its
      count, reads per step, host time blocked and the GPU bubble it caused.
    - `findings`: the fix-first list every report opens with, largest expected saving per token first.
    - `kernels`: one row per kernel name launched inside the steps; `kernel_categories` by category.
    - `host_ops`: host ops and runtime calls inside the steps, self and total time.
    - `top_gaps`: the largest GPU idle gaps inside typical steps, each blamed (as in the JSON).
    - `ranks`: one row per rank (medians, per-step means, straggler flag).
    - `devices`, `streams`: per device and per stream totals (HTA's idle split for streams).
    - `gaps`, `read_events`: every idle gap and every single blocking read; only for traces analysed in
      this process (`bubblescope.analyze`), else `TracesNotKeptError`.

    Also `summary` (per-step means and medians), `warnings`, `gpu_measured`, `step_source`, `rank_analyses`
    (the per-rank `analysis.RankAnalysis` objects, or None) and `to_dict()`.
    """

    def __init__(
        self,
        analysis: dict[str, Any],
        ranks: list[Any] | None = None,
        *,
        tokens_per_step: float = 1.0,
        source: str | None = None,
    ) -> None:
        """Wrap an analysis dict (`analyze`, `load_analysis` and `prof.result` make these for you).

        Args:
            analysis: a `bubblescope.analysis/1` dict.
            ranks: the `analysis.RankAnalysis` list it was built from, when in memory. Default None.
            tokens_per_step: mean tokens per decode step (speculative decoding > 1), so the findings'
                savings are per token. Default 1.0.
            source: where it came from (shown in `repr`). Default None.
        """
        self._analysis = analysis
        self.rank_analyses = ranks
        self.tokens_per_step = tokens_per_step
        self.source = source

    def to_dict(self) -> dict[str, Any]:
        """The `bubblescope.analysis/1` dict (a copy: changing it leaves the result as it was)."""
        return copy.deepcopy(self._analysis)

    @property
    def summary(self) -> dict[str, Any]:
        """Per-step means over typical steps and medians over all steps (the JSON's `summary`)."""
        return copy.deepcopy(self._analysis.get("summary") or {})

    @property
    def warnings(self) -> list[str]:
        """What loading and analysis skipped, assumed or doubt (a CPU run, warm-up steps, …)."""
        return list(self._analysis.get("warnings") or [])

    @property
    def gpu_measured(self) -> bool:
        """False when the traces hold no usable GPU timeline (blocked/bubble times are then not measured)."""
        return self._analysis.get("gpu_measured") is not False

    @property
    def step_source(self) -> str:
        """What the steps were found from (`bubblescope.step`, `ProfilerStep`, a marker, whole-trace)."""
        return str(self._analysis.get("step_source") or "")

    @cached_property
    def steps(self) -> pd.DataFrame:
        """One row per step and rank: `start_ns`, `dur_ns` (host window), `gpu_dur_ns`, `gpu_busy_ns`,
        `gpu_utilization`, `idle_ns` and `idle_{sync,host,launch,dependency}_ns`, `blocking_reads`,
        `kernels`, `typical`."""
        return frames.steps_frame(self._analysis)

    @cached_property
    def reads(self) -> pd.DataFrame:
        """One row per blocking-read site: `site`, `op`, `kind`, `api`, `count`, `per_step`, `blocked_ns`,
        `bubble_ns`, `lost_lead_ns`, `drained`, `wait_ns`, `hint` (plus `line_exact`, `read_at`, `stack`,
        `line` for a `bubblescope profile` analysis), largest bubble first."""
        return frames.reads_frame(self._analysis)

    @cached_property
    def ranks(self) -> pd.DataFrame:
        """One row per rank: `steps`, `blocking_reads_per_step`, `gpu_step_ns_median`,
        `step_dur_ns_median`, per-step means of `gpu_busy_ns` and each idle class over its typical steps
        (`*_ns_per_step`), `vs_median_rank` and `straggler` (`<NA>` with one rank)."""
        return frames.ranks_frame(self._analysis, self.steps)

    @cached_property
    def findings(self) -> pd.DataFrame:
        """The fix-first list: `order`, `kind`, `what`, `site`, `saving_ns_per_token`, `hint`."""
        return frames.findings_frame(self._analysis, self.tokens_per_step)

    @cached_property
    def kernels(self) -> pd.DataFrame:
        """One row per kernel name: `short_name`, `category`, `count`, `total_ns`, `mean_ns`, `p50_ns`,
        `max_ns`, `share`, `count_per_step`, `ns_per_step`."""
        return frames.kernels_frame(self._analysis)

    @cached_property
    def kernel_categories(self) -> pd.DataFrame:
        """Kernel time by category: `category`, `kernels` (names), `count`, `total_ns`, `share`,
        `ns_per_step`."""
        return frames.kernel_categories_frame(self._analysis)

    @cached_property
    def host_ops(self) -> pd.DataFrame:
        """Host ops and runtime calls in the steps (`key_averages` style): `name`, `kind`, `calls`,
        `self_ns`, `total_ns`, their per-step means, `self_share`."""
        return frames.host_ops_frame(self._analysis)

    @cached_property
    def top_gaps(self) -> pd.DataFrame:
        """The largest GPU idle gaps inside typical steps: `rank`, `device`, `step`, `class`,
        `start_ns`, `dur_ns`, `blame`, `next_op`."""
        return frames.top_gaps_frame(self._analysis)

    @cached_property
    def devices(self) -> pd.DataFrame:
        """One row per device: `span_ns`, `busy_ns`, `idle_ns`, `idle_<class>_ns`, op counts."""
        return frames.devices_frame(self._analysis)

    @cached_property
    def streams(self) -> pd.DataFrame:
        """One row per stream: `busy_ns`, `idle_ns` split into `host_wait_ns`, `kernel_wait_ns`,
        `other_ns` (HTA's idle-time terms)."""
        return frames.streams_frame(self._analysis)

    @cached_property
    def gaps(self) -> pd.DataFrame:
        """Every GPU idle gap: `rank`, `device`, `step`, `class`, `start_ns`, `end_ns`, `dur_ns`, `read_id`,
        `next_op`, `next_stream`, `graph`, `blame`.

        Raises:
            TracesNotKeptError: the result was loaded from JSON (which keeps only `top_gaps`).
        """
        return frames.gaps_frame(self._traces("gaps", "top_gaps"))

    @cached_property
    def read_events(self) -> pd.DataFrame:
        """Every blocking read the traces show: `rank`, `read_id`, `step`, `site`, `op`, `api`, `tid`,
        `start_ns`, `end_ns`, `blocked_ns`, `wait_ns`, `bubble_ns`, `lost_lead_ns`, `drained`, `calls`.

        Raises:
            TracesNotKeptError: the result was loaded from JSON (which keeps reads grouped: `reads`).
        """
        return frames.read_events_frame(self._traces("read_events", "reads"))

    def _traces(self, table: str, instead: str) -> list[Any]:
        if self.rank_analyses is None:
            raise TracesNotKeptError(
                f"`{table}` needs the traces analysed in this process (bubblescope.analyze); "
                f"a result loaded from JSON has `{instead}`"
            )
        return self.rank_analyses

    def __repr__(self) -> str:
        summary = self._analysis.get("summary") or {}
        where = f" of {self.source}" if self.source else ""
        steps, sites = summary.get("steps", 0), len(self._analysis.get("syncs") or [])
        return (
            f"<AnalysisResult{where}: {steps} step{'s' * (steps != 1)}, "
            f"{summary.get('blocking_reads_per_step', 0)} blocking reads/step, "
            f"{sites} read site{'s' * (sites != 1)}>"
        )


def analyze(
    paths: list[str | os.PathLike[str]] | str | os.PathLike[str],
    *,
    step_marker: str | None = None,
    max_decompressed_bytes: int | None = None,
    bytes_per_token: float | None = None,
    bandwidth_gbps: float | None = None,
    tokens_per_step: float = 1.0,
) -> AnalysisResult:
    """Analyse torch.profiler traces (one file per rank) and return the result as DataFrames.

    `result.to_dict()` is what `bubblescope analyze --format json --timeline` prints for the same
    arguments (without `--timeline` the CLI leaves the drawing timeline out).

    Args:
        paths: trace files (`.json` / `.json.gz`) or folders of them; one file per rank.
        step_marker: regex for step annotations when neither `bubblescope.step` nor `ProfilerStep#N`
            is present (e.g. `decode_step_.*`). Default None.
        max_decompressed_bytes: refuse a file whose JSON text is larger. Default None (512 MiB).
        bytes_per_token: bytes one decoded token reads from HBM; with `bandwidth_gbps` gives the
            `floor` block (speed-of-light step time). Default None.
        bandwidth_gbps: HBM bandwidth of the GPU that recorded the trace, GB/s. Default None.
        tokens_per_step: mean tokens per step, for the findings' saving per token. Default 1.0.
    Returns:
        An `AnalysisResult`.
    Raises:
        TraceError: a file is missing, malformed, truncated, too large or not a trace.
        ConfigError: a floor number that is not positive.
    """
    from bubblescope.analysis.traces import analysis_dict, analyze_ranks
    from bubblescope.floor.trace_floor import trace_floor

    ranks = analyze_ranks(paths, step_marker=step_marker, max_decompressed_bytes=max_decompressed_bytes)
    analysis = analysis_dict(ranks)
    analysis["floor"] = trace_floor(analysis, bytes_per_token, bandwidth_gbps)
    from bubblescope.report.findings import with_findings

    # As `analyze --format json` prints it: the fix-first list and the idle bound it used.
    with_findings(analysis, tokens_per_step)
    shown = paths if isinstance(paths, (str, os.PathLike)) else ", ".join(str(p) for p in paths)
    return AnalysisResult(analysis, ranks, tokens_per_step=tokens_per_step, source=str(shown))


def load_analysis(path: str | os.PathLike[str], *, tokens_per_step: float = 1.0) -> AnalysisResult:
    """Load an `analysis.json` (plain or gzip) written by `analyze --format json`, `run`, `profile` or
    `AnalysisResult.to_dict()`, or a folder holding one (a `run` or `profile` output folder).

    Args:
        path: the JSON file or its folder.
        tokens_per_step: mean tokens per step, for the findings' saving per token. Default 1.0.
    Returns:
        An `AnalysisResult` without traces (`gaps` and `read_events` raise; `top_gaps` and `reads` hold
        what the JSON keeps).
    Raises:
        RecordError: missing, unreadable, not JSON, or not `bubblescope.analysis/1`.
    """
    from bubblescope.analysis.traces import SCHEMA
    from bubblescope.report.load_inputs import read_json_document

    target = Path(path)
    if target.is_dir():
        if not (target / ANALYSIS_FILE).is_file():
            raise RecordError(f"{target}: no {ANALYSIS_FILE} in this folder")
        target = target / ANALYSIS_FILE
    analysis = read_json_document(target, expect_schema=SCHEMA)
    return AnalysisResult(analysis, None, tokens_per_step=tokens_per_step, source=str(target))
