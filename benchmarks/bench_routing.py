"""Benchmark the fused MoE router launch (router GEMV + routing by the last program) with the scan
top-k and the packed-key top-k (`fast_topk`), against the router GEMV alone, and the whole MoE layer.

Every case is checked first (routing ids equal to `route_naive` on the launch's own logits; the layer
against `moe_naive`), then timed as bench_kernels.py does: 16 calls (router copies rotated past the
50 MB L2) captured back to back in one CUDA graph, median of replays per call, without and with PDL.
Variants of one shape run in the same process, so their ratios are same-run ratios.

Issue 27's cases ("route sites ...", routing_site_cases.py) compare where the decode layer routes;
"experts stream ..." (experts_stream_cases.py) how its experts launch streams the expert weights.

Usage: python3 benchmarks/bench_routing.py --out OUT   (writes routing.json there; prints a table last)
       --only TEXT: cases whose name contains TEXT; --pdl-only: time with PDL only (fewer compiles);
       --dry-run: the "route sites" and "experts stream" cases at a tiny shape, checked but not timed
       (CPU: TRITON_INTERPRET=1)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import torch
import triton
from bench_kernels import BF16, case_moe, copies_for, measure_copy_ceiling_tbps, time_graph_us
from bubblescope.kernels.gemv import GemvConfig, gemv
from bubblescope.kernels.moe import FusedMoEConfig, MoEWeights, MoEWorkspace, RoutingRule, route_naive
from bubblescope.kernels.moe.launch import launch_router_route
from experts_stream_cases import experts_stream_cases
from routing_site_cases import DRY_SHAPE, E256_SHAPE, routing_site_cases

from bubblescope.files.atomic import write_json_atomic

HIDDEN = 2560
RULE = RoutingRule(top_k=8, n_group=8, topk_group=4, scale=2.5)


def router_weights(experts: int, dtype: torch.dtype, copies: int) -> list[MoEWeights]:
    """`copies` router layers (random bias, no expert weights: the router launch never reads them)."""
    empty = torch.empty(experts + 1, 2, HIDDEN, device="cuda", dtype=BF16)
    return [
        MoEWeights(
            router=(torch.randn(experts, HIDDEN, device="cuda") / HIDDEN**0.5).to(dtype),
            expert_bias=torch.randn(experts, device="cuda") * 0.01,
            w13=empty,
            w2=torch.empty(experts + 1, HIDDEN, 1, device="cuda", dtype=BF16),
            shared_slot=experts,
        )
        for _ in range(copies)
    ]


def case_router_launch(experts: int, dtype: torch.dtype, config: FusedMoEConfig) -> dict:
    """Launch 1 of the fused layer alone: router logits, zeroed output, last program routes."""
    bytes_per_call = experts * HIDDEN * torch.tensor([], dtype=dtype).element_size()
    layers = router_weights(experts, dtype, copies_for(bytes_per_call))
    x = torch.randn(1, HIDDEN, device="cuda", dtype=BF16)
    workspaces = [MoEWorkspace.allocate(1, weights, RULE) for weights in layers]
    out = torch.empty(1, HIDDEN, device="cuda", dtype=torch.float32)

    def call(index: int, pdl: bool) -> None:
        launch_router_route(x, layers[index], RULE, workspaces[index], config, out, pdl)

    call(0, False)
    logits = workspaces[0].logits.clone()
    want_ids, _ = route_naive(logits, layers[0].expert_bias, RULE)
    logits_err = float((logits - x.float() @ layers[0].router.float().T).abs().max())
    ok = (
        bool(torch.equal(workspaces[0].ids.long(), want_ids)) and bool((out == 0).all()) and logits_err < 1e-2
    )
    return dict(
        bytes=bytes_per_call,
        ok=ok,
        err=logits_err,
        calls=lambda pdl: [lambda i=i: call(i, pdl) for i in range(len(layers))],
    )


def case_router_gemv(experts: int, dtype: torch.dtype, num_warps: int) -> dict:
    """The router GEMV alone with launch 1's tiles (one row per program): launch 1's lower bound."""
    bytes_per_call = experts * HIDDEN * torch.tensor([], dtype=dtype).element_size()
    layers = router_weights(experts, dtype, copies_for(bytes_per_call))
    x = torch.randn(1, HIDDEN, device="cuda", dtype=BF16)
    out = torch.empty(1, experts, device="cuda", dtype=torch.float32)
    config = GemvConfig(block_n=1, block_k=512, num_warps=num_warps)
    got = gemv(x, layers[0].router, config=config, out_dtype=torch.float32)
    err = float((got - x.float() @ layers[0].router.float().T).abs().max())
    return dict(
        bytes=bytes_per_call,
        ok=err < 1e-2,
        err=err,
        calls=lambda pdl: [
            lambda w=w: gemv(x, w.router, use_pdl=pdl, config=config, out_dtype=torch.float32, out=out)
            for w in layers
        ],
    )


def build_cases() -> dict[str, Callable[[], dict]]:
    """The decode shapes of ling3-flash-e256 (bf16 gate, all on) first, then E = 512 and fp32 gates."""
    cases: dict[str, Callable[[], dict]] = {}
    variants = ((False, 8), (True, 8), (True, 4), (False, 4), (True, 2), (True, 1))
    for experts, dtype, dname in ((256, BF16, "bf16"), (512, BF16, "bf16"), (256, torch.float32, "fp32")):
        shape = f"e{experts} {dname} gate"
        cases[f"router gemv only {shape} w8"] = lambda e=experts, d=dtype: case_router_gemv(e, d, 8)
        for fast, warps in variants if experts == 256 and dname == "bf16" else variants[:2]:
            cfg = FusedMoEConfig(fast_topk=fast, router_num_warps=warps)
            label = f"router launch {shape} {'fast_topk' if fast else 'scan'} w{warps}"
            cases[label] = lambda e=experts, d=dtype, c=cfg: case_router_launch(e, d, c)
    for fast, early, warps in (
        (False, False, 0),
        (True, False, 0),
        (False, True, 0),
        (True, True, 0),
        (True, True, 4),
    ):
        cfg = FusedMoEConfig(fast_topk=fast, early_shared=early, router_num_warps=warps)
        label = (
            f"moe layer e256 bf16 gate fast_topk={int(fast)} early_shared={int(early)} router w{warps or 8}"
        )
        cases[label] = lambda c=cfg: case_moe(True, BF16, c)
    # deep_experts (more tiles in flight per program): pairs (stages 0) or Triton's pipeliner, tiles
    # and warps swept against the fused launch above (fast_topk + early_shared, the all-on decode layer).
    for stages, block_i, block_d, block_dout, warps in (
        (0, 32, 128, 128, 8),
        (0, 32, 128, 128, 4),
        (0, 64, 128, 128, 8),
        (0, 64, 64, 128, 8),
        (0, 32, 64, 64, 4),
        (0, 16, 128, 128, 4),
        (3, 32, 128, 128, 8),
        (4, 32, 128, 128, 8),
        (3, 64, 128, 128, 8),
        (3, 32, 256, 256, 8),
        (3, 16, 256, 256, 4),
    ):
        cfg = FusedMoEConfig(
            fast_topk=True,
            early_shared=True,
            deep_experts=True,
            deep_stages=stages,
            deep_block_i=block_i,
            block_d=block_d,
            block_dout=block_dout,
            num_warps=warps,
        )
        label = (
            f"moe layer e256 bf16 gate deep_experts s{stages} bi{block_i} bd{block_d} bo{block_dout} w{warps}"
        )
        cases[label] = lambda c=cfg: case_moe(True, BF16, c)
    # deep_experts with fewer router warps: the routing program's reductions cross fewer warps.
    for router_warps in (4, 2, 1):
        cfg = FusedMoEConfig(
            fast_topk=True, early_shared=True, deep_experts=True, router_num_warps=router_warps
        )
        cases[f"moe layer e256 bf16 gate deep_experts s0 bi64 router w{router_warps}"] = lambda c=cfg: (
            case_moe(True, BF16, c)
        )
    for block_i, block_d, warps in ((64, 128, 8), (64, 64, 8), (64, 128, 16)):
        cfg = FusedMoEConfig(
            fast_topk=True, early_shared=True, block_i=block_i, block_d=block_d, num_warps=warps
        )
        cases[f"moe layer e256 bf16 gate fused bi{block_i} bd{block_d} w{warps}"] = lambda c=cfg: case_moe(
            True, BF16, c
        )
    # A verify window (block 9: 10 rows of independent random tokens, so up to 80 distinct experts;
    # a DSpark verify touched 28): each (row, slot) streamed alone vs each distinct expert once.
    for union, early, block_i, warps, stages in (
        (False, True, 32, 8, 0),
        (True, True, 32, 8, 0),
        (True, False, 32, 8, 0),
        (True, False, 32, 4, 0),
        (True, True, 32, 8, 3),
        (True, True, 32, 8, 4),
        (True, True, 32, 4, 3),
        (True, True, 64, 8, 3),
        (True, True, 16, 4, 3),
        (True, True, 32, 4, 4),
    ):
        # stages > 0: deep_experts (the union launch's loops through Triton's pipeliner).
        cfg = FusedMoEConfig(
            fast_topk=True,
            early_shared=early,
            expert_union=union,
            block_i=block_i,
            num_warps=warps,
            deep_experts=stages > 0,
            union_stages=stages or 3,
        )
        label = (
            f"moe window T=10 e256 fast_topk early_shared={int(early)} expert_union={int(union)} "
            f"bi{block_i} w{warps}" + (f" deep s{stages}" if stages else "")
        )
        cases[label] = lambda c=cfg: case_moe(True, BF16, c, rows=10)
    # Issue 27: who routes the decode layer (router launch's ticket, the experts, a launch of its own).
    cases.update(routing_site_cases(E256_SHAPE, "cuda"))
    # Issue 27, round 4: how the experts launch streams the gathered weights (TMA, deeper, more CTAs).
    cases.update(experts_stream_cases(E256_SHAPE, "cuda"))
    return cases


def run_case(
    name: str, build: Callable[[], dict], ceiling_tbps: float | None, modes: tuple[tuple[str, bool], ...]
) -> dict:
    """Check the case, then time it in each (label, pdl) mode; no modes (a dry run): checked only."""
    case = build()
    row = {"case": name, "bytes_per_call": case["bytes"], "correct": case["ok"], "max_err": case["err"]}
    if not case["ok"]:
        return row | {"error": "correctness check failed; not timed"}
    if not modes:
        return row
    for label, pdl in modes:
        row[f"{label}_us"] = time_graph_us(case["calls"](pdl), replays=50)
    best_us = min(row[f"{label}_us"] for label, _ in modes)
    row["bandwidth_tbps"] = case["bytes"] / (best_us * 1e-6) / 1e12
    row["fraction_of_copy"] = row["bandwidth_tbps"] / ceiling_tbps
    return row


def print_table(rows: list[dict], ceiling_tbps: float) -> None:
    print(f"\ncopy ceiling: {ceiling_tbps:.2f} TB/s")
    print(f"{'case':56s} {'graph us':>9s} {'pdl us':>8s} {'TB/s':>6s} {'%copy':>6s}")
    for row in rows:
        if "graph_pdl_us" not in row:
            print(f"{row['case']:56s} ERROR {row.get('error', '')[:80]}")
            continue
        graph = f"{row['graph_us']:9.2f}" if "graph_us" in row else f"{'-':>9s}"
        print(
            f"{row['case']:56s} {graph} {row['graph_pdl_us']:8.2f} "
            f"{row['bandwidth_tbps']:6.2f} {100 * row['fraction_of_copy']:5.0f}%"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="folder for routing.json")
    parser.add_argument("--only", default="", help="run only cases whose name contains this text")
    parser.add_argument("--pdl-only", action="store_true", help="time with PDL only (the decode step's mode)")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="check the 'route sites' and 'experts stream' cases at a tiny shape without timing (CPU: needs "
        "TRITON_INTERPRET=1)",
    )
    args = parser.parse_args(argv)
    cuda = torch.cuda.is_available()
    if args.dry_run and not cuda and os.environ.get("TRITON_INTERPRET") != "1":
        print("bench_routing: --dry-run on the CPU needs TRITON_INTERPRET=1", file=sys.stderr)
        return 2
    if not args.dry_run and not cuda:
        print("bench_routing: needs a CUDA device (or --dry-run)", file=sys.stderr)
        return 2
    if args.dry_run:
        device = "cuda" if cuda else "cpu"
        cases = routing_site_cases(DRY_SHAPE, device) | experts_stream_cases(DRY_SHAPE, device)
        ceiling_tbps, modes = None, ()
    else:
        cases, ceiling_tbps = build_cases(), measure_copy_ceiling_tbps()
        modes = (("graph_pdl", True),) if args.pdl_only else (("graph", False), ("graph_pdl", True))
    rows = []
    for name, build in cases.items():
        if args.only not in name:
            continue
        try:
            row = run_case(name, build, ceiling_tbps, modes)
        except Exception as exc:  # a broken case must not stop the others
            traceback.print_exc()
            row = {"case": name, "error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(row), flush=True)
        rows.append(row)
        torch.cuda.empty_cache()
    payload = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name() if cuda else "cpu (Triton interpreter)",
        "dry_run": args.dry_run,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "command": " ".join([sys.executable, *sys.argv]),
        "copy_ceiling_tbps": ceiling_tbps,
        "results": rows,
    }
    write_json_atomic(args.out / "routing.json", payload)
    if args.dry_run:
        failed = [row["case"] for row in rows if not row.get("correct")]
        print(
            f"dry run: {len(rows) - len(failed)} of {len(rows)} cases correct"
            + (f"; failed: {failed}" if failed else "")
        )
        return 1 if failed else 0
    print_table(rows, ceiling_tbps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
