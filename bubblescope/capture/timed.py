"""Timed decode steps with no profiler: the per-step samples TPOT is computed from.

How a step is timed (the choice matters at batch 1):
  * CPU: `time.perf_counter_ns()` around each `step()`; the host loop is the whole story.
  * CUDA: no per-step synchronisation. A synchronize per step would drain the launch queue and
    erase exactly the run-ahead that `no_readback`-style switches buy. Instead a CUDA event is
    recorded on the current stream before every step and once after the last one; after the
    repeat ends (one `synchronize`), the elapsed time between consecutive events is the step's
    duration on the device timeline. In steady state that equals the host loop's throughput, and
    idle gaps caused by the host (a blocking read, slow Python) fall inside it, so it is what a
    user feels per token. Host wall times per step are kept too (`host_samples_ns`) and the repeat's
    host wall including the final synchronize (`repeat_wall_ns`) as a cross-check.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bubblescope.errors import ConfigError


@dataclass
class TimedSamples:
    """Per-step measurements of all repeats.

    Attributes:
        samples_ns: [repeats][steps] wall ns per step (device timeline on CUDA, host on CPU).
        tokens_per_step: same shape, tokens each step returned.
        host_samples_ns: same shape, host wall ns of each `step()` call.
        repeat_wall_ns: [repeats] host wall of each repeat, final synchronize included.
        tokens: ids emitted in the first repeat (when the workload offers `tokens()`).
        timing: "cuda-events" or "host-perf-counter".
    """

    samples_ns: list[list[int]] = field(default_factory=list)
    tokens_per_step: list[list[int]] = field(default_factory=list)
    host_samples_ns: list[list[int]] = field(default_factory=list)
    repeat_wall_ns: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    timing: str = "host-perf-counter"


def _call_step(workload: Any) -> int:
    emitted = workload.step()
    if isinstance(emitted, bool) or not isinstance(emitted, int) or emitted < 0:
        raise ConfigError(f"workload step() must return a token count (int >= 0), got {emitted!r}")
    return emitted


def reset_if_possible(workload: Any) -> None:
    reset = getattr(workload, "reset", None)
    if callable(reset):
        reset()


def _time_repeat_host(workload: Any, steps: int) -> tuple[list[int], list[int], list[int], int]:
    step_ns, tokens = [], []
    repeat_start_ns = time.perf_counter_ns()
    for _ in range(steps):
        start_ns = time.perf_counter_ns()
        tokens.append(_call_step(workload))
        step_ns.append(time.perf_counter_ns() - start_ns)
    return step_ns, list(step_ns), tokens, time.perf_counter_ns() - repeat_start_ns


def _time_repeat_cuda(workload: Any, steps: int, torch: Any) -> tuple[list[int], list[int], list[int], int]:
    events = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
    host_ns, tokens = [], []
    torch.cuda.synchronize()
    repeat_start_ns = time.perf_counter_ns()
    for index in range(steps):
        events[index].record()
        start_ns = time.perf_counter_ns()
        tokens.append(_call_step(workload))
        host_ns.append(time.perf_counter_ns() - start_ns)
    events[steps].record()
    # The only synchronisation of the repeat, after its last step.
    torch.cuda.synchronize()
    repeat_wall_ns = time.perf_counter_ns() - repeat_start_ns
    device_ns = [int(round(events[i].elapsed_time(events[i + 1]) * 1e6)) for i in range(steps)]
    return device_ns, host_ns, tokens, repeat_wall_ns


def run_timed(
    workload: Any,
    *,
    steps: int,
    warmup: int,
    repeats: int,
    on_repeat: Callable[[int], None] | None = None,
) -> TimedSamples:
    """Run `repeats` x (`warmup` untimed + `steps` timed) decode steps; `reset()` between repeats.

    Args:
        workload: a prepared Workload.
        steps, warmup, repeats: counts (steps >= 1, repeats >= 1, warmup >= 0).
        on_repeat: called with the repeat index after each repeat (progress bars).
    Returns:
        TimedSamples with [repeats][steps] lists.
    """
    if steps < 1 or repeats < 1 or warmup < 0:
        raise ConfigError("need --steps >= 1, --repeats >= 1 and --warmup >= 0")
    import torch

    on_cuda = str(getattr(workload, "device", "cpu")).startswith("cuda") and torch.cuda.is_available()
    result = TimedSamples(timing="cuda-events" if on_cuda else "host-perf-counter")
    for repeat in range(repeats):
        reset_if_possible(workload)
        for _ in range(warmup):
            _call_step(workload)
        if on_cuda:
            device_ns, host_ns, tokens, wall_ns = _time_repeat_cuda(workload, steps, torch)
        else:
            device_ns, host_ns, tokens, wall_ns = _time_repeat_host(workload, steps)
        result.samples_ns.append(device_ns)
        result.host_samples_ns.append(host_ns)
        result.tokens_per_step.append(tokens)
        result.repeat_wall_ns.append(wall_ns)
        if repeat == 0 and callable(getattr(workload, "tokens", None)):
            result.tokens = [int(t) for t in workload.tokens()]
        if on_repeat is not None:
            on_repeat(repeat)
    return result


class StepTimer:
    """Times consecutive steps of somebody's own loop (`bubblescope.profile(timed=N)`) as `run` does.

    `mark()` at each step boundary records a CUDA event on the current stream (on a GPU) and reads the
    host clock; nothing synchronises until `finish()`, which synchronises once. A step lasts from its
    boundary to the next one. `mark_close()` at the end of a `with prof.step():` block keeps where that
    step ended, used only when no later boundary comes (the loop ended).

    Args:
        torch: the torch module. on_cuda: time on the device timeline. steps: how many steps to time.
    """

    def __init__(self, torch: Any, *, on_cuda: bool, steps: int) -> None:
        self._torch, self.on_cuda, self.steps = torch, on_cuda, steps
        # Made before the loop is timed, so creating them costs none of its steps.
        self._events = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)] if on_cuda else []
        self._close_event = torch.cuda.Event(enable_timing=True) if on_cuda else None
        self._host_ns: list[int] = []
        self._close_host_ns: int | None = None

    @property
    def marks(self) -> int:
        return len(self._host_ns)

    def mark(self) -> None:
        if self.on_cuda:
            self._events[len(self._host_ns)].record()
        self._host_ns.append(time.perf_counter_ns())
        self._close_host_ns = None

    def mark_close(self) -> None:
        if self._close_event is not None:
            self._close_event.record()
        self._close_host_ns = time.perf_counter_ns()

    def finish(self) -> tuple[list[int], list[int]]:
        """(step ns on the device timeline — host clock on CPU —, host ns) of each completed step."""
        ends_at_close = self._close_host_ns is not None
        host = self._host_ns + ([self._close_host_ns] if self._close_host_ns is not None else [])
        host_ns = [int(b - a) for a, b in zip(host, host[1:], strict=False)]
        if not self.on_cuda:
            return host_ns, host_ns
        # The only synchronisation of the timed steps, after the last one.
        self._torch.cuda.synchronize()
        events = self._events[: len(self._host_ns)] + ([self._close_event] if ends_at_close else [])
        device_ns = [int(round(a.elapsed_time(b) * 1e6)) for a, b in zip(events, events[1:], strict=False)]
        return device_ns, host_ns
