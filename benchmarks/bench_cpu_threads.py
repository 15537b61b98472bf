"""CPU TPOT of the debug preset with 1, 2 and torch's default intra-op threads (issue 25: `run` on CPU).

Builds the reference workload once, then times `--steps` decode steps per trial, the thread counts
interleaved (1, 2, default, 1, 2, default, ...) so that other load on the box hits each alike; prints
the median ms/step per setting and the same-run ratios.

    .venv/bin/python benchmarks/bench_cpu_threads.py --trials 5 --steps 32
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--preset", default="debug")
    args = parser.parse_args()

    import torch

    from bubblescope.capture.setup import build_workload

    default_threads = torch.get_num_threads()
    workload = build_workload(None, args.preset, max_steps=args.steps * args.trials * 3 + 64).workload
    workload.prepare(frozenset())
    settings = {"1": 1, "2": 2, f"default ({default_threads})": default_threads}
    per_step_ms: dict[str, list[float]] = {name: [] for name in settings}
    for _ in range(args.trials):
        for name, threads in settings.items():
            torch.set_num_threads(threads)
            workload.reset()
            for _ in range(4):
                workload.step()
            start = time.perf_counter()
            for _ in range(args.steps):
                workload.step()
            per_step_ms[name].append((time.perf_counter() - start) / args.steps * 1e3)
            print(f"  trial: threads {name}: {per_step_ms[name][-1]:.1f} ms/step", flush=True)
    medians = {name: statistics.median(values) for name, values in per_step_ms.items()}
    for name, values in per_step_ms.items():
        spread = f"{min(values):.1f}-{max(values):.1f}"
        print(f"threads {name:>12}: median {medians[name]:7.2f} ms/step  (trials {spread} ms)")
    base = medians["1"]
    for name, value in medians.items():
        print(f"  {name} / 1 thread: {value / base:.2f}x")


if __name__ == "__main__":
    main()
