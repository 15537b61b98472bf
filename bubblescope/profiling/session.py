"""`bubblescope.profile(...)`: profile the user's own decode loop, step by step, like torch.profiler.

    with bubblescope.profile(out="runs/mine", active=8, warmup=2) as prof:
        for _ in range(n_tokens):
            with prof.step():                # or: prof.step() at the top of each iteration
                logits = model(tok); tok = logits.argmax(-1)

Step k opens when `prof.step()` (or the bare `bubblescope.step()`, or a --step-frame call) is made and
closes at the next one, at the end of its `with` block, or when the session ends. Steps 0..warmup-1 run
under the profiler without being recorded (CUPTI start-up, lazy init, compiles); the next `active`
steps are recorded; later steps run unprofiled. Each step is a `record_function("bubblescope.step")`
annotation and an NVTX range (domain `bubblescope`). While steps are recorded, the read tap
(`capture/user_reads.py`) takes the Python stack of every host-blocking read. On exit the trace, the
analysis with exact read lines, the HTML report and a `bubblescope.profile/1` record are written
atomically under `out` (`bubblescope.profiling.outputs`).

torch is imported when the session starts, never by `import bubblescope`.
"""

from __future__ import annotations

import gzip
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bubblescope.errors import ConfigError
from bubblescope.trace.markers import OWN_SYNC_MARKER

if TYPE_CHECKING:
    from bubblescope.records.analysis_result import AnalysisResult

STEP_MARKER = "bubblescope.step"
_CURRENT: list[ProfileSession] = []


class StepHandle:
    """What `prof.step()` returns: usable bare (the step runs until the next call) or as `with`."""

    def __init__(self, session: ProfileSession, index: int) -> None:
        self._session = session
        self._index = index

    def __enter__(self) -> StepHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._session._open_index == self._index:
            self._session._close_step(at_block_end=True)


