"""Cost of the read tap (exact lines of blocking reads) per decode step, tap on vs off in the same run.

Two measurements, each alternating on/off over `--repeats` rounds (median reported, same-run ratio):
- profiled: a `bubblescope.profile` window (warm-up 2, `--active` steps) around the workload's step;
  host wall time per step between two synchronizes inside the window, read_sites on vs off.
- plain: `--plain-steps` steps with no profiler, the tap installed and recording vs not installed
  (what an always-on tap would cost).
Workloads: the reference `ling3-tiny` with every usable switch on (what `bubblescope run --preset
ling3-tiny --all` decodes), and the gpt-fast-style compiled loop of examples/profile (one `.item()` per
token, so the tap takes a stack every step).

    python benchmarks/profile_overhead.py OUT_DIR [--repeats 5] [--active 24] [--skip-ling]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import bubblescope
from bubblescope.capture.timed import reset_if_possible
from bubblescope.capture.user_reads import ReadTap


def profiled_ns_per_step(step: Callable[[], Any], out: Path, active: int, read_sites: bool) -> dict[str, Any]:
    """Host ns per step inside a profiled window (synchronised at both ends), and the analysis' medians."""
    with bubblescope.profile(out=out, active=active, warmup=2, read_sites=read_sites, progress=False) as prof:
        for index in range(2 + active):
            if index == 2:
                torch.cuda.synchronize()
                start_ns = time.perf_counter_ns()
            if index == 1 + active:
                torch.cuda.synchronize()
                end_ns = time.perf_counter_ns()
            with prof.step():
                step()
    summary = (prof.outputs.get("analysis") or {}).get("summary") or {}
    return {
        "host_ns_per_step": (end_ns - start_ns) / (active - 1),
        "gpu_step_ns_median": summary.get("gpu_step_ns_median"),
        "blocking_reads_per_step": summary.get("blocking_reads_per_step"),
    }


def plain_ns_per_step(step: Callable[[], Any], steps: int, tap_on: bool) -> float:
    tap = ReadTap(cuda_run=True).install() if tap_on else None
    if tap is not None:
        tap.state.recording = True
    try:
        torch.cuda.synchronize()
        start_ns = time.perf_counter_ns()
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
        return (time.perf_counter_ns() - start_ns) / steps
    finally:
        if tap is not None:
            tap.uninstall()


def measure(name: str, step: Callable[[], Any], reset: Callable[[], None], args: argparse.Namespace) -> dict:
    rows: dict[str, list] = {"profiled_off": [], "profiled_on": [], "plain_off": [], "plain_on": []}
    for repeat in range(args.repeats):
        order = (False, True) if repeat % 2 == 0 else (True, False)
        for tap_on in order:
            reset()
            key = "on" if tap_on else "off"
            rows[f"profiled_{key}"].append(
                profiled_ns_per_step(step, args.scratch / f"{name}-r{repeat}-{key}", args.active, tap_on)
            )
            reset()
            rows[f"plain_{key}"].append(plain_ns_per_step(step, args.plain_steps, tap_on))
    med = {
        k: statistics.median(r["host_ns_per_step"] if isinstance(r, dict) else r for r in v)
        for k, v in rows.items()
    }
    result = {
        "workload": name,
        "median_ns_per_step": med,
        "profiled_ratio_on_over_off": med["profiled_on"] / med["profiled_off"],
        "plain_ratio_on_over_off": med["plain_on"] / med["plain_off"],
        "reads_per_step": rows["profiled_on"][0]["blocking_reads_per_step"],
        "raw": rows,
    }
    print(
        f"{name}: profiled {med['profiled_off'] / 1e3:.1f} -> {med['profiled_on'] / 1e3:.1f} us/step "
        f"(x{result['profiled_ratio_on_over_off']:.4f}); plain {med['plain_off'] / 1e3:.1f} -> "
        f"{med['plain_on'] / 1e3:.1f} us/step (x{result['plain_ratio_on_over_off']:.4f}); "
        f"reads/step {result['reads_per_step']}",
        flush=True,
    )
    return result


def ling3_tiny_step() -> tuple[Callable[[], Any], Callable[[], None]]:
    from bubblescope.capture.setup import build_workload, usable_switches

    workload = build_workload(None, "ling3-tiny", max_steps=8192).workload
    workload.prepare(frozenset(usable_switches(workload.switches(), True)))
    for _ in range(16):
        workload.step()
    return workload.step, lambda: reset_if_possible(workload)


def gpt_fast_step() -> tuple[Callable[[], Any], Callable[[], None]]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "profile"))
    from gpt_fast_loop import TinyDecoder, decode_one_token

    model = TinyDecoder().to("cuda", torch.bfloat16).eval()
    compiled = torch.compile(decode_one_token, mode="reduce-overhead")
    carry = {
        "token": torch.tensor([1], device="cuda"),
        "state": torch.zeros(1, 1024, device="cuda", dtype=torch.bfloat16),
    }

    def step() -> int:
        with torch.inference_mode():
            token, state = compiled(model, carry["token"], carry["state"])
            carry["token"], carry["state"] = token.clone(), state.clone()
            return token.item()

    for _ in range(8):
        step()
    return step, lambda: None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--active", type=int, default=24)
    parser.add_argument("--plain-steps", type=int, default=200)
    parser.add_argument("--skip-ling", action="store_true")
    args = parser.parse_args()
    # Each window's trace/analysis/report lands in scratch, not in OUT (only the summary is kept).
    args.scratch = Path(tempfile.mkdtemp(prefix="bs_overhead_"))
    results = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "args": sys.argv[1:],
        "rows": [],
    }
    makers = [("gpt-fast-compiled", gpt_fast_step)] + (
        [] if args.skip_ling else [("ling3-tiny-all", ling3_tiny_step)]
    )
    for name, make in makers:
        try:
            step, reset = make()
            results["rows"].append(measure(name, step, reset, args))
        except Exception as exc:  # noqa: BLE001 - keep the other workload's numbers
            print(f"{name}: failed ({type(exc).__name__}: {exc})", flush=True)
            results["rows"].append({"workload": name, "error": f"{type(exc).__name__}: {exc}"})
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "overhead.json").write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
