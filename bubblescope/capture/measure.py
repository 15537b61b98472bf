"""Measure one switch configuration: timed run → profiled window → analysis → RunRecord on disk.

The read tap (exact lines of blocking reads) is on for the profiled window unless
`RunSettings.read_sites` is False (`--no-read-sites`); the timed run never has it.
"""

from __future__ import annotations

import datetime as _dt
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bubblescope.analysis.readbacks import count_readbacks
from bubblescope.analysis.step_samples import idle_step_samples
from bubblescope.capture.environment import capture_environment
from bubblescope.capture.floor import compute_floor, kernel_bytes_block
from bubblescope.capture.profiled import profile_window
from bubblescope.capture.setup import switches_block, workload_on_cuda
from bubblescope.capture.timed import run_timed
from bubblescope.errors import BubblescopeError, ConfigError
from bubblescope.files.atomic import write_json_atomic
from bubblescope.profiling.run_sites import read_calls_path
from bubblescope.records.run_record import RUN_SCHEMA, RunRecord, save_record, summarize_samples, tpot_seed

CPU_NOTE = (
    "CPU run: readbacks counted from the trace (each would block the host on a GPU); GPU bubbles not measured"
)
IDLE_CLASSES = ("sync", "host", "launch", "dependency")


@dataclass(frozen=True)
class RunSettings:
    """Step counts of a run (the `settings` block of a RunRecord)."""

    steps: int = 64
    warmup: int = 8
    repeats: int = 3
    profile_steps: int = 4
    # The read tap during the profiled window (exact lines of blocking reads); never during timed runs.
    read_sites: bool = True

    def __post_init__(self) -> None:
        if self.steps < 1 or self.repeats < 1 or self.warmup < 0 or self.profile_steps < 0:
            raise ConfigError("need --steps >= 1, --repeats >= 1, --warmup >= 0 and --profile-steps >= 0")


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _analyze_full(
    trace_path: Path, calls: list[dict[str, Any]] | None, on_cuda: bool
) -> tuple[dict[str, Any] | None, str | None]:
    """The full analysis/1 of a trace (steps found by their `bubblescope.step` annotations), or a warning.

    With the read tap's `calls`, syncs rows carry exact lines (`bubblescope.profiling.run_sites`).
    """
    try:
        from bubblescope.analysis.traces import analyze_traces
    except ImportError:
        return None, "bubblescope.analysis is not installed: GPU gaps not analysed"
    try:
        if calls is not None:
            from bubblescope.profiling.run_sites import analyze_run_trace

            return analyze_run_trace(trace_path, calls, cuda_run=on_cuda), None
        return analyze_traces([str(trace_path)]), None
    except BubblescopeError as exc:
        return None, f"trace analysis refused the trace: {exc}"
    except Exception as exc:  # noqa: BLE001 - the measurement is done; keep it and say what failed
        return None, f"trace analysis failed ({type(exc).__name__}: {exc}); readbacks counted from ATen ops"


