"""A short profiled window of decode steps, exported as a gzipped Kineto trace.

Every step runs inside an NVTX range (domain `bubblescope`, so the same ranges show in Nsight
Systems) and a `record_function("bubblescope.step")`, which is how the analysis segments steps.
The window is separate from the timed run: profiling inflates host time, so its numbers never
feed TPOT.

With `read_calls_path`, the read tap (`capture/user_reads.py`, the one `bubblescope profile` uses) is
installed for the window only and records the exact Python stack of every call that reads a device
value during the recorded steps; the calls are written beside the trace (`bubblescope.profiling.run_sites`
merges them into the analysis). The tap is never installed during timed runs.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bubblescope.capture.quiet_stderr import without_profiler_noise
from bubblescope.capture.timed import reset_if_possible
from bubblescope.files.atomic import write_bytes_atomic
from bubblescope.trace.markers import WINDOW_DRAIN

STEP_MARKER = "bubblescope.step"
NVTX_DOMAIN = "bubblescope"


def _nvtx_range_factory(on_cuda: bool) -> Any:
    """A context-manager factory for one step's NVTX range, or a no-op one when NVTX is absent."""
    try:
        import nvtx  # the PyPI package: supports domains

        return lambda name: nvtx.annotate(name, domain=NVTX_DOMAIN)
    except ImportError:
        pass
    if on_cuda:
        import torch

        @contextlib.contextmanager
        def torch_range(name: str) -> Iterator[None]:
            # torch.cuda.nvtx has no domains; the message carries it instead.
            torch.cuda.nvtx.range_push(f"{NVTX_DOMAIN}:{name}")
            try:
                yield
            finally:
                torch.cuda.nvtx.range_pop()

        return torch_range
    return lambda name: contextlib.nullcontext()


def _profiler_kwargs(torch: Any, on_cuda: bool) -> dict[str, Any]:
    from torch.profiler import ProfilerActivity

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
    kwargs: dict[str, Any] = {"activities": activities, "with_stack": True, "record_shapes": True}
    config_cls = getattr(torch.profiler, "_ExperimentalConfig", None)
    if on_cuda and config_cls is not None:
        try:
            kwargs["experimental_config"] = config_cls(enable_cuda_sync_events=True)
        except TypeError:
            # Older torch without sync events: the analysis falls back to runtime-call detection.
            pass
    return kwargs


def _read_tap(on_cuda: bool) -> Any:
    """The read tap, installed and not yet recording (the window's steps switch it on)."""
    from bubblescope.capture.user_reads import ReadTap

    return ReadTap(cuda_run=on_cuda).install()


def profile_window(
    workload: Any,
    *,
    steps: int,
    warmup: int,
    trace_path: str | os.PathLike[str],
    read_calls_path: str | os.PathLike[str] | None = None,
) -> Path:
    """Profile `steps` decode steps (after `warmup` untimed ones) and write a gzipped trace atomically.

    Args:
        workload: a prepared Workload.
        steps: profiled steps (>= 1).
        warmup: steps run before the profiler starts.
        trace_path: destination, `.json.gz`.
        read_calls_path: where to write the read tap's calls (`.json.gz`, atomically); None: no tap.
            Default None.
    Returns:
        the trace path.
    """
    import torch
    from torch.profiler import profile, record_function, schedule

    on_cuda = str(getattr(workload, "device", "cpu")).startswith("cuda") and torch.cuda.is_available()
    nvtx_range = _nvtx_range_factory(on_cuda)
    reset_if_possible(workload)
    for _ in range(warmup):
        workload.step()
    if on_cuda:
        torch.cuda.synchronize()
    # One step inside the profiler but outside the recorded window: CUPTI allocates its activity
    # buffers during the first profiled launch (2.5 ms on the H200), and a run-ahead loop needs a step
    # to refill the launch queue after the synchronize above. Recording it would put that start-up
    # idle into step 0.
    window = schedule(wait=0, warmup=1, active=steps, repeat=1)
    tap = _read_tap(on_cuda) if read_calls_path is not None else None
    try:
        # The loop stays in this function: the window drain's frame is `profile_window` in traces, which
        # the report's findings recognise as the tool's (report/findings.py).
        with without_profiler_noise(), profile(**_profiler_kwargs(torch, on_cuda), schedule=window) as prof:
            for index in range(steps + 1):
                if tap is not None:
                    # Recorded steps only: step 0's markers are not in the trace, the drain is ours.
                    tap.state.recording, tap.state.step = index >= 1, index - 1
                with nvtx_range(STEP_MARKER), record_function(STEP_MARKER):
                    workload.step()
                if tap is not None:
                    tap.state.recording = False
                if index == steps and on_cuda:
                    # Drain before the window closes so the last steps' GPU work is recorded. The
                    # annotation tells the analysis this synchronize is the tool's, not the workload's.
                    with record_function(WINDOW_DRAIN):
                        torch.cuda.synchronize()
                prof.step()
    finally:
        if tap is not None:
            tap.uninstall()
    if tap is not None:
        from bubblescope.files.atomic import write_json_atomic
        from bubblescope.profiling.outputs import call_dicts

        write_json_atomic(Path(read_calls_path), call_dicts(tap.state.calls), indent=None)
    target = Path(trace_path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, raw_name = tempfile.mkstemp(prefix=".trace.", suffix=".json", dir=target.parent)
    os.close(fd)
    try:
        prof.export_chrome_trace(raw_name)
        raw_bytes = Path(raw_name).read_bytes()
    finally:
        Path(raw_name).unlink(missing_ok=True)
    return write_bytes_atomic(target, gzip.compress(raw_bytes, compresslevel=6, mtime=0))
