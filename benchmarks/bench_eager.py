"""Stock-eager TPOT of the plain PyTorch reference decoder: the baseline the fast path is judged on.

Builds a preset once on the device (random seeded weights), prefills a prompt, then times greedy decode
steps of the eager workload (each step reads its token back with `.item()`, as a stock eager loop does)
for the router / lm_head dtype switches. Prints one line per config and writes `<out>/eager_<preset>.json`.

    python benchmarks/bench_eager.py --preset ling3-tiny --out OUT [--steps 64 --repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch
from bubblescope.reference_model.workload import make_workload

from bubblescope.files.atomic import write_json_atomic

CONFIGS: tuple[tuple[str, ...], ...] = ((), ("bf16_gate",), ("bf16_lm_head",), ("bf16_gate", "bf16_lm_head"))


def time_steps_ms(workload, steps: int, device: str) -> list[float]:
    """Per-step wall ms of the host loop (each step ends in a blocking .item(): no extra sync needed)."""
    samples = []
    for _ in range(steps):
        start = time.perf_counter_ns()
        workload.step()
        samples.append((time.perf_counter_ns() - start) / 1e6)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="ling3-tiny")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--warmup", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    build_start = time.perf_counter()
    workload = make_workload(
        args.preset,
        args.device,
        seed=0,
        prompt_len=32,
        max_steps=(args.steps + args.warmup) * args.repeats * len(CONFIGS) + 8,
        path="eager",
    )
    build_s = time.perf_counter() - build_start
    rows = []
    for enabled in CONFIGS:
        workload.prepare(frozenset(enabled))
        for _ in range(args.warmup):
            workload.step()
        medians = [
            statistics.median(time_steps_ms(workload, args.steps, args.device)) for _ in range(args.repeats)
        ]
        row = {
            "switches": list(enabled),
            "tpot_ms_median": statistics.median(medians),
            "tpot_ms_per_repeat": medians,
            "bytes_per_token": workload.bytes_per_token(frozenset(enabled)),
        }
        rows.append(row)
        print(
            f"{args.preset} {args.device} {'+'.join(enabled) or 'all-off'}: "
            f"{row['tpot_ms_median']:.3f} ms/token (repeats {[round(m, 3) for m in medians]})",
            flush=True,
        )
    result = {
        "preset": args.preset,
        "device": args.device,
        "gpu": torch.cuda.get_device_name() if args.device.startswith("cuda") else None,
        "torch": torch.__version__,
        "build_s": build_s,
        "steps": args.steps,
        "repeats": args.repeats,
        "rows": rows,
        "tokens_head": workload.tokens()[:16],
    }
    write_json_atomic(args.out / f"eager_{args.preset}.json", result)


if __name__ == "__main__":
    main()