def analysis_block(
    trace_path: Path, on_cuda: bool, kernel_bytes: dict[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The RunRecord `analysis` block, and the full analysis/1 dict when there is one.

    With the workload's `kernel_bytes` block (capture/floor.kernel_bytes_block), the full analysis also
    gets achieved bandwidth per kernel and the `bandwidth` breakdown (bubblescope/floor/kernel_bandwidth.py).

    On CPU the readbacks come from counting ATen readback ops per step (a CPU trace has no CUDA sync
    to see); on CUDA from the analysis' sync detection, falling back to the same count without it.
    When the read tap's calls lie beside the trace (`<stem>.read_calls.json.gz`), each syncs row also
    names the exact line that read (`bubblescope.profiling.run_sites`; `site` itself is unchanged).
    """
    from bubblescope.profiling.run_sites import annotate_counted_syncs, load_read_calls

    calls, calls_warning = load_read_calls(trace_path)
    full, warning = _analyze_full(trace_path, calls, on_cuda)
    if calls_warning and full is not None:
        full["warnings"].append(calls_warning)
    if full is not None and kernel_bytes:
        from bubblescope.floor.kernel_bandwidth import attach_kernel_bandwidth

        attach_kernel_bandwidth(full, trace_path, kernel_bytes)
    read_sites = (full or {}).get("read_sites") if calls is not None else None
    if on_cuda and full is not None:
        summary = full.get("summary", {})
        idle = summary.get("idle_by_class_ns_per_step", {})
        steps = max(1, int(summary.get("steps", 1) or 1))
        kernels = sum(int(s.get("kernels", 0)) for s in full.get("steps", [])) / steps
        return {
            "blocking_reads_per_step": float(summary.get("blocking_reads_per_step", 0.0)),
            "syncs": full.get("syncs", []),
            "idle_by_class_ns_per_step": {c: int(idle.get(c, 0)) for c in IDLE_CLASSES},
            "gpu_busy_ns_per_step": int(summary.get("gpu_busy_ns_per_step", 0)),
            "idle_ns_per_step": int(summary.get("idle_ns_per_step", 0)),
            "kernels_per_step": kernels,
            "gpu_measured": True,
            "note": None,
            "read_sites": read_sites,
            # Each typical step's idle by class: the samples behind removed-idle intervals (ablate).
            "idle_steps": idle_step_samples(full),
            # Launches and launch gap per step (kernel_bandwidth.launch_path): null without bytes rules.
            "launch_path": (full.get("bandwidth") or {}).get("launch_path"),
        }, full
    counted = count_readbacks(trace_path)
    if calls is not None:
        counted["syncs"], read_sites = annotate_counted_syncs(trace_path, counted, calls)
    note = CPU_NOTE if not on_cuda else f"{warning}; readbacks counted from ATen ops"
    if warning and not on_cuda and full is None and "failed" in warning:
        note = f"{CPU_NOTE} ({warning})"
    return {
        "blocking_reads_per_step": counted["blocking_reads_per_step"],
        "syncs": counted["syncs"],
        # Not measured without a GPU timeline: null, never 0 (bubblescope.analysis.not_measured).
        "idle_by_class_ns_per_step": {c: None for c in IDLE_CLASSES},
        "gpu_busy_ns_per_step": None,
        "idle_ns_per_step": None,
        "kernels_per_step": None,
        "gpu_measured": False,
        "readbacks_per_step": counted["per_step"],
        "note": note,
        "read_sites": read_sites,
    }, full


def _profile_and_analyse(
    workload: Any,
    settings: RunSettings,
    folder: Path,
    prefix: str,
    on_cuda: bool,
    kernel_bytes: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Profiled window → trace file → analysis; names relative to `folder` (all None without a window)."""
    result: dict[str, Any] = {"trace": None, "analysis_file": None, "analysis": None, "full": None}
    if settings.profile_steps == 0:
        return result
    calls_path = read_calls_path(folder / f"{prefix}trace.json.gz")
    # An earlier measurement's calls must never be merged into this trace (their read ids differ).
    calls_path.unlink(missing_ok=True)
    trace_path = profile_window(
        workload,
        steps=settings.profile_steps,
        warmup=min(settings.warmup, 4),
        trace_path=folder / f"{prefix}trace.json.gz",
        read_calls_path=calls_path if settings.read_sites else None,
    )
    result["trace"] = trace_path.name
    result["analysis"], result["full"] = analysis_block(trace_path, on_cuda, kernel_bytes)
    if result["full"] is not None:
        result["analysis_file"] = f"{prefix}analysis.json"
        write_json_atomic(folder / result["analysis_file"], result["full"])
    return result


# Above this, a run's notices say the profiled steps were slower than the timed ones.
PROFILED_SLOWDOWN_NOTICE = 1.10


def profiled_over_timed(full: dict[str, Any] | None, samples_ns: list[list[int]]) -> float | None:
    """Median GPU time of a profiled step ÷ median wall time of a timed step (CUDA traces only).

    The gaps, busy times and blocking reads come from the profiled steps; TPOT from the timed ones.
    Tracing costs something per kernel and per host sync, so this ratio says how far the profiled
    steps describe the timed ones (1.0: the same steps; 1.4: each profiled step ran 40 % longer).
    """
    summary = (full or {}).get("summary") or {}
    profiled = summary.get("gpu_step_ns_median")
    timed = [x for repeat in samples_ns for x in repeat]
    if not profiled or not timed:
        return None
    return round(float(profiled) / statistics.median(timed), 3)


def add_profiled_ratio(
    analysis: dict[str, Any] | None, full: dict[str, Any] | None, samples_ns: list[list[int]]
) -> float | None:
    """Put `profiled_step_over_timed` into a GPU run's record analysis block; returns it."""
    if not analysis or not analysis.get("gpu_measured"):
        return None
    analysis["profiled_step_over_timed"] = ratio = profiled_over_timed(full, samples_ns)
    return ratio


def measure_config(
    workload: Any,
    enabled: frozenset[str],
    *,
    settings: RunSettings,
    record_path: Path,
    workload_info: dict[str, Any],
    bandwidth: tuple[float, str] | None,
    on_repeat: Callable[[int], None] | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> tuple[RunRecord, list[str]]:
    """Measure `enabled` on `workload` and write its RunRecord (and trace, analysis) atomically.

    The HTML page is the caller's to ask for (`bubblescope.report.run_page.write_run_report`): capture
    measures, report renders.

    Artifacts sit beside the record: `<stem>.trace.json.gz`, `<stem>.analysis.json` and, with the read
    tap on, `<stem>.read_calls.json.gz` (stem = record file name without `.json`; `record.json` uses
    plain `trace.json.gz` etc.).

    Args:
        on_repeat: called with the repeat index after each timed repeat (progress displays).
        on_phase: called with a short description when the profiled window and its analysis start.
    Returns:
        (the record, notices for the user).
    """
    on_cuda = workload_on_cuda(workload)
    notices: list[str] = []
    workload.prepare(frozenset(enabled))
    timed = run_timed(
        workload, steps=settings.steps, warmup=settings.warmup, repeats=settings.repeats, on_repeat=on_repeat
    )
    folder, stem = record_path.parent, record_path.name.removesuffix(".json")
    prefix = "" if stem == "record" else f"{stem}."
    if on_phase is not None and settings.profile_steps:
        on_phase(f"profiled window ({settings.profile_steps} steps) and its analysis")
    kernel_bytes = kernel_bytes_block(workload, frozenset(enabled), bandwidth) if on_cuda else None
    profiled = _profile_and_analyse(workload, settings, folder, prefix, on_cuda, kernel_bytes)
    analysis, full = profiled["analysis"], profiled["full"]
    if analysis and analysis.get("note"):
        notices.append(analysis["note"])
    seed = tpot_seed(workload_info.get("name"), enabled)
    summary = summarize_samples(timed.samples_ns, timed.tokens_per_step, seed=seed)
    ratio = add_profiled_ratio(analysis, full, timed.samples_ns)
    if ratio is not None and ratio > PROFILED_SLOWDOWN_NOTICE:
        notices.append(
            f"the profiled steps ran {ratio:.2f}x as long as the timed ones (tracing cost): gaps and "
            "busy times describe the profiled steps, TPOT the timed ones"
        )
    describe = getattr(workload, "describe", None)
    record: RunRecord = {
        "schema": RUN_SCHEMA,
        "created_utc": utc_now(),
        "environment": capture_environment(str(getattr(workload, "device", "cpu"))),
        "workload": {**workload_info, **({"describe": describe()} if callable(describe) else {})},
        "preset": workload_info.get("preset"),
        "switches": switches_block(frozenset(enabled), workload.switches(), on_cuda),
        "settings": {**asdict(settings), "timing": timed.timing},
        "samples_ns": timed.samples_ns,
        "tokens_per_step": timed.tokens_per_step,
        "host_samples_ns": timed.host_samples_ns,
        "repeat_wall_ns": timed.repeat_wall_ns,
        "tokens": timed.tokens,
        "summary": summary,
        "floor": compute_floor(workload, frozenset(enabled), summary["tpot_ms"], bandwidth),
        "kernel_bytes": kernel_bytes,
        "analysis": analysis,
        "trace": profiled["trace"],
        "analysis_file": profiled["analysis_file"],
        "report": None,
    }
    # Speculative workloads add spec (kind, block, acceptance), the measured accept length and the
    # distinct experts per verify; their TPOT is already step time / tokens emitted.
    spec_summary = getattr(workload, "spec_summary", None)
    if callable(spec_summary):
        record.update(spec_summary())
    save_record(record, record_path)
    return record, notices
