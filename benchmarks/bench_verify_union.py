"""The DSpark verify's expert-union launch alone at e256 shapes: a tile / grid sweep (issue 27, round 4).

The verify step's largest item: the union experts launch streams each distinct routed expert of the
10-row window once (kernels/moe/union_kernel.py), 13.7 GB per verify = 64 % of its bytes, and ran at
2.5 TB/s in the step (40 launches, 135 us each for ~29 distinct experts + the shared one: RESULTS.md,
"Issue 27, round 4"). Its tiles and warps were never swept at the step's routing: the window
micro-benchmark of bench_routing.py routes random rows (~70 distinct experts of 80), not the ~29 a
DSpark verify touches. Here the routing is given: every call's [10, 8] ids hold exactly `--distinct`
experts (each row's 8 distinct, every one of the `--distinct` chosen by some row), random gains, so the
launch streams the same bytes as in the step; 16 calls with different ids and x, captured in one CUDA
graph under PDL (as in the step), median of replays per call (bench_kernels.time_graph_us). Every
candidate is first checked against a plain PyTorch sum of `expert_naive` over the given ids and gains.

Candidates: the step's configuration of round 3 (per-row grid, pipeliner 3 stages, 32-row I-slices,
128 x 128 tiles, 8 warps), the default since (4 warps, down products with h as bf16 hi + lo, chosen
from this sweep's first H200 run where each was measured alone), warps / stages / slices around it,
the compact grid (union_compact_kernel.py: one program per work item, or a persistent grid of N per
SM), and the down products with h as bf16 hi + lo.

Usage: python3 benchmarks/bench_verify_union.py --out OUT   (GPU; verify_union.json rewritten after each case)
       --dry-run: tiny shapes, checked not timed (CPU: TRITON_INTERPRET=1)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import triton
from bubblescope.kernels._pdl import resolve_pdl
from bubblescope.kernels.moe import FusedMoEConfig, MoEWeights, MoEWorkspace, RoutingRule
from bubblescope.kernels.moe.launch import launch_union_experts
from bubblescope.kernels.moe.naive import expert_naive

from bubblescope.files.atomic import write_json_atomic


@dataclass(frozen=True)
class Shape:
    hidden: int
    inter: int
    experts: int
    top_k: int
    rows: int


E256 = Shape(hidden=2560, inter=768, experts=256, top_k=8, rows=10)
DRY = Shape(hidden=48, inter=40, experts=24, top_k=4, rows=5)
CALLS = 16


def candidates() -> dict[str, FusedMoEConfig]:
    """Label -> configuration: today's first, then one change at a time, then the compact grid."""

    def cfg(
        stages=3, block_i=32, block_d=128, block_dout=128, warps=8, compact=False, per_sm=0, bf16x2=False
    ):
        return FusedMoEConfig(
            fast_topk=True,
            early_shared=True,
            expert_union=True,
            deep_experts=stages > 0,
            union_stages=stages or 3,
            union_block_i=block_i,
            union_block_d=block_d,
            union_block_dout=block_dout,
            union_num_warps=warps,
            union_compact=compact,
            union_programs_per_sm=per_sm,
            union_h_bf16x2=bf16x2,
        )

    # Most telling first: a sweep cut short by its timeout keeps these. (16-row I-slices measured 26-58 %
    # slower than 32 in the window micro-benchmark of issue 17: not swept again.)
    return {
        "round 3: rows grid s3 bi32 bd128 w8": cfg(),
        "default since round 4: rows grid s3 bi32 w4, down h bf16x2": cfg(warps=4, bf16x2=True),
        "rows grid s3 bi32 w4": cfg(warps=4),
        "compact dense s3 bi32 w8": cfg(compact=True),
        "compact dense s3 bi32 w4": cfg(compact=True, warps=4),
        "rows grid s3 bi32 w8, down h bf16x2": cfg(bf16x2=True),
        "compact persistent 2/SM s3 bi32 w8": cfg(compact=True, per_sm=2),
        "rows grid s3 bi64 w8": cfg(block_i=64),
        "rows grid s0 bi32 w4 (one tile ahead)": cfg(stages=0, warps=4),
        "rows grid s4 bi32 w4": cfg(stages=4, warps=4),
        "compact persistent 4/SM s3 bi32 w4": cfg(compact=True, per_sm=4, warps=4),
    }


