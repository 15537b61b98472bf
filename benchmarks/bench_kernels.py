"""Benchmark every decode kernel at Ling-3.0-flash shapes against the HBM copy ceiling and a torch baseline.

Each case first checks the Triton kernel against a torch reference (no speed claim without a green
check), then times it as decode sees it: many calls captured back to back in one CUDA graph and
replayed (median of replays, per call), with and without PDL, plus eager triton.testing.do_bench
(median, L2 flushed). Inputs are rotated over enough copies to exceed the 50 MB L2, so bandwidth is
HBM bandwidth. Every case runs in its own try/except: a failure is printed and recorded, the rest go on.

Usage: .venv/bin/python benchmarks/bench_kernels.py --out bench_out/   (writes kernels.json there)
"""

from __future__ import annotations

import argparse
import datetime
import inspect
import json
import math
import platform
import statistics
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
import triton.testing
from bubblescope.kernels.gemv import GemvConfig, gemv
from bubblescope.kernels.kda_decode import KDALayerState, KDALayerWeights, kda_decode, kda_decode_naive
from bubblescope.kernels.lm_head import lm_head_greedy
from bubblescope.kernels.mla_decode import mla_decode
from bubblescope.kernels.moe import (
    FusedMoEConfig,
    MoEWeights,
    MoEWorkspace,
    RoutingRule,
    moe_fused,
    moe_naive,
    moe_unfused,
)
from bubblescope.kernels.rmsnorm import add_rmsnorm

from bubblescope.files.atomic import write_json_atomic

L2_DEFEAT_BYTES = 256 * 2**20
MAX_COPIES = 64
BF16 = torch.bfloat16
Calls = list[Callable[[], object]]


