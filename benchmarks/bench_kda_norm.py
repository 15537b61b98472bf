"""`kda_norm_in_oproj` against today's KDA decode at Flash shapes (issue 27 round 4): the head norm in
KDA's last program vs in o_proj's prologue, same harness and same call as RESULTS.md's KDA numbers.

Cases (bench_kernels' timing: median of 30 CUDA-graph replays per call, with and without PDL; every case
checked against the naive chain first):
  * KDA alone: 64 layers back to back, inputs rotated past L2 (bench_kernels.case_kda's setting), with
    the norm (today) and without it (`kda_decode_heads`, what the switch leaves in the KDA launch).
  * o_proj alone: the plain 2560 x 4096 GEMV vs `gemv_head_norm` (what the prologue costs the GEMV).
  * the block: in_proj GEMV -> KDA -> o_proj for 32 layers with their own states (64 MiB, past L2) in one
    graph, GEMVs alone (no KDA) as the baseline: "KDA adds to the block" = block - GEMVs alone, the
    number the issue-17 target is judged on. With the switch the o_proj is `gemv_head_norm`.
  * the switch's q/k conv-shift ticket taken early (its default: before the PDL wait) vs after the math.
`--dry-run` runs every case's check and one eager call at tiny shapes on the CPU (TRITON_INTERPRET=1).

Usage: python3 benchmarks/bench_kda_norm.py --out OUT [--splits 4,8] [--dry-run]   (writes kda_norm.json)
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from bubblescope.kernels.gemv import gemv, gemv_naive
from bubblescope.kernels.gemv.head_norm_prologue import gemv_head_norm
from bubblescope.kernels.gemv.naive import gemv_head_norm_naive
from bubblescope.kernels.kda_decode import KDALayerState, KDALayerWeights, kda_decode, kda_decode_naive
from bubblescope.kernels.kda_decode.heads import KDAHeads, kda_decode_heads
from bubblescope.kernels.kda_decode.naive import kda_heads_naive
from bubblescope.kernels.kda_decode.split_launch import KDASplitWorkspace

from bubblescope.files.atomic import write_json_atomic

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_kernels as bench  # noqa: E402

BF16 = torch.bfloat16
TOLERANCE = 3e-2


@dataclass(frozen=True)
class Shape:
    """A KDA block's sizes and how many layers / weight copies a timed call list rotates over."""

    hidden: int
    heads: int
    dim: int
    alone_layers: int
    block_layers: int
    weight_copies: int

    @property
    def width(self) -> int:
        return self.heads * self.dim

    @property
    def widths(self) -> tuple[int, ...]:
        return (self.width,) * 5 + (self.heads,)


FLASH = Shape(hidden=2560, heads=32, dim=128, alone_layers=64, block_layers=32, weight_copies=3)
TINY = Shape(hidden=48, heads=2, dim=16, alone_layers=2, block_layers=2, weight_copies=1)


def make_layer(shape: Shape, device: str) -> tuple[dict, KDALayerWeights, KDALayerState]:
    """Random bf16 projections, weights and a non-zero fp32 state of one KDA layer."""
    width, heads = shape.width, shape.heads
    acts = {n: torch.randn(1, width, device=device, dtype=BF16) for n in ("q", "k", "v", "f", "gate")}
    acts["b"] = torch.randn(1, heads, device=device, dtype=BF16)
    weights = KDALayerWeights(
        *(torch.randn(width, 4, device=device, dtype=BF16) * 0.5 for _ in range(3)),
        a_log=torch.randn(heads, device=device),
        dt_bias=torch.randn(width, device=device),
        o_norm=torch.rand(shape.dim, device=device, dtype=BF16) + 0.5,
    )
    state = KDALayerState(
        *(torch.randn(1, width, 3, device=device, dtype=BF16) for _ in range(3)),
        recurrent=torch.randn(1, heads, shape.dim, shape.dim, device=device) * 0.1,
    )
    return acts, weights, state


def state_bytes(shape: Shape) -> int:
    """fp32 recurrent state read + written per layer."""
    return 2 * shape.heads * shape.dim * shape.dim * 4