def window_ids(shape: Shape, distinct: int, generator: torch.Generator) -> torch.Tensor:
    """[rows, top_k] ids over exactly `distinct` experts: each row's ids distinct, every expert of the
    pool chosen by at least one row (the pool is dealt out first, the rest drawn from it)."""
    if not shape.top_k <= distinct <= min(shape.experts, shape.rows * shape.top_k):
        raise ValueError(
            f"distinct must lie in [{shape.top_k}, {min(shape.experts, shape.rows * shape.top_k)}]"
        )
    pool = torch.randperm(shape.experts, generator=generator)[:distinct].tolist()
    rows: list[list[int]] = [[] for _ in range(shape.rows)]
    for index, expert in enumerate(pool):
        # Deal the pool round-robin so no row gets more than top_k; the remainder fills from the pool.
        rows[index % shape.rows].append(expert)
    for row in rows:
        spare = [e for e in pool if e not in row]
        picks = torch.randperm(len(spare), generator=generator)[: shape.top_k - len(row)].tolist()
        row.extend(spare[p] for p in picks)
    return torch.tensor(rows, dtype=torch.int32)


def reference(x, weights: MoEWeights, ids, gains) -> torch.Tensor:
    """The window's MoE output for given routing: sum of gain * expert_naive, plus the shared expert."""
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    for m in range(x.shape[0]):
        for slot in range(ids.shape[1]):
            expert = int(ids[m, slot])
            out[m] += gains[m, slot] * expert_naive(
                x[m], weights.w13[expert], weights.w2[expert], weights.swiglu_limit
            )
        shared = weights.shared_slot
        out[m] += expert_naive(x[m], weights.w13[shared], weights.w2[shared], weights.shared_swiglu_limit)
    return out


def build(shape: Shape, distinct: int, device: str, dtype: torch.dtype):
    """Weights, CALLS (x, workspace) pairs with given routing, and the union bytes per call."""
    gen = torch.Generator().manual_seed(0)
    d, i, e = shape.hidden, shape.inter, shape.experts
    weights = MoEWeights(
        router=torch.empty(e, d, device=device, dtype=dtype),
        expert_bias=torch.zeros(e, device=device),
        w13=(torch.randn(e + 1, 2 * i, d, device=device) / d**0.5).to(dtype),
        w2=(torch.randn(e + 1, d, i, device=device) / i**0.5).to(dtype),
        shared_slot=e,
        swiglu_limit=4.0,
        shared_swiglu_limit=5.0,
    )
    rule = RoutingRule(top_k=shape.top_k, n_group=1, topk_group=1, scale=2.5)
    calls = []
    for _ in range(CALLS):
        ws = MoEWorkspace.allocate(shape.rows, weights, rule)
        ws.ids.copy_(window_ids(shape, distinct, gen))
        assert ws.ids.unique().numel() == distinct, "window_ids must give exactly `distinct` experts"
        ws.weights.copy_(torch.rand(shape.rows, shape.top_k, generator=gen) * 0.5 + 0.1)
        x = torch.randn(shape.rows, d, generator=gen).to(device=device, dtype=dtype)
        calls.append((x, ws))
    bytes_per_call = (distinct + 1) * 3 * d * i * weights.w13.element_size()
    return weights, rule, calls, bytes_per_call