def time_graph_us(calls: Calls, replays: int = 30) -> float:
    """Median microseconds per call with all `calls` captured back to back in one CUDA graph."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for call in calls:
            call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for call in calls:
            call()
    for _ in range(3):
        graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples_us = []
    for _ in range(replays):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples_us.append(start.elapsed_time(end) * 1e3 / len(calls))
    return statistics.median(samples_us)


def time_eager_us(call: Callable[[], object]) -> float:
    """triton.testing.do_bench median (flushes L2 between runs; includes the eager launch cost)."""
    return triton.testing.do_bench(call, return_mode="median") * 1e3


def copies_for(bytes_per_call: int) -> int:
    return max(1, min(MAX_COPIES, math.ceil(L2_DEFEAT_BYTES / max(bytes_per_call, 1))))


def measure_copy_ceiling_tbps() -> float:
    """Device-to-device copy ceiling (bytes read + written), the same measurement `bubblescope floor` uses.

    Not inside a CUDA graph: a captured contiguous copy becomes a memcpy node served by the copy engines,
    which measured 2.68 TB/s on the H200 here against 4.16 TB/s for the eager copy kernel.
    """
    from bubblescope.floor.bandwidth import measure_copy_bandwidth_gbps

    return measure_copy_bandwidth_gbps() / 1e3


def max_rel_diff(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.double(), want.double()
    return float((got - want).abs().max() / want.abs().max().clamp_min(1e-12))


# Each case returns: bytes per call, a check (ok, err), a builder of kernel calls (use_pdl), baseline calls.
def case_gemv(rows: int, out_features: int, in_features: int, config: GemvConfig | None = None) -> dict:
    bytes_per_call = out_features * in_features * 2 + rows * (in_features + out_features) * 2
    copies = copies_for(bytes_per_call)
    weights = [torch.randn(out_features, in_features, device="cuda", dtype=BF16) for _ in range(copies)]
    x = torch.randn(rows, in_features, device="cuda", dtype=BF16)
    outs = [torch.empty(rows, out_features, device="cuda", dtype=BF16) for _ in range(copies)]
    err = max_rel_diff(gemv(x, weights[0], config=config), F.linear(x.float(), weights[0].float()))
    return dict(
        bytes=bytes_per_call,
        ok=err < 2e-2,
        err=err,
        calls=lambda pdl: [
            lambda w=w, o=o: gemv(x, w, use_pdl=pdl, config=config, out=o)
            for w, o in zip(weights, outs, strict=True)
        ],
        baseline=[lambda w=w: F.linear(x, w) for w in weights],
    )


def case_rmsnorm(rows: int = 1, width: int = 2560) -> dict:
    x = torch.randn(rows, width, device="cuda", dtype=BF16)
    res = torch.randn(rows, width, device="cuda", dtype=BF16)
    weight = torch.rand(width, device="cuda", dtype=BF16)
    out, res_out = torch.empty_like(x), torch.empty_like(x)

    def torch_norm():
        summed = x.float() + res.float()
        return (summed * torch.rsqrt(summed.pow(2).mean(-1, keepdim=True) + 1e-6)).to(
            BF16
        ) * weight, summed.to(BF16)

    err = max_rel_diff(add_rmsnorm(x, res, weight)[0], torch_norm()[0])
    return dict(
        bytes=4 * rows * width * 2 + width * 2,
        ok=err < 2e-2,
        err=err,
        calls=lambda pdl: (
            [lambda: add_rmsnorm(x, res, weight, use_pdl=pdl, out=out, residual_out=res_out)] * 16
        ),
        baseline=[torch_norm] * 16,
    )


def flash_kda_layer(
    width: int = 4096, heads: int = 32, dim: int = 128
) -> tuple[dict, KDALayerWeights, KDALayerState]:
    """Random bf16 projections, weights and fp32 state of one KDA layer at Flash shapes."""
    acts = {n: torch.randn(1, width, device="cuda", dtype=BF16) for n in ("q", "k", "v", "f", "gate")}
    acts["b"] = torch.randn(1, heads, device="cuda", dtype=BF16)
    weights = KDALayerWeights(
        *(torch.randn(width, 4, device="cuda", dtype=BF16) * 0.5 for _ in range(3)),
        a_log=torch.randn(heads, device="cuda"),
        dt_bias=torch.randn(width, device="cuda"),
        o_norm=torch.ones(dim, device="cuda", dtype=BF16),
    )
    state = KDALayerState(
        *(torch.randn(1, width, 3, device="cuda", dtype=BF16) for _ in range(3)),
        recurrent=torch.randn(1, heads, dim, dim, device="cuda") * 0.1,
    )
    return acts, weights, state


def kda_options(num_warps: int | None, v_splits: int, prefetch: bool | None) -> dict:
    """kda_decode keywords. The same script times older checkouts (A/B against main), whose kernel has
    no `prefetch_state`: None leaves it out; asking for it there fails the case."""
    options: dict = dict(num_warps=num_warps, v_splits=v_splits)
    if prefetch is not None:
        if "prefetch_state" not in inspect.signature(kda_decode).parameters:
            raise ValueError("this checkout's kda_decode has no prefetch_state")
        options["prefetch_state"] = prefetch
    return options


KDA_STATE_BYTES = 2 * 32 * 128 * 128 * 4


def case_kda(num_warps: int | None = None, v_splits: int = 1, prefetch: bool | None = None) -> dict:
    """KDA decode alone, layers back to back (64 layers rotated past L2); the state bytes dominate."""
    width = 4096
    bytes_per_call = KDA_STATE_BYTES + 2 * 3 * width * 3 * 2 + 7 * width * 2
    options = kda_options(num_warps, v_splits, prefetch)
    layers = [flash_kda_layer() for _ in range(copies_for(bytes_per_call))]
    acts, weights, state = layers[0]
    ref_state = state.clone()
    want = kda_decode_naive(**acts, weights=weights, state=ref_state)
    err = max_rel_diff(kda_decode(**acts, weights=weights, state=state, **options), want)
    return dict(
        bytes=bytes_per_call,
        ok=err < 3e-2,
        err=err,
        calls=lambda pdl: [
            lambda a=a, w=w, s=s: kda_decode(**a, weights=w, state=s, use_pdl=pdl, **options)
            for a, w, s in layers
        ],
        baseline=[lambda a=a, w=w, s=s: kda_decode_naive(**a, weights=w, state=s) for a, w, s in layers[:4]],
    )


def case_kda_block(v_splits: int | None, num_warps: int | None = None, prefetch: bool | None = None) -> dict:
    """The decoder's KDA block: in_proj GEMV [5W + H, D] -> KDA decode on its column views -> o_proj GEMV,
    for 32 layers (each its own state, so the 64 MiB of states do not sit in L2; three weight copies
    rotate). v_splits None: the two GEMVs alone, so that (block - GEMVs) is what KDA adds to a step,
    including what the state prefetch hides under the in_proj GEMV with PDL."""
    hidden, width, heads, layers_count, weight_copies = 2560, 4096, 32, 32, 3
    widths = (width,) * 5 + (heads,)
    in_projs = [
        torch.randn(sum(widths), hidden, device="cuda", dtype=BF16) / hidden**0.5
        for _ in range(weight_copies)
    ]
    o_projs = [
        torch.randn(hidden, width, device="cuda", dtype=BF16) / width**0.5 for _ in range(weight_copies)
    ]
    x = torch.randn(1, hidden, device="cuda", dtype=BF16)
    projs = [torch.empty(1, sum(widths), device="cuda", dtype=BF16) for _ in range(layers_count)]
    attn = [torch.randn(1, width, device="cuda", dtype=BF16) for _ in range(layers_count)]
    outs = [torch.empty(1, hidden, device="cuda", dtype=BF16) for _ in range(layers_count)]
    kda_layers = [flash_kda_layer()[1:] for _ in range(layers_count)] if v_splits else []
    options = kda_options(num_warps, v_splits, prefetch) if v_splits else {}

    def block(index: int, pdl: bool) -> None:
        in_proj, o_proj = in_projs[index % weight_copies], o_projs[index % weight_copies]
        gemv(x, in_proj, use_pdl=pdl, out=projs[index])
        if v_splits:
            q, k, v, f, g, b = projs[index].split(widths, dim=1)
            weights, state = kda_layers[index]
            kda_decode(q, k, v, f, b, g, weights, state, use_pdl=pdl, out=attn[index], **options)
        gemv(attn[index], o_proj, use_pdl=pdl, out=outs[index])

    err = 0.0
    if v_splits:
        weights, state = kda_layers[0]
        ref_state = state.clone()
        block(0, False)
        q, k, v, f, g, b = projs[0].split(widths, dim=1)
        want = kda_decode_naive(q, k, v, f, b, g, weights, ref_state)
        err = max_rel_diff(state.recurrent, ref_state.recurrent)
        err = max(err, max_rel_diff(attn[0].float(), want.float()))
    gemv_bytes = (sum(widths) + width) * hidden * 2
    return dict(
        bytes=gemv_bytes + (KDA_STATE_BYTES if v_splits else 0),
        ok=err < 3e-2,
        err=err,
        calls=lambda pdl: [lambda i=i: block(i, pdl) for i in range(layers_count)],
    )


def kda_cases() -> dict[str, Callable[[], dict]]:
    """KDA decode alone (H = 32, K = V = 128) by split and state prefetch, the KDA block with and
    without KDA, and (named "sweep ...") the warps of the split kernel."""
    cases: dict[str, Callable[[], dict]] = {
        "kda_decode H32 K128": case_kda,
        "kda_decode H32 K128 v_splits=4": lambda: case_kda(v_splits=4),
        "kda_decode H32 K128 v_splits=8": lambda: case_kda(v_splits=8),
        "kda_decode H32 K128 v_splits=16": lambda: case_kda(v_splits=16),
        "kda_decode H32 K128 v_splits=8 no prefetch": lambda: case_kda(v_splits=8, prefetch=False),
        "kda block gemvs only (in_proj + o_proj)": lambda: case_kda_block(None),
    }
    for v_splits in (4, 8, 16):
        cases[f"kda block in_proj + kda_decode v_splits={v_splits} + o_proj"] = lambda n=v_splits: (
            case_kda_block(n)
        )
    cases["kda block in_proj + kda_decode v_splits=8 no prefetch + o_proj"] = lambda: case_kda_block(
        8, prefetch=False
    )
    for v_splits, warps in ((4, 8), (8, 2), (8, 8), (16, 2), (16, 8)):
        cases[f"sweep kda_decode nv{v_splits} w{warps}"] = lambda w=warps, n=v_splits: case_kda(w, n)
    return cases


def case_mla(context: int, num_warps: int | None = None) -> dict:
    q_lat = torch.randn(1, 32, 512, device="cuda", dtype=BF16)
    q_pe = torch.randn(1, 32, 64, device="cuda", dtype=BF16)
    bytes_per_call = context * 576 * 2
    caches = [
        torch.randn(1, context, 576, device="cuda", dtype=BF16) for _ in range(copies_for(bytes_per_call))
    ]
    seq_lens = torch.tensor([context], device="cuda", dtype=torch.int32)
    scale = 192**-0.5

    def torch_attention(cache):
        scores = (
            torch.einsum("hc,sc->hs", q_lat[0], cache[0, :, :512])
            + torch.einsum("hr,sr->hs", q_pe[0], cache[0, :, 512:])
        ).float() * scale
        return torch.softmax(scores, dim=-1).to(BF16) @ cache[0, :, :512]

    err = max_rel_diff(mla_decode(q_lat, q_pe, caches[0], seq_lens, scale)[0], torch_attention(caches[0]))
    return dict(
        bytes=bytes_per_call,
        ok=err < 3e-2,
        err=err,
        calls=lambda pdl: [
            lambda c=c: mla_decode(q_lat, q_pe, c, seq_lens, scale, use_pdl=pdl, num_warps=num_warps)
            for c in caches
        ],
        baseline=[lambda c=c: torch_attention(c) for c in caches],
    )


def case_moe(
    fused: bool,
    router_dtype: torch.dtype,
    config: FusedMoEConfig | None = None,
    experts: int = 256,
    rows: int = 1,
) -> dict:
    """One MoE layer at Flash shapes on `rows` token rows (1: decode; 10: a verify window of block 9)."""
    hidden, inter, top_k = 2560, 768, 8
    rule = RoutingRule(top_k=top_k, n_group=8, topk_group=4, scale=2.5)
    weights = MoEWeights(
        router=(torch.randn(experts, hidden, device="cuda") / hidden**0.5).to(router_dtype),
        expert_bias=torch.zeros(experts, device="cuda"),
        w13=torch.randn(experts + 1, 2 * inter, hidden, device="cuda", dtype=BF16) / hidden**0.5,
        w2=torch.randn(experts + 1, hidden, inter, device="cuda", dtype=BF16) / inter**0.5,
        shared_slot=experts,
        swiglu_limit=4.0,
        shared_swiglu_limit=5.0,
    )
    # Different tokens route to different experts, so consecutive calls do not hit L2.
    xs = [torch.randn(rows, hidden, device="cuda", dtype=BF16) for _ in range(16)]
    workspace = MoEWorkspace.allocate(rows, weights, rule)
    # Upper bound for several rows: every row routed to experts no other row uses.
    experts_read = min(experts, rows * top_k) + 1
    bytes_per_call = experts * hidden * weights.router.element_size() + experts_read * 3 * hidden * inter * 2

    def run(x, pdl=False):
        if fused:
            return moe_fused(x, weights, rule, use_pdl=pdl, workspace=workspace, config=config)
        return moe_unfused(x, weights, rule, use_pdl=pdl, workspace=workspace)

    def torch_moe(x):
        return torch.stack([torch_moe_row(row[None]) for row in x])

    def torch_moe_row(x):
        # Timing baseline only: plain top-k (no groups), experts gathered into one bmm as in h200_facts.
        scores = torch.sigmoid(F.linear(x.to(router_dtype), weights.router).float())
        gains, ids = scores.topk(top_k, dim=-1)
        # [8, 2I, D] and [8, D, I]: the experts gathered, then one bmm each (the facts' 40 us baseline).
        hidden_up = torch.bmm(weights.w13[ids[0]], x[0].expand(top_k, hidden).unsqueeze(-1)).squeeze(-1)
        act = F.silu(hidden_up[:, :inter]) * hidden_up[:, inter:]
        down = torch.bmm(weights.w2[ids[0]], act.unsqueeze(-1).to(BF16)).squeeze(-1)
        shared = F.linear(
            F.silu(F.linear(x, weights.w13[experts, :inter])) * F.linear(x, weights.w13[experts, inter:]),
            weights.w2[experts],
        )
        return (gains[0, :, None] * down.float()).sum(0) + shared.float()

    err = max_rel_diff(run(xs[0]), moe_naive(xs[0], weights, rule))
    return dict(
        bytes=bytes_per_call,
        ok=err < 1e-3,
        err=err,
        calls=lambda pdl: [lambda x=x: run(x, pdl) for x in xs],
        baseline=[lambda x=x: torch_moe(x) for x in xs],
    )


def case_lm_head(w_dtype: torch.dtype, config: GemvConfig | None = None, programs: int | None = None) -> dict:
    weight = (torch.randn(157184, 2560, device="cuda") / 2560**0.5).to(w_dtype)
    x = torch.randn(1, 2560, device="cuda", dtype=BF16)
    tokens = torch.empty(1, dtype=torch.int64, device="cuda")
    want = F.linear(x.to(w_dtype).float(), weight.float()).argmax(dim=-1)
    got = lm_head_greedy(x, weight, config=config, programs=programs)
    return dict(
        bytes=weight.numel() * weight.element_size(),
        ok=bool(torch.equal(got, want)),
        err=0.0,
        calls=lambda pdl: (
            [lambda: lm_head_greedy(x, weight, use_pdl=pdl, tokens=tokens, config=config, programs=programs)]
            * 2
        ),
        baseline=[lambda: F.linear(x.to(w_dtype), weight).argmax(dim=-1)] * 2,
    )


def build_cases() -> dict[str, Callable[[], dict]]:
    cases: dict[str, Callable[[], dict]] = {
        "gemv q_proj 4096x2560 M=1": lambda: case_gemv(1, 4096, 2560),
        "gemv q_proj 4096x2560 M=8": lambda: case_gemv(8, 4096, 2560),
        "gemv o_proj 2560x4096 M=1": lambda: case_gemv(1, 2560, 4096),
        "gemv expert gate_up 1536x2560 M=1": lambda: case_gemv(1, 1536, 2560),
        "gemv router 512x2560 M=1": lambda: case_gemv(1, 512, 2560),
        "add_rmsnorm 2560": case_rmsnorm,
        **kda_cases(),
        "mla_decode ctx 8192": lambda: case_mla(8192),
        "mla_decode ctx 131072": lambda: case_mla(131072),
        "moe fused e256 fp32 gate": lambda: case_moe(True, torch.float32),
        "moe fused e256 bf16 gate": lambda: case_moe(True, BF16),
        "moe unfused e256 fp32 gate": lambda: case_moe(False, torch.float32),
        # A verify window (block 9: 10 rows) at E = 512: routing the rows in parallel vs one after another.
        "moe fused e512 bf16 gate M=1": lambda: case_moe(True, BF16, experts=512),
        "moe fused e512 bf16 gate M=10 parallel routing": lambda: case_moe(True, BF16, experts=512, rows=10),
        "moe fused e512 bf16 gate M=10 serial routing": lambda: case_moe(
            True, BF16, FusedMoEConfig(serial_route_max_rows=16), experts=512, rows=10
        ),
        "moe fused e512 fp32 gate M=10 parallel routing": lambda: case_moe(
            True, torch.float32, experts=512, rows=10
        ),
        "moe fused e512 fp32 gate M=10 serial routing": lambda: case_moe(
            True, torch.float32, FusedMoEConfig(serial_route_max_rows=16), experts=512, rows=10
        ),
        "lm_head greedy bf16": lambda: case_lm_head(BF16),
        "lm_head greedy fp32": lambda: case_lm_head(torch.float32),
    }
    for block_n in (8, 16, 32, 64):
        for block_k in (128, 256, 512):
            for warps in (4, 8):
                cfg = GemvConfig(block_n, block_k, warps)
                cases[f"sweep gemv 4096x2560 M=1 bn{block_n} bk{block_k} w{warps}"] = lambda c=cfg: case_gemv(
                    1, 4096, 2560, c
                )
    for warps in (4, 8, 16):
        cases[f"sweep mla_decode ctx 8192 w{warps}"] = lambda w=warps: case_mla(8192, w)
    for block_i in (16, 32, 64):
        for block_d in (64, 128, 256):
            for warps in (4, 8):
                cfg = FusedMoEConfig(block_i=block_i, block_d=block_d, num_warps=warps)
                cases[f"sweep moe fused bi{block_i} bd{block_d} w{warps}"] = lambda c=cfg: case_moe(
                    True, BF16, c
                )
    return cases


def checked_row(name: str, case: dict) -> dict:
    """A result row's size and correctness fields; with an "error" when the check failed (not timed)."""
    row = {
        "kernel": name,
        "bytes_per_call": case["bytes"],
        "correct": bool(case["ok"]),
        "max_rel_err": case["err"],
    }
    if not case["ok"]:
        return row | {"error": "correctness check failed; not timed"}
    return row


