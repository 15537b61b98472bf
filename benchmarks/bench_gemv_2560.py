"""The decode step's 2560-row GEMVs (KDA o_proj / MLA dense 2560 x 4096, dense FFN down 2560 x 6144) by
tile and L2-prefetch variant, alone and in the KDA block's PDL chain, against the copy ceiling.

Why: in the step these projections ran at 3.02 TB/s (312 us for 944 MB, issue 27 round 3) while the
large in_proj and lm_head GEMVs reach the ceiling; at 21 MB and ~5-7 us each, ramp-up, the tail and the
PDL hand-off dominate, not the stream. Two measurements, one process (same-run ratios):
- alone: 13 calls (weights rotated past the 50 MB L2) back to back in one CUDA graph, median of 30
  replays per call, with PDL (the decoder's mode) and, for the baseline and the prefetch, without;
- chain: the KDA block as the decoder runs it, `in_proj GEMV -> kda_decode (4 splits) -> o_proj GEMV ->
  add_rmsnorm`, 32 layers with their own states (the normed row feeds the next in_proj), all under PDL in
  one CUDA graph; the variant changes only o_proj's launch. "none" leaves o_proj out, so
  (chain - none) is what o_proj adds to the block, the number the step's breakdown charges it.
Every case is first checked against kernels/gemv/naive.py (and the chain's norm against a torch norm).

Usage: python3 benchmarks/bench_gemv_2560.py --out OUT      (writes gemv_2560.json; table last)
       --only TEXT: cases whose name contains TEXT
       --dry-run: every case at a tiny shape, checked, not timed (CPU: TRITON_INTERPRET=1)
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
from dataclasses import dataclass
from pathlib import Path

import torch
import triton
from bench_kernels import copies_for, max_rel_diff, measure_copy_ceiling_tbps, time_graph_us
from bubblescope.kernels.gemv import GemvConfig, gemv, gemv_naive
from bubblescope.kernels.kda_decode import KDALayerState, KDALayerWeights, kda_decode
from bubblescope.kernels.rmsnorm import add_rmsnorm
from gemv_2560_variants import ALONE_VARIANTS, CHAIN_VARIANTS

from bubblescope.files.atomic import write_json_atomic

BF16 = torch.bfloat16
# Alone, these are also timed without PDL (what the prefetch does to a plain launch's ramp-up).
PLAIN_TOO = ("base bn4 bk512 w4", "bn4 bk512 w4 pf1")


@dataclass(frozen=True)
class Shape:
    """hidden = the projections' output rows; heads x dim = KDA's width (o_proj's K); down = FFN down's K;
    mla_in = the MLA in_proj's rows (q, latent, rope key, head gate), a 34.6 MB projection that fits L2."""

    hidden: int
    heads: int
    dim: int
    down: int
    mla_in: int
    layers: int
    device: str


FLASH = Shape(hidden=2560, heads=32, dim=128, down=6144, mla_in=6752, layers=32, device="cuda")
# Odd hidden size: the last strip of every tile shape is partial (masks exercised).
DRY = Shape(hidden=38, heads=2, dim=16, down=72, mla_in=45, layers=2, device="cpu")
# The MLA in_proj with and without the prefetch (its own tiles: 8-row strips, ops.choose_config).
MLA_IN_VARIANTS = ("base bn8 bk512 w4", "bn8 bk512 w4 pf1")


def case_alone(shape: Shape, out_features: int, in_features: int, config: GemvConfig) -> dict:
    """One projection [out_features, in_features], calls over weight copies rotated past L2."""
    n, k = out_features, in_features
    bytes_per_call = n * k * 2 + (n + k) * 2
    copies = copies_for(bytes_per_call) if shape.device == "cuda" else 2
    weights = [torch.randn(n, k, device=shape.device, dtype=BF16) / k**0.5 for _ in range(copies)]
    x = torch.randn(1, k, device=shape.device, dtype=BF16)
    outs = [torch.empty(1, n, device=shape.device, dtype=BF16) for _ in range(copies)]
    # Checked with PDL (an eager PDL launch is a plain one that may start early): the timed kernel's
    # compile, not a second one.
    err = max(max_rel_diff(gemv(x, w, use_pdl=True, config=config), gemv_naive(x, w)) for w in weights[:2])
    return dict(
        bytes=bytes_per_call,
        ok=err < 1e-2,
        err=err,
        calls=lambda pdl: [
            lambda w=w, o=o: gemv(x, w, use_pdl=pdl, config=config, out=o)
            for w, o in zip(weights, outs, strict=True)
        ],
    )


def kda_layer(shape: Shape) -> tuple[KDALayerWeights, KDALayerState]:
    """Random small KDA tensors and fp32 state of one layer (bench_kernels.flash_kda_layer, any shape)."""
    width, dev = shape.heads * shape.dim, shape.device
    weights = KDALayerWeights(
        *(torch.randn(width, 4, device=dev, dtype=BF16) * 0.5 for _ in range(3)),
        a_log=torch.randn(shape.heads, device=dev),
        dt_bias=torch.randn(width, device=dev),
        o_norm=torch.ones(shape.dim, device=dev, dtype=BF16),
    )
    state = KDALayerState(
        *(torch.randn(1, width, 3, device=dev, dtype=BF16) for _ in range(3)),
        recurrent=torch.randn(1, shape.heads, shape.dim, shape.dim, device=dev) * 0.1,
    )
    return weights, state


class ChainData:
    """The KDA block's tensors for `shape.layers` layers, built once and shared by every chain variant."""

    def __init__(self, shape: Shape, weight_copies: int = 3) -> None:
        dev, width, hidden = shape.device, shape.heads * shape.dim, shape.hidden
        self.shape = shape
        self.widths = (width,) * 5 + (shape.heads,)
        self.in_projs = [
            torch.randn(sum(self.widths), hidden, device=dev, dtype=BF16) / hidden**0.5
            for _ in range(weight_copies)
        ]
        self.o_projs = [
            torch.randn(hidden, width, device=dev, dtype=BF16) / width**0.5 for _ in range(weight_copies)
        ]
        self.norm_weight = torch.rand(hidden, device=dev, dtype=BF16) + 0.5
        self.normed = [torch.randn(1, hidden, device=dev, dtype=BF16) for _ in range(shape.layers + 1)]
        self.residual = torch.randn(1, hidden, device=dev, dtype=BF16)
        self.projs = [torch.empty(1, sum(self.widths), device=dev, dtype=BF16) for _ in range(shape.layers)]
        self.attn = [torch.empty(1, width, device=dev, dtype=BF16) for _ in range(shape.layers)]
        self.outs = [torch.zeros(1, hidden, device=dev, dtype=BF16) for _ in range(shape.layers)]
        self.kda = [kda_layer(shape) for _ in range(shape.layers)]
        self.v_splits = 4 if shape.dim >= 64 else 2

    def layer(self, index: int, config: GemvConfig | None, pdl: bool) -> None:
        """One block: in_proj on the previous layer's normed row, KDA, o_proj (config None: left out),
        residual add + RMSNorm into the next layer's normed row."""
        copy = index % len(self.in_projs)
        gemv(self.normed[index], self.in_projs[copy], use_pdl=pdl, out=self.projs[index])
        q, k, v, f, g, b = self.projs[index].split(self.widths, dim=1)
        weights, state = self.kda[index]
        kda_decode(
            q, k, v, f, b, g, weights, state, use_pdl=pdl, out=self.attn[index], v_splits=self.v_splits
        )
        if config is not None:
            gemv(self.attn[index], self.o_projs[copy], use_pdl=pdl, config=config, out=self.outs[index])
        add_rmsnorm(
            self.outs[index],
            self.residual,
            self.norm_weight,
            use_pdl=pdl,
            out=self.normed[index + 1],
            residual_out=self.residual,
        )

    def check(self, config: GemvConfig) -> float:
        """Run layer 0 once (with PDL: the timed kernels' compiles); o_proj against gemv_naive and the
        normed row against a torch add + RMSNorm."""
        residual_before = self.residual.clone()
        self.layer(0, config, pdl=True)
        err = max_rel_diff(self.outs[0], gemv_naive(self.attn[0], self.o_projs[0]))
        summed = (self.outs[0].float() + residual_before.float()).to(BF16).float()
        want = summed * torch.rsqrt(summed.pow(2).mean(-1, keepdim=True) + 1e-6) * self.norm_weight.float()
        return max(err, max_rel_diff(self.normed[1], want))


def case_chain(data: ChainData, config: GemvConfig | None) -> dict:
    """The block chain with o_proj's launch as `config` (None: no o_proj; bytes are o_proj's)."""
    shape = data.shape
    err = data.check(config) if config is not None else 0.0
    return dict(
        bytes=shape.hidden * shape.heads * shape.dim * 2,
        ok=err < 2e-2,
        err=err,
        calls=lambda pdl: [lambda i=i: data.layer(i, config, pdl) for i in range(shape.layers)],
        chain=True,
    )


def build_cases(shape: Shape) -> dict[str, Callable[[], dict]]:
    """The KDA block chain first (the decisive rows), then every variant alone at 2560 x 4096 and
    2560 x 6144, then the MLA in_proj with and without the prefetch (a run cut short by its timeout
    keeps what came first)."""
    holder: dict[str, ChainData] = {}

    def data() -> ChainData:
        if "data" not in holder:
            holder["data"] = ChainData(shape)
        return holder["data"]

    cases: dict[str, Callable[[], dict]] = {
        "chain kda block, no o_proj (none)": lambda: case_chain(data(), None)
    }
    for name in CHAIN_VARIANTS:
        cases[f"chain kda block o_proj {name}"] = lambda c=ALONE_VARIANTS[name]: case_chain(data(), c)
    for in_features in (shape.heads * shape.dim, shape.down):
        for name, config in ALONE_VARIANTS.items():
            label = f"alone {shape.hidden}x{in_features} {name}"
            cases[label] = lambda k=in_features, c=config: case_alone(shape, shape.hidden, k, c)
    for name in MLA_IN_VARIANTS:
        config = ALONE_VARIANTS[name.removeprefix("base ")]
        label = f"alone mla_in {shape.mla_in}x{shape.hidden} {name}"
        cases[label] = lambda c=config: case_alone(shape, shape.mla_in, shape.hidden, c)
    return cases


def modes_for(name: str) -> tuple[tuple[str, bool], ...]:
    """PDL for every case (the decoder's mode); plain launches too for PLAIN_TOO alone."""
    plain = name.startswith("alone") and any(name.endswith(variant) for variant in PLAIN_TOO)
    return (("graph", False), ("graph_pdl", True)) if plain else (("graph_pdl", True),)


def run_case(name: str, build: Callable[[], dict], ceiling_tbps: float | None, timed: bool) -> dict:
    """Check the case, then (timed) its graph medians per call in each mode and the bandwidth."""
    case = build()
    row = {"case": name, "bytes_per_call": case["bytes"], "correct": case["ok"], "max_err": case["err"]}
    if not case["ok"]:
        return row | {"error": "correctness check failed; not timed"}
    if not timed:
        for call in case["calls"](False):
            call()
        return row
    for label, pdl in modes_for(name):
        row[f"{label}_us"] = time_graph_us(case["calls"](pdl), replays=30)
    if not case.get("chain"):
        best_us = min(value for key, value in row.items() if key.endswith("_us"))
        row["bandwidth_tbps"] = case["bytes"] / (best_us * 1e-6) / 1e12
        row["fraction_of_copy"] = row["bandwidth_tbps"] / ceiling_tbps
    return row


def add_chain_marginals(rows: list[dict], ceiling_tbps: float) -> None:
    """o_proj's cost in the chain: (variant - none) per layer, and its bytes over that time."""
    none = next((row for row in rows if row["case"].endswith("(none)") and "graph_pdl_us" in row), None)
    if none is None:
        return
    for row in rows:
        if row["case"].startswith("chain") and row is not none and "graph_pdl_us" in row:
            added_us = row["graph_pdl_us"] - none["graph_pdl_us"]
            row["o_proj_added_us"] = added_us
            if added_us > 0:
                row["bandwidth_tbps"] = row["bytes_per_call"] / (added_us * 1e-6) / 1e12
                row["fraction_of_copy"] = row["bandwidth_tbps"] / ceiling_tbps


def add_ratios(rows: list[dict]) -> None:
    """Same-run ratio of each row's PDL time to its group's baseline ("base ..." of the same prefix)."""
    bases = {row["case"].rsplit(" base ", 1)[0]: row for row in rows if " base " in row["case"]}
    for row in rows:
        prefix = next((p for p in bases if row["case"].startswith(p + " ")), None)
        base = bases.get(prefix) if prefix else None
        if base and "graph_pdl_us" in row and "graph_pdl_us" in base:
            row["ratio_to_base"] = row["graph_pdl_us"] / base["graph_pdl_us"]


def print_table(rows: list[dict], ceiling_tbps: float) -> None:
    print(f"\ncopy ceiling: {ceiling_tbps:.2f} TB/s (same call)")
    heads = ("graph us", 9), ("pdl us", 8), ("÷ base", 7), ("o_proj +us", 10), ("TB/s", 6), ("%copy", 6)
    print(f"{'case':52s} " + " ".join(f"{name:>{width}s}" for name, width in heads))
    for row in rows:
        if "graph_pdl_us" not in row:
            print(f"{row['case']:52s} ERROR {row.get('error', '')[:80]}")
            continue
        cells = [
            f"{row['graph_us']:9.2f}" if "graph_us" in row else f"{'-':>9s}",
            f"{row['graph_pdl_us']:8.2f}",
            f"{row['ratio_to_base']:7.3f}" if "ratio_to_base" in row else f"{'-':>7s}",
            f"{row['o_proj_added_us']:10.2f}" if "o_proj_added_us" in row else f"{'-':>10s}",
            f"{row['bandwidth_tbps']:6.2f}" if "bandwidth_tbps" in row else f"{'-':>6s}",
            f"{100 * row['fraction_of_copy']:5.0f}%" if "fraction_of_copy" in row else f"{'-':>6s}",
        ]
        print(f"{row['case']:52s} " + " ".join(cells))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="folder for gemv_2560.json")
    parser.add_argument("--only", default="", help="run only cases whose name contains this text")
    parser.add_argument("--dry-run", action="store_true", help="tiny shapes, checked, not timed")
    args = parser.parse_args(argv)
    cuda = torch.cuda.is_available()
    if args.dry_run and not cuda and os.environ.get("TRITON_INTERPRET") != "1":
        print("bench_gemv_2560: --dry-run on the CPU needs TRITON_INTERPRET=1", file=sys.stderr)
        return 2
    if not args.dry_run and not cuda:
        print("bench_gemv_2560: needs a CUDA device (or --dry-run)", file=sys.stderr)
        return 2
    shape = FLASH if not args.dry_run else Shape(**{**DRY.__dict__, "device": "cuda" if cuda else "cpu"})
    ceiling_tbps = measure_copy_ceiling_tbps() if not args.dry_run else None
    meta = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name() if cuda else "cpu (Triton interpreter)",
        "dry_run": args.dry_run,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "command": " ".join([sys.executable, *sys.argv]),
        "copy_ceiling_tbps": ceiling_tbps,
    }
    rows = []
    for name, build in build_cases(shape).items():
        if args.only not in name:
            continue
        try:
            row = run_case(name, build, ceiling_tbps, timed=not args.dry_run)
        except Exception as exc:  # a broken case must not stop the others
            traceback.print_exc()
            row = {"case": name, "error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(row), flush=True)
        rows.append(row)
        if cuda:
            torch.cuda.empty_cache()
        # After every row: a run its timeout cuts short still leaves the rows it finished.
        write_json_atomic(args.out / "gemv_2560.json", meta | {"results": rows})
    if not args.dry_run:
        add_chain_marginals(rows, ceiling_tbps)
        add_ratios(rows)
    write_json_atomic(args.out / "gemv_2560.json", meta | {"results": rows})
    failed = [row["case"] for row in rows if not row.get("correct")]
    if args.dry_run:
        print(
            f"dry run: {len(rows) - len(failed)} of {len(rows)} cases correct"
            + (f"; failed: {failed}" if failed else "")
        )
        return 1 if failed else 0
    print_table(rows, ceiling_tbps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
