"""The KDA block as one persistent launch vs today's three launches (issue 27, round 4), same process.

The block as RESULTS.md's "KDA adds to the block" case times it: `in_proj GEMV [5W + H, D] -> KDA
decode -> o_proj GEMV [D, W]` for 32 layers back to back, each with its own state (64 MiB of fp32
states: not in L2), three weight copies rotating (past L2), all captured in ONE CUDA graph under PDL.
Every arm is checked against the composed PyTorch reference first (no timing without a green check),
then the graphs are replayed in interleaved rounds (each round: every arm's graph, `--replays` times,
median per arm), so the spread between rounds is the run-to-run spread. The HBM copy ceiling is
measured in the same process. Arms:
  three launches (today)      gemv + kda_decode (4 V splits) + gemv, the decoder's kernels
  ..., o_proj gemv_prefetch   the same with o_proj's strips prefetched into L2 before its PDL wait
  gemvs only                  in_proj + o_proj without KDA: (arm - this) is what KDA adds
  one launch ...              kda_block, PHASE 0: grid barriers, loads issued before them
  same kernel, three launches kda_block's PHASE 1, 2, 3 as three PDL launches on the same grid

Usage: python3 benchmarks/bench_kda_block.py --out OUT     (writes kda_block.json there)
       python3 benchmarks/bench_kda_block.py --out OUT --dry-run   (CPU interpreter, tiny shapes: checks only)
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import triton
from bubblescope.kernels._pdl import is_interpreting
from bubblescope.kernels.gemv import gemv, gemv_naive
from bubblescope.kernels.gemv.ops import choose_config
from bubblescope.kernels.kda_block import KDABlockConfig, kda_block, kda_block_naive
from bubblescope.kernels.kda_block.ops import LAST_LAUNCH
from bubblescope.kernels.kda_decode import KDALayerState, KDALayerWeights, kda_decode

from bubblescope.files.atomic import write_json_atomic


@dataclass(frozen=True)
class Shapes:
    hidden: int
    heads: int
    dim: int
    layers: int
    weight_copies: int

    @property
    def widths(self) -> tuple[int, ...]:
        return (self.heads * self.dim,) * 5 + (self.heads,)


E256 = Shapes(hidden=2560, heads=32, dim=128, layers=32, weight_copies=3)
TINY = Shapes(hidden=48, heads=2, dim=16, layers=2, weight_copies=1)
# name -> KDABlockConfig of a kda_block arm (None: not a kda_block arm).
ONE_LAUNCH = {
    "one launch, gemv tiles, L2 prefetch": KDABlockConfig(persistent=True),
    "one launch, gemv tiles, L2 prefetch, maxnreg 128": KDABlockConfig(persistent=True, max_registers=128),
    # 4 x 1024 strips: the same bytes a tile as 8 x 512, twice the strips, so the slowest program does
    # less extra (396 programs: 13 strips at most for 12.95 on average, where 2564 strips give 7 for 6.47).
    "one launch, 4x1024 in_proj strips, L2 prefetch": KDABlockConfig(persistent=True, in_tiles=(4, 1024)),
    "one launch, gemv tiles, no prefetch": KDABlockConfig(persistent=True, l2_prefetch=False),
    "one launch, 16x512 / 2x512 strips, L2 prefetch": KDABlockConfig(
        persistent=True, in_tiles=(16, 512), out_tiles=(2, 512)
    ),
    "same kernel, three launches": KDABlockConfig(persistent=False),
    # Where the time goes: the in_proj strips alone on the persistent grid (vs "in_proj gemv alone").
    "same kernel, phase 1 only": KDABlockConfig(persistent=False, phases=(1,)),
}


GEMVS_ONLY = "gemvs only (in_proj + o_proj)"
# Diagnostic arms that stream only the in_proj weights (the persistent grid's phase 1 vs the GEMV's grid).
IN_PROJ_ONLY = ("in_proj gemv alone", "same kernel, phase 1 only")


def make_layer(shapes: Shapes, device: torch.device) -> tuple[KDALayerWeights, KDALayerState]:
    """One KDA layer's decode weights and a non-zero state (bench_kernels.flash_kda_layer's values)."""
    width, bf16 = shapes.heads * shapes.dim, torch.bfloat16
    weights = KDALayerWeights(
        *(torch.randn(width, 4, device=device, dtype=bf16) * 0.5 for _ in range(3)),
        a_log=torch.randn(shapes.heads, device=device),
        dt_bias=torch.randn(width, device=device),
        o_norm=torch.ones(shapes.dim, device=device, dtype=bf16),
    )
    state = KDALayerState(
        *(torch.randn(1, width, 3, device=device, dtype=bf16) for _ in range(3)),
        recurrent=torch.randn(1, shapes.heads, shapes.dim, shapes.dim, device=device) * 0.1,
    )
    return weights, state


class Blocks:
    """The 32 layers every arm runs on: weights, states, x and per-layer output buffers."""

    def __init__(self, shapes: Shapes, device: torch.device) -> None:
        bf16, width = torch.bfloat16, shapes.heads * shapes.dim
        self.shapes = shapes
        self.x = torch.randn(1, shapes.hidden, device=device, dtype=bf16)
        self.in_projs = [
            torch.randn(sum(shapes.widths), shapes.hidden, device=device, dtype=bf16) / shapes.hidden**0.5
            for _ in range(shapes.weight_copies)
        ]
        self.o_projs = [
            torch.randn(shapes.hidden, width, device=device, dtype=bf16) / width**0.5
            for _ in range(shapes.weight_copies)
        ]
        self.layers = [make_layer(shapes, device) for _ in range(shapes.layers)]
        self.projs = [torch.empty(1, sum(shapes.widths), device=device, dtype=bf16) for _ in self.layers]
        self.attns = [torch.empty(1, width, device=device, dtype=bf16) for _ in self.layers]
        self.outs = [torch.empty(1, shapes.hidden, device=device, dtype=bf16) for _ in self.layers]

    def weights_of(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        copy = index % self.shapes.weight_copies
        return self.in_projs[copy], self.o_projs[copy]

    def bytes_per_layer(self, arm: str) -> int:
        """What the arm must read: weights once, plus the fp32 state read and written where KDA runs."""
        shapes = self.shapes
        in_proj = sum(shapes.widths) * shapes.hidden * 2
        if arm in IN_PROJ_ONLY:
            return in_proj
        gemv_bytes = in_proj + shapes.heads * shapes.dim * shapes.hidden * 2
        return gemv_bytes + (0 if arm == GEMVS_ONLY else 2 * shapes.heads * shapes.dim * shapes.dim * 4)


def three_launches(
    blocks: Blocks, index: int, pdl: bool, with_kda: bool = True, o_proj_prefetch: bool = False
) -> torch.Tensor:
    """The decoder's block; o_proj_prefetch: its o_proj with `GemvConfig.l2_prefetch` (the whole strip asked
    of L2 before the PDL wait, the three-launch answer to the same gap)."""
    in_proj, o_proj = blocks.weights_of(index)
    gemv(blocks.x, in_proj, use_pdl=pdl, out=blocks.projs[index])
    if with_kda:
        q, k, v, f, g, b = blocks.projs[index].split(blocks.shapes.widths, dim=1)
        weights, state = blocks.layers[index]
        kda_decode(q, k, v, f, b, g, weights, state, use_pdl=pdl, out=blocks.attns[index], v_splits=4)
    config = None
    if o_proj_prefetch:
        config = replace(choose_config(1, o_proj.shape[0], o_proj.shape[1]), l2_prefetch=1)
    return gemv(blocks.attns[index], o_proj, use_pdl=pdl, out=blocks.outs[index], config=config)


def one_block(blocks: Blocks, index: int, pdl: bool, config: KDABlockConfig) -> torch.Tensor:
    in_proj, o_proj = blocks.weights_of(index)
    weights, state = blocks.layers[index]
    return kda_block(
        blocks.x, in_proj, blocks.shapes.widths, weights, state, o_proj, use_pdl=pdl, config=config,
        out=blocks.outs[index],
    )  # fmt: skip


def arm_calls(blocks: Blocks) -> dict[str, Callable[[int, bool], torch.Tensor]]:
    arms: dict[str, Callable[[int, bool], torch.Tensor]] = {
        "three launches (today)": lambda i, pdl: three_launches(blocks, i, pdl),
        GEMVS_ONLY: lambda i, pdl: three_launches(blocks, i, pdl, with_kda=False),
        "in_proj gemv alone": lambda i, pdl: gemv(
            blocks.x, blocks.weights_of(i)[0], use_pdl=pdl, out=blocks.projs[i]
        ),
        "three launches, o_proj gemv_prefetch": lambda i, pdl: three_launches(
            blocks, i, pdl, o_proj_prefetch=True
        ),
    }
    for name, config in ONE_LAUNCH.items():
        arms[name] = lambda i, pdl, c=config: one_block(blocks, i, pdl, c)
    return arms


def check_arm(blocks: Blocks, name: str, call: Callable[[int, bool], torch.Tensor]) -> float | None:
    """Relative error of layer 0's output and state after one call, against the PyTorch reference
    (None: a diagnostic arm whose result is out of sight, run but not checked)."""
    weights, state = blocks.layers[0]
    initial = state.clone()
    want_state = state.clone()
    in_proj, o_proj = blocks.weights_of(0)
    want = kda_block_naive(blocks.x, in_proj, blocks.shapes.widths, weights, want_state, o_proj)
    # With PDL where it runs (the interpreter turns it off): the timed graphs reuse these compiles.
    got = call(0, True).clone()
    if name in IN_PROJ_ONLY:
        # Phase 1 alone writes kda_block's own proj row, out of sight: only the GEMV's row is checked.
        if name.startswith("in_proj"):
            return relative_error(blocks.projs[0], gemv_naive(blocks.x, in_proj))
        return None
    if name == GEMVS_ONLY:
        want = gemv_naive(blocks.attns[0], o_proj)
        want_state = initial
        proj_err = relative_error(blocks.projs[0], gemv_naive(blocks.x, in_proj))
    else:
        proj_err = 0.0
    err = max(proj_err, relative_error(got, want), relative_error(state.recurrent, want_state.recurrent))
    for field in ("q_conv", "k_conv", "v_conv", "recurrent"):
        getattr(state, field).copy_(getattr(initial, field))
    return err


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.double(), want.double()
    return float((got - want).abs().max() / want.abs().max().clamp_min(1e-12))


def capture(calls: list[Callable[[], object]]) -> torch.cuda.CUDAGraph:
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
    return graph


def replay_median_us(graph: torch.cuda.CUDAGraph, replays: int, layers: int) -> float:
    """Median µs per layer over `replays` replays of the 32-layer graph."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(replays):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / layers)
    return statistics.median(samples)


