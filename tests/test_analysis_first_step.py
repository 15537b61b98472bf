"""Per-step means leave out the profiled window's first step only when it ran long (window start-up)."""

from __future__ import annotations

from bubblescope.analysis.traces import FIRST_STEP_FACTOR, _summary

US = 1000


def _step(gpu_us: float, idle_us: float = 0.0) -> dict:
    return {
        "dur_ns": 30 * US,
        "gpu_dur_ns": int(gpu_us * US),
        "gpu_busy_ns": int((gpu_us - idle_us) * US),
        "idle_ns": int(idle_us * US),
        "idle_by_class_ns": {"sync": 0, "host": int(idle_us * US), "launch": 0, "dependency": 0},
        "blocking_reads": 1,
        "kernels": 3,
    }


def test_a_long_first_step_is_left_out_of_the_means_but_its_reads_count() -> None:
    steps = [_step(66, idle_us=2), _step(39), _step(39), _step(39)]
    summary = _summary(steps)
    assert summary["outlier_steps"] == 1
    assert summary["gpu_busy_ns_per_step"] == 39 * US
    assert summary["idle_by_class_ns_per_step"]["host"] == 0
    assert summary["blocking_reads_per_step"] == 1.0


def test_a_first_step_within_the_factor_stays_in() -> None:
    near = 40 * FIRST_STEP_FACTOR * 0.99
    summary = _summary([_step(near), _step(40), _step(40)])
    assert summary["outlier_steps"] == 0
    assert summary["gpu_step_ns_per_step"] == round((near + 80) * US / 3)


def test_two_steps_are_too_few_to_call_the_first_one_a_ramp() -> None:
    summary = _summary([_step(90), _step(40)])
    assert summary["outlier_steps"] == 0