class ProfileSession:
    """Profile your own decode loop (`bubblescope.profile` is this class); use it as a context manager.

        with bubblescope.profile(out="runs/mine", active=8, warmup=2) as prof:
            for _ in range(n_tokens):
                with prof.step():        # or a bare prof.step() / bubblescope.step() per iteration
                    tok = model(tok).argmax(-1)
        prof.result.reads                # each blocking read at its exact line, as a DataFrame

    On exit writes trace.json.gz, analysis.json (each blocking read at its exact line), report.html and
    profile.json under `out`; `prof.result` is the analysis as an `AnalysisResult` (docs/api.md).
    torch is imported when the session is entered.

    Args:
        out: output folder (created).
        active: recorded steps (>= 1). Default 8.
        warmup: steps run before recording (>= 0). Default 2.
        timed: steps timed before profiling (>= 0), for a TPOT with its interval (`prof.timed`,
            profile.json `timed`): `warmup` steps untimed, then `timed` steps timed at step boundaries
            (CUDA events on a GPU, the host clock on CPU; nothing synchronises between them, no
            profiler, no read tap), then the profiled `warmup` + `active`. Default 0 (not timed).
        read_sites: take exact-line stacks of blocking reads. Default True.
        record_all: record from entry to exit with no schedule (steps still annotated); the CLI uses it
            when steps come from a marker regex. Default False.
        step_marker: regex for step annotations, passed to the analysis. Default None.
        progress: print a progress line on stderr. Default True.
        command: the command line to keep in the record. Default None.
    """

    def __init__(
        self,
        out: str | os.PathLike[str] = "runs/profile",
        *,
        active: int = 8,
        warmup: int = 2,
        timed: int = 0,
        read_sites: bool = True,
        record_all: bool = False,
        step_marker: str | None = None,
        progress: bool = True,
        command: list[str] | None = None,
    ) -> None:
        if active < 1 or warmup < 0 or timed < 0:
            raise ConfigError(
                f"need active >= 1, warmup >= 0 and timed >= 0 (got active={active}, warmup={warmup}, "
                f"timed={timed})"
            )
        if timed and record_all:
            raise ConfigError(
                "timed steps need step boundaries before recording (prof.step(), bubblescope.step() or "
                "--step-frame); a whole-run recording cut by --step-marker cannot time them"
            )
        self.out = Path(out)
        self.active, self.warmup, self.timed = active, warmup, timed
        # Index of the first profiled step: after `warmup` untimed and `timed` timed steps.
        self._profile_start = warmup + timed if timed else 0
        self.timed_samples: tuple[list[int], list[int]] | None = None
        self._timer: Any = None
        self.read_sites, self.record_all = read_sites, record_all
        self.step_marker, self.progress, self.command = step_marker, progress, command
        self.steps_started = 0
        self.explicit_steps = False
        self.trailing_step_dropped = False
        self.steps_recorded = 0
        self.trace_bytes: bytes | None = None
        self.error: str | None = None
        self.exit_code: int | None = None
        self.outputs: dict[str, Any] = {}
        self._result: AnalysisResult | None = None
        self._open_index: int | None = None
        self._annotation: Any = None
        self._nvtx: Any = None
        self._torch_prof: Any = None
        self._tap: Any = None
        self._on_cuda = False
        self._started_s = 0.0
        # A forked child (the profiled script's fork) shares this object; only this process writes.
        self._owner_pid = os.getpid()
        self._out_lock: Any = None

    # -- public ------------------------------------------------------------------------------------------
    @property
    def result(self) -> AnalysisResult | None:
        """The analysis as DataFrames (`bubblescope.AnalysisResult`: `reads`, `steps`, `findings`, …),
        built on first access after the session exited; None when nothing was analysed (no step
        recorded, or the analysis refused the trace: `outputs["notices"]` says why).

        Raises:
            ConfigError: read before the `with` block exited.
        """
        if not self.outputs:
            raise ConfigError("prof.result exists once the `with bubblescope.profile(...)` block has exited")
        analysis = self.outputs.get("analysis")
        if analysis is None:
            return None
        if self._result is None:
            from bubblescope.records.analysis_result import AnalysisResult

            self._result = AnalysisResult(analysis, source=str(self.out))
        return self._result

    def __enter__(self) -> ProfileSession:
        import torch

        from bubblescope.capture.profiled import _nvtx_range_factory
        from bubblescope.capture.user_reads import ReadTap
        from bubblescope.files.out_lock import out_lock

        # One writer per folder (`bubblescope profile --out` and `bubblescope.profile(out=...)` alike);
        # held until the files are written.
        self._out_lock = out_lock(self.out, "profile")
        self._out_lock.__enter__()
        try:
            self._torch = torch
            self._on_cuda = torch.cuda.is_available()
            self._nvtx_range = _nvtx_range_factory(self._on_cuda)
            self._started_s = time.perf_counter()
            if self.read_sites and not self.timed:
                self._tap = ReadTap(cuda_run=self._on_cuda).install()
        except BaseException:
            self._out_lock.__exit__(None, None, None)
            self._out_lock = None
            raise
        _CURRENT.append(self)
        if self.record_all:
            self._start_profiler(schedule=None)
            self._set_recording(True)
        self._say(self._plan_text())
        return self

    def step(self) -> StepHandle:
        """End the current step (if one is open) and start the next; returns a handle usable as `with`."""
        if self._open_index is not None:
            self._close_step()
        self._open_step()
        return StepHandle(self, self.steps_started - 1)

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if os.getpid() != self._owner_pid or self.outputs:
            # A forked child leaving the block, or a session already closed (by `os._exit`, faults.py).
            return
        try:
            if self._open_index is not None:
                # A step still open now ran until the session closed: after the loop's last iteration
                # it also holds whatever followed the loop, so the analysis leaves it out.
                self.trailing_step_dropped = self._phase(self._open_index) == "active"
                self._close_step()
            self._finish_timing()
            self._stop_profiler()
        finally:
            if self._tap is not None:
                self._tap.uninstall()
            if _CURRENT and _CURRENT[-1] is self:
                _CURRENT.pop()
        if exc is not None and self.error is None and not isinstance(exc, (SystemExit, KeyboardInterrupt)):
            self.error = one_line_error(exc, tb)
        from bubblescope.profiling.outputs import write_outputs

        try:
            self.outputs = write_outputs(self)
        finally:
            if self._out_lock is not None:
                self._out_lock.__exit__(None, None, None)
                self._out_lock = None
        self._say(self.outputs.get("summary_line", ""))

    # -- steps -------------------------------------------------------------------------------------------
    def _phase(self, index: int) -> str:
        """untimed / timed (before profiling, with `timed`), warmup, active, done."""
        if self.record_all:
            return "active"
        if index < self._profile_start:
            return "untimed" if index < self.warmup else "timed"
        index -= self._profile_start
        if index < self.warmup:
            return "warmup"
        return "active" if index < self.warmup + self.active else "done"

    def _open_step(self) -> None:
        index = self.steps_started
        self.steps_started += 1
        phase = self._phase(index)
        self._open_index = index
        if phase == "timed":
            if self._timer is None:
                from bubblescope.capture.timed import StepTimer

                self._timer = StepTimer(self._torch, on_cuda=self._on_cuda, steps=self.timed)
            self._timer.mark()
        if phase in ("untimed", "timed"):
            self._say_progress(index)
            return
        if self._timer is not None and self.timed_samples is None:
            # This boundary ends the last timed step; the profiled steps start now.
            self._timer.mark()
            self._finish_timing()
        if phase == "done":
            return
        if self._torch_prof is None and not self.record_all:
            from torch.profiler import schedule

            with warnings.catch_warnings():
                # warmup=0 is the user's choice; torch's "won't be using warmup" adds nothing to it.
                warnings.filterwarnings("ignore", message=".*warmup.*")
                window = schedule(wait=0, warmup=self.warmup, active=self.active, repeat=1)
            self._start_profiler(window)
        recorded = phase == "active"
        if self._tap is not None:
            self._tap.state.step = self.steps_recorded if recorded else -1
        self._set_recording(recorded)
        self._nvtx = self._nvtx_range(STEP_MARKER)
        self._nvtx.__enter__()
        from torch.autograd.profiler import record_function

        self._annotation = record_function(STEP_MARKER)
        self._annotation.__enter__()

    def _close_step(self, *, at_block_end: bool = False) -> None:
        index, self._open_index = self._open_index, None
        if at_block_end and index is not None and self._timer is not None and self._phase(index) == "timed":
            # Where a `with prof.step():` step ended, in case no later step comes to end it.
            self._timer.mark_close()
        if index is None or self._annotation is None:
            self._open_index = None
            return
        self._annotation.__exit__(None, None, None)
        self._nvtx.__exit__(None, None, None)
        self._annotation = self._nvtx = None
        phase = self._phase(index)
        self._set_recording(False)
        if phase == "active":
            self.steps_recorded += 1
        if self._torch_prof is not None and not self.record_all:
            if index == self._profile_start + self.warmup + self.active - 1:
                self._stop_profiler()
            else:
                # Starting the recording synchronises the device: bubblescope's own, not the loop's.
                with self._own_marker(OWN_SYNC_MARKER):
                    self._torch_prof.step()
        self._say_progress(index)

    def _finish_timing(self) -> None:
        """Synchronise once, keep the timed steps' samples, and put the read tap in for what follows."""
        if self._timer is None or self.timed_samples is not None:
            return
        self.timed_samples = self._timer.finish()
        if self.read_sites and self._tap is None:
            from bubblescope.capture.user_reads import ReadTap

            self._tap = ReadTap(cuda_run=self._on_cuda).install()

    # -- profiler ----------------------------------------------------------------------------------------
    def _start_profiler(self, schedule: Any) -> None:
        from bubblescope.capture.profiled import _profiler_kwargs

        kwargs = _profiler_kwargs(self._torch, self._on_cuda)
        if schedule is not None:
            kwargs["schedule"] = schedule
        self._torch_prof = self._torch.profiler.profile(**kwargs)
        self._torch_prof.__enter__()

    def _stop_profiler(self) -> None:
        prof, self._torch_prof = self._torch_prof, None
        if prof is None:
            return
        self._set_recording(False)
        if self._on_cuda and self._torch.cuda.is_initialized():
            # Drain so the last steps' GPU work is in the trace; marked so the analysis leaves it out.
            with self._own_marker(OWN_SYNC_MARKER):
                self._torch.cuda.synchronize()
        prof.__exit__(None, None, None)
        if self.steps_recorded == 0 and not self.record_all:
            return
        self.trace_bytes = _exported_trace(prof, self.out)

    def _own_marker(self, name: str) -> Any:
        # Not _RecordFunctionFast: the profiler starts or stops inside this range, which that one asserts on.
        from torch.autograd.profiler import record_function

        return record_function(name)

    def _set_recording(self, on: bool) -> None:
        if self._tap is not None:
            self._tap.state.recording = on

    # -- progress ----------------------------------------------------------------------------------------
    def _plan_text(self) -> str:
        if self.record_all:
            return f"bubblescope: recording the whole run -> {self.out}/"
        timed = f"{self.warmup} untimed + {self.timed} timed + " if self.timed else ""
        return f"bubblescope: {timed}{self.warmup} warm-up + {self.active} recorded steps -> {self.out}/"

    def _say_progress(self, index: int) -> None:
        if not self.progress:
            return
        phase = self._phase(index)
        if phase == "done" or (self.record_all and index % 50):
            return
        total = self._profile_start + self.warmup + self.active
        label = {"warmup": "warm-up", "untimed": "warm-up, untimed"}.get(phase, phase)
        line = f"bubblescope: step {index + 1}/{total} ({label.replace('active', 'recorded')})"
        if sys.stderr.isatty():
            end = "\n" if index + 1 == total else ""
            print(f"\r{line}", end=end, file=sys.stderr, flush=True)
        elif index + 1 in (self.warmup, self._profile_start, total) or index == 0:
            print(line, file=sys.stderr, flush=True)

    def _say(self, text: str) -> None:
        if self.progress and text:
            from bubblescope.report.escape import plain_console_text

            # The summary names the script's files and functions: control characters shown, not sent.
            print(plain_console_text(text), file=sys.stderr, flush=True)