def case_alone(
    shape: Shape, device: str, v_splits: int, norm_in_oproj: bool, early_ticket: bool = True
) -> dict:
    """KDA decode alone, layers back to back: with its norm, or un-normed (`kda_decode_heads`; each layer
    its own workspace there, as an early ticket needs when KDA launches follow each other directly)."""
    layers = [make_layer(shape, device) for _ in range(shape.alone_layers)]
    acts, weights, state = layers[0]
    want_state = state.clone()
    if norm_in_oproj:
        bare = {name: tensor for name, tensor in acts.items() if name != "gate"}
        heads_out = kda_heads_naive(**bare, weights=weights, state=want_state)
        gate_sig = torch.sigmoid(acts["gate"].float().view(heads_out.shape))
        want = (heads_out * weights.o_norm.float() * gate_sig).reshape(1, -1)
        got = kda_decode_heads(**acts, weights=weights, state=state, v_splits=v_splits).out
        heads = [KDAHeads.allocate(1, shape.heads, shape.dim, v_splits, torch.device(device)) for _ in layers]
        spaces = [KDASplitWorkspace.allocate(1, shape.heads, shape.dim, torch.device(device)) for _ in layers]

        def call(index: int, pdl: bool) -> None:
            a, w, s = layers[index]
            q, k, v, f, b, g = (a[name] for name in ("q", "k", "v", "f", "b", "gate"))
            kda_decode_heads(
                q,
                k,
                v,
                f,
                b,
                g,
                w,
                s,
                use_pdl=pdl,
                heads=heads[index],
                v_splits=v_splits,
                workspace=spaces[index],
                early_ticket=early_ticket,
            )
    else:
        want = kda_decode_naive(**acts, weights=weights, state=want_state)
        got = kda_decode(**acts, weights=weights, state=state, v_splits=v_splits)
        outs = [torch.empty(1, shape.width, device=device, dtype=BF16) for _ in layers]

        def call(index: int, pdl: bool) -> None:
            a, w, s = layers[index]
            kda_decode(**a, weights=w, state=s, use_pdl=pdl, out=outs[index], v_splits=v_splits)

    err = max(
        bench.max_rel_diff(got.float(), want.float()),
        bench.max_rel_diff(state.recurrent, want_state.recurrent),
    )
    return dict(
        bytes=state_bytes(shape),
        ok=err < TOLERANCE,
        err=err,
        calls=lambda pdl: [lambda i=i: call(i, pdl) for i in range(len(layers))],
    )


def case_oproj(shape: Shape, device: str, v_splits: int | None) -> dict:
    """o_proj alone over rotated weight copies: the plain GEMV (None) or `gemv_head_norm` (P = v_splits)."""
    copies = bench.copies_for(shape.hidden * shape.width * 2) if device == "cuda" else 1
    weights = [torch.randn(shape.hidden, shape.width, device=device, dtype=BF16) / 64 for _ in range(copies)]
    x = torch.randn(1, shape.width, device=device)
    gate = torch.randn(1, shape.width, device=device, dtype=BF16)
    o_norm = torch.rand(shape.dim, device=device, dtype=BF16) + 0.5
    parts = v_splits or 1
    sumsq = (x.view(1, shape.heads, parts, -1) ** 2).sum(-1)
    outs = [torch.empty(1, shape.hidden, device=device, dtype=BF16) for _ in weights]
    if v_splits is None:
        x_bf16 = x.to(BF16)
        err = bench.max_rel_diff(gemv(x_bf16, weights[0]).float(), gemv_naive(x_bf16, weights[0]).float())

        def call(index: int, pdl: bool) -> None:
            gemv(x_bf16, weights[index], use_pdl=pdl, out=outs[index])
    else:
        rows = (
            x.view(1, shape.heads, -1) * o_norm.float() * torch.sigmoid(gate.float().view(1, shape.heads, -1))
        )
        rows = rows.reshape(1, -1).contiguous()
        got = gemv_head_norm(rows, sumsq, weights[0])
        err = bench.max_rel_diff(got.float(), gemv_head_norm_naive(x, gate, o_norm, weights[0]).float())

        def call(index: int, pdl: bool) -> None:
            gemv_head_norm(rows, sumsq, weights[index], use_pdl=pdl, out=outs[index])

    return dict(
        bytes=shape.hidden * shape.width * 2,
        ok=err < TOLERANCE,
        err=err,
        calls=lambda pdl: [lambda i=i: call(i, pdl) for i in range(len(weights))],
    )