def check(weights, rule, calls, config: FusedMoEConfig, tol: float) -> float:
    """Max error of the first call, relative to the reference's largest magnitude."""
    x, ws = calls[0]
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    # With PDL as timed (one compile per candidate); outside a graph the launch attribute is harmless.
    launch_union_experts(x, weights, rule, ws, config, out, pdl=resolve_pdl(True, x.device))
    want = reference(x, weights, ws.ids, ws.weights)
    err = float((out - want).abs().max() / want.abs().max().clamp_min(1e-12))
    if not err < tol:
        raise AssertionError(f"max relative error {err:.2e} >= {tol}")
    return err


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="folder for verify_union.json")
    parser.add_argument("--distinct", type=int, default=29, help="distinct routed experts per window")
    parser.add_argument("--only", default="", help="candidates whose label contains this text")
    parser.add_argument("--replays", type=int, default=50)
    parser.add_argument("--dry-run", action="store_true", help="tiny shapes, checked not timed")
    args = parser.parse_args(argv)
    cuda = torch.cuda.is_available()
    if not cuda and not (args.dry_run and os.environ.get("TRITON_INTERPRET") == "1"):
        print("bench_verify_union: needs CUDA, or --dry-run with TRITON_INTERPRET=1", file=sys.stderr)
        return 2
    shape, distinct = (DRY, 7) if args.dry_run else (E256, args.distinct)
    # The CPU interpreter's bf16 dot is wrong (union_kernel.dot_rows): fp32 there.
    dtype = torch.bfloat16 if cuda else torch.float32
    weights, rule, calls, bytes_per_call = build(shape, distinct, "cuda" if cuda else "cpu", dtype)
    ceiling = None
    if not args.dry_run:
        from bench_kernels import measure_copy_ceiling_tbps

        ceiling = measure_copy_ceiling_tbps()
    payload = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name() if cuda else "cpu (Triton interpreter)",
        "torch": torch.__version__,
        "triton": triton.__version__,
        "command": " ".join([sys.executable, *sys.argv]),
        "shape": asdict(shape),
        "distinct": distinct,
        "bytes_per_call": bytes_per_call,
        "copy_ceiling_tbps": ceiling,
        "results": [],
    }
    for label, config in candidates().items():
        if args.only not in label:
            continue
        row: dict[str, object] = {"case": label}
        try:
            row["max_err"] = check(
                weights, rule, calls, config, tol=2e-2 if dtype == torch.bfloat16 else 1e-4
            )
            if not args.dry_run:
                from bench_kernels import time_graph_us

                out = torch.zeros(shape.rows, shape.hidden, dtype=torch.float32, device="cuda")
                launches = [
                    lambda x=x, ws=ws, c=config, o=out: launch_union_experts(
                        x, weights, rule, ws, c, o, pdl=True
                    )
                    for x, ws in calls
                ]
                us = time_graph_us(launches, replays=args.replays)
                row |= {"us": us, "tbps": bytes_per_call / (us * 1e-6) / 1e12}
                row["fraction_of_copy"] = row["tbps"] / ceiling
        except Exception as exc:  # a broken candidate must not stop the others
            traceback.print_exc()
            row["error"] = f"{type(exc).__name__}: {exc}"
        print(json.dumps(row), flush=True)
        payload["results"].append(row)
        write_json_atomic(args.out / "verify_union.json", payload)
    print_table(payload)
    failed = [row["case"] for row in payload["results"] if "error" in row]
    return 1 if failed else 0


def print_table(payload: dict) -> None:
    megabytes = payload["bytes_per_call"] / 1e6
    print(f"\n{payload['distinct']} distinct experts + shared, {megabytes:.0f} MB per call; ", end="")
    print(f"copy ceiling {payload['copy_ceiling_tbps']} TB/s")
    for row in payload["results"]:
        timing = (
            f"{row['us']:8.2f} us {row['tbps']:5.2f} TB/s" if "us" in row else row.get("error", "checked")
        )
        print(f"{row['case']:44s} {timing}  err {row.get('max_err', float('nan')):.1e}")


if __name__ == "__main__":
    raise SystemExit(main())