def _exported_trace(prof: Any, folder: Path) -> bytes:
    folder.mkdir(parents=True, exist_ok=True)
    fd, raw_name = tempfile.mkstemp(prefix=".trace.", suffix=".json", dir=folder)
    os.close(fd)
    try:
        prof.export_chrome_trace(raw_name)
        return gzip.compress(Path(raw_name).read_bytes(), compresslevel=6, mtime=0)
    finally:
        Path(raw_name).unlink(missing_ok=True)


def one_line_error(exc: BaseException, tb: Any) -> str:
    """`ValueError: bad token (my_loop.py:41)`: the exception and the innermost user line it left."""
    import traceback

    from bubblescope.capture.user_frames import frame_class

    where = ""
    for entry in reversed(traceback.extract_tb(tb)):
        if frame_class(entry.filename) == "user":
            where = f" ({os.path.basename(entry.filename)}:{entry.lineno})"
            break
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {message}{where}" if message else f"{type(exc).__name__}{where}"


def profile(out: str | os.PathLike[str] = "runs/profile", *, active: int = 8, warmup: int = 2, **kwargs: Any):
    """Profile the user's loop; see `ProfileSession` for the arguments. Use as a context manager."""
    return ProfileSession(out, active=active, warmup=warmup, **kwargs)


def step() -> StepHandle | None:
    """Mark a step boundary in the innermost active `bubblescope.profile` session (no-op without one)."""
    if not _CURRENT:
        return None
    session = _CURRENT[-1]
    session.explicit_steps = True
    return session.step()