def case_block(
    shape: Shape, device: str, v_splits: int | None, norm_in_oproj: bool = False, early_ticket: bool = True
) -> dict:
    """in_proj GEMV -> KDA decode -> o_proj per layer (bench_kernels.case_kda_block's setting); v_splits
    None: the two GEMVs alone. norm_in_oproj: `kda_decode_heads` then `gemv_head_norm`."""
    widths, layers_count = shape.widths, shape.block_layers
    in_projs = [
        torch.randn(sum(widths), shape.hidden, device=device, dtype=BF16) / shape.hidden**0.5
        for _ in range(shape.weight_copies)
    ]
    o_projs = [
        torch.randn(shape.hidden, shape.width, device=device, dtype=BF16) / shape.width**0.5
        for _ in range(shape.weight_copies)
    ]
    x = torch.randn(1, shape.hidden, device=device, dtype=BF16)
    projs = [torch.empty(1, sum(widths), device=device, dtype=BF16) for _ in range(layers_count)]
    attn = [torch.randn(1, shape.width, device=device, dtype=BF16) for _ in range(layers_count)]
    heads = [KDAHeads.allocate(1, shape.heads, shape.dim, v_splits or 1, torch.device(device)) for _ in projs]
    outs = [torch.empty(1, shape.hidden, device=device, dtype=BF16) for _ in range(layers_count)]
    kda_layers = [make_layer(shape, device)[1:] for _ in range(layers_count)] if v_splits else []

    def block(index: int, pdl: bool) -> None:
        in_proj, o_proj = in_projs[index % shape.weight_copies], o_projs[index % shape.weight_copies]
        gemv(x, in_proj, use_pdl=pdl, out=projs[index])
        if not v_splits:
            gemv(attn[index], o_proj, use_pdl=pdl, out=outs[index])
            return
        q, k, v, f, g, b = projs[index].split(widths, dim=1)
        weights, state = kda_layers[index]
        if norm_in_oproj:
            head = heads[index]
            kda_decode_heads(
                q,
                k,
                v,
                f,
                b,
                g,
                weights,
                state,
                use_pdl=pdl,
                heads=head,
                v_splits=v_splits,
                early_ticket=early_ticket,
            )
            gemv_head_norm(head.out, head.sumsq, o_proj, use_pdl=pdl, out=outs[index])
        else:
            kda_decode(q, k, v, f, b, g, weights, state, use_pdl=pdl, out=attn[index], v_splits=v_splits)
            gemv(attn[index], o_proj, use_pdl=pdl, out=outs[index])

    err = 0.0
    if v_splits:
        weights, state = kda_layers[0]
        want_state = state.clone()
        block(0, False)
        q, k, v, f, g, b = projs[0].split(widths, dim=1)
        want = gemv_naive(kda_decode_naive(q, k, v, f, b, g, weights, want_state), o_projs[0])
        err = max(
            bench.max_rel_diff(state.recurrent, want_state.recurrent), bench.max_rel_diff(outs[0], want)
        )
    gemv_bytes = (sum(widths) + shape.width) * shape.hidden * 2
    return dict(
        bytes=gemv_bytes + (state_bytes(shape) if v_splits else 0),
        ok=err < TOLERANCE,
        err=err,
        calls=lambda pdl: [lambda i=i: block(i, pdl) for i in range(layers_count)],
    )


