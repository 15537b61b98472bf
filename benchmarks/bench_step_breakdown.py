"""Where one fast-path decode step's time goes: critical-path time per kernel family from a profiled trace,
with the bytes each family must read and the bandwidth that implies.

Under PDL and in a CUDA graph, kernels of one stream overlap (the next one starts, loads its weights and
waits), so summing kernel durations counts time twice. Here each kernel is charged the time by which it
moved the stream's last end forward, `end_i - max(last_end, start_i)`, and a stretch with no kernel
running is charged to "idle"; the charges add up to the step's GPU time. Steps are split after each
`argmax_combine_kernel` (the lm_head's last launch); the first profiled step is left out (it also runs
work queued before the profiler started). Bytes per family come from the preset's shapes (bf16 weights
and router, as with every switch on), matched to GEMV launches by their grid (kernels/gemv/ops.py).

Usage: python3 benchmarks/bench_step_breakdown.py TRACE.json.gz --preset ling3-flash-e256 --bandwidth-gbps N
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import statistics
import sys
from pathlib import Path

import triton
from bubblescope.kernels.gemv.ops import choose_config
from bubblescope.reference_model.config import LingConfig, get_preset

BF16_BYTES = 2


def gemv_families(config: LingConfig) -> dict[int, tuple[str, int]]:
    """Grid size of each decode GEMV launch -> (family label, bytes per step of all launches of it)."""
    hidden, heads = config.hidden_size, config.num_attention_heads
    width = heads * config.head_dim
    mla = len(config.mla_layers)
    kda = config.num_hidden_layers - mla
    dense = config.first_k_dense_replace
    q_rows = heads * (config.qk_nope_head_dim + config.qk_rope_head_dim)
    mla_in = q_rows + config.kv_lora_rank + config.qk_rope_head_dim + heads
    shapes = [
        ("GEMV KDA in_proj", 5 * width + heads, hidden, kda),
        ("GEMV KDA o_proj / MLA dense / FFN down", hidden, width, kda + mla),
        ("GEMV KDA o_proj / MLA dense / FFN down", hidden, config.intermediate_size, dense),
        ("GEMV MLA in_proj", mla_in, hidden, mla),
        ("GEMV dense FFN gate/up", 2 * config.intermediate_size, hidden, dense),
    ]
    families: dict[int, tuple[str, int]] = {}
    for label, rows, cols, calls in shapes:
        grid = triton.cdiv(rows, choose_config(1, rows, cols).block_n)
        known = families.get(grid, (label, 0))
        families[grid] = (known[0], known[1] + calls * rows * cols * BF16_BYTES)
    return families


def other_bytes(config: LingConfig) -> dict[str, int]:
    """Bytes per step of the non-GEMV families (bf16 router and lm_head, fp32 KDA state read + written)."""
    hidden, heads = config.hidden_size, config.num_attention_heads
    mla = len(config.mla_layers)
    kda = config.num_hidden_layers - mla
    moe = config.num_hidden_layers - config.first_k_dense_replace
    slots = config.num_experts_per_tok + config.num_shared_experts
    absorbed = heads * config.kv_lora_rank * (config.qk_nope_head_dim + config.v_head_dim) * BF16_BYTES
    return {
        "experts (fused / deep experts launch)": moe
        * slots
        * 3
        * hidden
        * config.moe_intermediate_size
        * BF16_BYTES,
        "router launch (GEMV + top-k)": moe * config.num_experts * hidden * BF16_BYTES,
        "KDA decode": kda * 2 * heads * config.head_dim * config.head_dim * 4,
        "lm_head + argmax": config.vocab_size * hidden * BF16_BYTES,
        "torch glue (MLA head bmm, elementwise, index_select)": mla * absorbed,
    }


def family_of(event: dict, gemvs: dict[int, tuple[str, int]]) -> str:
    name = event["name"]
    grid = (event.get("args", {}).get("grid") or [0])[0]
    prefixes = (
        ("fused_experts", "experts (fused / deep experts launch)"),
        ("deep_experts", "experts (fused / deep experts launch)"),
        ("router_route", "router launch (GEMV + top-k)"),
        ("add_rmsnorm", "add_rmsnorm"),
        ("kda_decode", "KDA decode"),
        ("lm_head", "lm_head + argmax"),
        ("argmax_combine", "lm_head + argmax"),
        ("mla_", "MLA kernels"),
    )
    for prefix, label in prefixes:
        if name.startswith(prefix):
            return label
    if name.startswith("gemv_kernel"):
        return gemvs.get(grid, (f"GEMV other (grid {grid})", 0))[0]
    return "torch glue (MLA head bmm, elementwise, index_select)"


def split_steps(events: list[dict]) -> list[list[dict]]:
    steps, current = [], []
    for event in events:
        current.append(event)
        if event["name"].startswith("argmax_combine"):
            steps.append(current)
            current = []
    return steps


def charge_step(step: list[dict], gemvs: dict[int, tuple[str, int]]) -> collections.Counter:
    """Critical-path microseconds per family of one step (module docstring)."""
    charges: collections.Counter = collections.Counter()
    last_end = step[0]["ts"]
    for event in step:
        end = event["ts"] + event["dur"]
        charges["idle (no kernel running)"] += max(0.0, event["ts"] - last_end)
        charges[family_of(event, gemvs)] += max(0.0, end - max(last_end, event["ts"]))
        last_end = max(last_end, end)
    return charges


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path, help="trace.json.gz of a `bubblescope run` (fast path)")
    parser.add_argument("--preset", default="ling3-flash-e256")
    parser.add_argument("--bandwidth-gbps", type=float, default=4150.0, help="copy ceiling for 'at ceiling'")
    args = parser.parse_args(argv)
    try:
        with gzip.open(args.trace) as handle:
            trace = json.load(handle)
    except (OSError, ValueError) as exc:
        print(f"bench_step_breakdown: cannot read {args.trace}: {exc}", file=sys.stderr)
        return 2
    config = get_preset(args.preset)
    gemvs = gemv_families(config)
    bytes_by_family = {label: size for label, size in gemvs.values()} | other_bytes(config)
    kernels = sorted((e for e in trace["traceEvents"] if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    steps = split_steps(kernels)[1:]
    if not steps:
        print(
            "bench_step_breakdown: no complete step (no argmax_combine_kernel) in the trace", file=sys.stderr
        )
        return 2
    charged = [charge_step(step, gemvs) for step in steps]
    families = sorted(set().union(*charged), key=lambda f: -statistics.median(c[f] for c in charged))
    total_us = statistics.median(sum(c.values()) for c in charged)
    print(f"{len(steps)} steps, median GPU step {total_us:.0f} us; ceiling {args.bandwidth_gbps:.0f} GB/s")
    header = f"{'family':56s} {'us/step':>8s} {'MB/step':>8s} {'TB/s':>6s} {'at ceiling us':>13s}"
    print(f"{header} {'excess us':>9s}")
    for family in families:
        time_us = statistics.median(c[family] for c in charged)
        size = bytes_by_family.get(family, 0)
        ideal_us = size / (args.bandwidth_gbps * 1e3)
        rate = f"{size / time_us / 1e6:6.2f}" if size and time_us else "     -"
        print(
            f"{family:56s} {time_us:8.1f} {size / 1e6:8.1f} {rate} {ideal_us:13.1f} {time_us - ideal_us:9.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