def time_arms(blocks: Blocks, arms: dict, rounds: int, replays: int) -> dict[str, list[float]]:
    graphs = {}
    for name, call in arms.items():
        graphs[name] = capture([lambda i=i, c=call: c(i, True) for i in range(blocks.shapes.layers)])
        for _ in range(3):
            graphs[name].replay()
    torch.cuda.synchronize()
    per_round: dict[str, list[float]] = {name: [] for name in arms}
    for _ in range(rounds):
        for name, graph in graphs.items():
            per_round[name].append(replay_median_us(graph, replays, blocks.shapes.layers))
    return per_round


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--replays", type=int, default=20)
    parser.add_argument(
        "--only", default="", help="time only arms whose name contains this (and the baselines)"
    )
    parser.add_argument("--check-budget-s", type=float, default=30.0, help="no new arm checked after this")
    parser.add_argument("--dry-run", action="store_true", help="tiny shapes, checks only (CPU interpreter)")
    args = parser.parse_args(argv)
    gpu = torch.cuda.is_available() and not is_interpreting()
    if not gpu and not args.dry_run:
        print("bench_kda_block: needs a CUDA device (or --dry-run under TRITON_INTERPRET=1)", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    shapes = TINY if args.dry_run else E256
    blocks = Blocks(shapes, torch.device("cuda" if gpu else "cpu"))
    arms = {
        name: call
        for name, call in arm_calls(blocks).items()
        if not name.startswith("one launch") or (gpu and args.only in name)
    }
    # Compiles happen in the checks: arms past the budget are left out so the timing still runs.
    started = time.monotonic()
    rows = []
    for name, call in arms.items():
        if time.monotonic() - started > args.check_budget_s:
            rows.append({"arm": name, "correct": False, "max_rel_err": None, "error": "check budget"})
            continue
        rows.append(checked_row(blocks, name, call))
    ceiling_tbps = None
    write_payload(args, shapes, rows, ceiling_tbps, gpu)
    if gpu:
        from bubblescope.floor.bandwidth import measure_copy_bandwidth_gbps

        ceiling_tbps = measure_copy_bandwidth_gbps() / 1e3
        timed = {row["arm"]: arms[row["arm"]] for row in rows if row["correct"]}
        add_timings(rows, time_arms(blocks, timed, args.rounds, args.replays), blocks, ceiling_tbps)
        print_table(rows, ceiling_tbps)
    write_payload(args, shapes, rows, ceiling_tbps, gpu)
    return 0 if all(row["correct"] for row in rows) else 1


def checked_row(blocks: Blocks, name: str, call: Callable[[int, bool], torch.Tensor]) -> dict:
    """An arm's result row after its correctness check (an exception is recorded, not raised)."""
    try:
        err = check_arm(blocks, name, call)
    except Exception as exc:  # one broken arm must not stop the others
        row = {
            "arm": name,
            "correct": False,
            "max_rel_err": None,
            "error": f"{type(exc).__name__}: {exc}",
        }
        print(json.dumps(row), flush=True)
        return row
    row = {"arm": name, "max_rel_err": err, "correct": err is None or err < 3e-2}
    if err is None:
        row["note"] = "diagnostic, not checked: its output is kda_block's own proj row"
    if name in ONE_LAUNCH and ONE_LAUNCH[name].persistent:
        row |= {"programs": LAST_LAUNCH.programs, **LAST_LAUNCH.facts}
    print(json.dumps(row), flush=True)
    return row


def add_timings(
    rows: list[dict], per_round: dict[str, list[float]], blocks: Blocks, ceiling_tbps: float
) -> None:
    """Median of the round medians, their spread, what KDA adds over the GEMVs, TB/s and the copy floor."""
    gemvs_us = statistics.median(per_round.get(GEMVS_ONLY, [float("nan")]))
    for row in rows:
        if row["arm"] not in per_round:
            continue
        samples = per_round[row["arm"]]
        median_us = statistics.median(samples)
        layer_bytes = blocks.bytes_per_layer(row["arm"])
        row |= {
            "us_per_layer_rounds": samples,
            "us_per_layer": median_us,
            "spread_us": max(samples) - min(samples),
            "kda_adds_us": median_us - gemvs_us,
            "tbps": layer_bytes / (median_us * 1e-6) / 1e12,
            "copy_floor_us": layer_bytes / (ceiling_tbps * 1e12) * 1e6,
        }


def write_payload(
    args: argparse.Namespace, shapes: Shapes, rows: list[dict], ceiling_tbps, gpu: bool
) -> None:
    """kda_block.json (after the checks, again after the timing: a timeout keeps the checks)."""
    payload = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name() if gpu else "cpu (interpreter)",
        "torch": torch.__version__,
        "triton": triton.__version__,
        "command": " ".join([sys.executable, *sys.argv]),
        "dry_run": args.dry_run,
        "shapes": shapes.__dict__,
        "copy_ceiling_tbps": ceiling_tbps,
        "results": rows,
    }
    write_json_atomic(args.out / "kda_block.json", payload)
    print(f"wrote {args.out / 'kda_block.json'}")


def print_table(rows: list[dict], ceiling_tbps: float) -> None:
    print(f"\ncopy ceiling {ceiling_tbps:.2f} TB/s; µs per layer, graph + PDL, median of rounds [spread]")
    header = f"{'us':>7s} {'spread':>7s} {'KDA adds':>9s} {'TB/s':>6s} {'floor us':>9s} {'programs':>9s}"
    print(f"{'arm':50s} {header}")
    for row in rows:
        if "us_per_layer" not in row:
            print(
                f"{row['arm']:50s} not timed: {row.get('error', 'check failed')} (err {row['max_rel_err']})"
            )
            continue
        print(
            f"{row['arm']:50s} {row['us_per_layer']:7.2f} {row['spread_us']:7.2f} {row['kda_adds_us']:9.2f} "
            f"{row['tbps']:6.2f} {row['copy_floor_us']:9.2f} {row.get('programs', ''):>9}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