def build_cases(shape: Shape, device: str, splits: list[int]) -> dict[str, Callable[[], dict]]:
    """The first split's cases first, most telling first (a timeout keeps them): the block with and
    without the switch, KDA alone, o_proj alone, then the ticket after the math (the first split only)."""
    cases: dict[str, Callable[[], dict]] = {
        "kda block gemvs only (in_proj + o_proj)": lambda: case_block(shape, device, None),
    }
    for position, n in enumerate(splits):
        cases[f"kda block v_splits={n}, norm in kda (today)"] = lambda n=n: case_block(shape, device, n)
        cases[f"kda block v_splits={n}, kda_norm_in_oproj"] = lambda n=n: case_block(shape, device, n, True)
        cases[f"kda alone v_splits={n}, norm in kda (today)"] = lambda n=n: case_alone(
            shape, device, n, False
        )
        cases[f"kda alone v_splits={n}, un-normed (kda_norm_in_oproj)"] = lambda n=n: case_alone(
            shape, device, n, True
        )
        if position == 0:
            cases["o_proj gemv (plain)"] = lambda: case_oproj(shape, device, None)
        cases[f"o_proj gemv_head_norm P={n}"] = lambda n=n: case_oproj(shape, device, n)
        if position == 0:
            cases[f"kda block v_splits={n}, kda_norm_in_oproj, ticket after the math"] = lambda n=n: (
                case_block(shape, device, n, True, early_ticket=False)
            )
            cases[f"kda alone v_splits={n}, un-normed, ticket after the math"] = lambda n=n: case_alone(
                shape, device, n, True, early_ticket=False
            )
    return cases


def dry_run(splits: list[int]) -> list[dict]:
    """Every case's check and one eager call per call list, at tiny shapes on the CPU interpreter."""
    rows = []
    for name, build in build_cases(TINY, "cpu", splits).items():
        case = build()
        for call in case["calls"](False):
            call()
        row = bench.checked_row(name, case)
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="folder for kda_norm.json")
    parser.add_argument("--splits", default="4,8", help="comma-separated KDA V splits")
    parser.add_argument("--dry-run", action="store_true", help="CPU interpreter, tiny shapes, no timing")
    args = parser.parse_args(argv)
    splits = [int(n) for n in args.splits.split(",")]
    if args.dry_run:
        rows = dry_run(splits)
        failed = [row["kernel"] for row in rows if not row["correct"]]
        print(f"dry run: {len(rows)} cases, failed checks: {failed or 'none'}")
        return 1 if failed else 0
    if not torch.cuda.is_available():
        print("bench_kda_norm: needs a CUDA device (or --dry-run)", file=sys.stderr)
        return 2
    ceiling_tbps = bench.measure_copy_ceiling_tbps()
    payload = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(),
        "command": " ".join([sys.executable, *sys.argv]),
        "copy_ceiling_tbps": ceiling_tbps,
        "state_time_us": state_bytes(FLASH) / (ceiling_tbps * 1e12) * 1e6,
        "results": [],
    }
    for name, build in build_cases(FLASH, "cuda", splits).items():
        try:
            row = bench.run_case(name, build, ceiling_tbps)
        except Exception as exc:  # a broken case must not stop the others
            row = {"kernel": name, "error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(row), flush=True)
        payload["results"].append(row)
        # Rewritten after every case: a timeout keeps what finished.
        write_json_atomic(args.out / "kda_norm.json", payload)
        torch.cuda.empty_cache()
    bench.print_table(payload["results"], ceiling_tbps)
    print_block_summary(payload["results"], payload["state_time_us"])
    print(f"wrote {args.out / 'kda_norm.json'}")
    return 0


def print_block_summary(rows: list[dict], state_time_us: float) -> None:
    """Per layer under graph + PDL: what KDA adds to the block (block - GEMVs alone), ÷ the state time."""
    pdl_us = {row["kernel"]: row["graph_pdl_us"] for row in rows if "graph_pdl_us" in row}
    gemvs = pdl_us.get("kda block gemvs only (in_proj + o_proj)")
    print(f"\nstate bytes' time per layer {state_time_us:.2f} us (target: KDA <= 2x that)")
    for name, us in pdl_us.items():
        if name.startswith("kda block v_splits") and gemvs is not None:
            adds = us - gemvs
            print(f"{name:58s} adds {adds:6.2f} us = {adds / state_time_us:4.2f}x state time")
        elif name.startswith("kda alone"):
            print(f"{name:58s} alone {us:5.2f} us = {us / state_time_us:4.2f}x state time")


if __name__ == "__main__":
    raise SystemExit(main())