def run_case(name: str, build: Callable[[], dict], ceiling_tbps: float) -> dict:
    case = build()
    row = checked_row(name, case)
    if "error" in row:
        return row
    for label, pdl in (("graph", False), ("graph_pdl", True)):
        row[f"{label}_us"] = time_graph_us(case["calls"](pdl))
    row["eager_us"] = time_eager_us(case["calls"](False)[0])
    best_us = min(row["graph_us"], row["graph_pdl_us"])
    row["bandwidth_tbps"] = case["bytes"] / (best_us * 1e-6) / 1e12
    row["fraction_of_copy"] = row["bandwidth_tbps"] / ceiling_tbps
    if "baseline" not in case:
        return row
    try:
        row["baseline_graph_us"] = time_graph_us(case["baseline"])
        row["baseline_tbps"] = case["bytes"] / (row["baseline_graph_us"] * 1e-6) / 1e12
    except Exception as exc:  # the kernel's numbers stand even when the torch baseline cannot be captured
        row["baseline_error"] = f"{type(exc).__name__}: {exc}"
    return row


def print_table(rows: list[dict], ceiling_tbps: float) -> None:
    print(f"\ncopy ceiling: {ceiling_tbps:.2f} TB/s")
    print(
        f"{'kernel':58s} {'graph us':>9s} {'pdl us':>8s} {'eager us':>9s} {'TB/s':>6s} {'%copy':>6s} "
        f"{'torch us':>9s} {'torch TB/s':>10s}"
    )
    for row in rows:
        if "graph_us" not in row:
            print(f"{row['kernel']:58s} ERROR {row.get('error', '')[:80]}")
            continue
        base_us, base_tbps = (
            row.get("baseline_graph_us", float("nan")),
            row.get("baseline_tbps", float("nan")),
        )
        print(
            f"{row['kernel']:58s} {row['graph_us']:9.2f} {row['graph_pdl_us']:8.2f} {row['eager_us']:9.2f} "
            f"{row['bandwidth_tbps']:6.2f} {100 * row['fraction_of_copy']:5.0f}% "
            f"{base_us:9.2f} "
            f"{base_tbps:10.2f}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="folder for kernels.json")
    parser.add_argument("--only", default="", help="run only cases whose name contains this text")
    parser.add_argument("--no-sweep", action="store_true", help="skip the tile-size sweeps")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_kernels: needs a CUDA device", file=sys.stderr)
        return 2
    ceiling_tbps = measure_copy_ceiling_tbps()
    rows = []
    for name, build in build_cases().items():
        if args.only not in name or (args.no_sweep and name.startswith("sweep")):
            continue
        try:
            row = run_case(name, build, ceiling_tbps)
        except Exception as exc:  # a broken case must not stop the others
            traceback.print_exc()
            row = {"kernel": name, "error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(row), flush=True)
        rows.append(row)
        torch.cuda.empty_cache()
    print_table(rows, ceiling_tbps)
    payload = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "command": " ".join([sys.executable, *sys.argv]),
        "copy_ceiling_tbps": ceiling_tbps,
        "results": rows,
    }
    write_json_atomic(args.out / "kernels.json", payload)
    print(f"wrote {args.out / 'kernels.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
