"""Where a DSpark verify step's GPU time goes against the bytes each part must read (issue 27, round 4).

The product's family breakdown (`bubblescope report`: kernel families against the copy ceiling) needs
the workload's `kernel_bytes` rules, which the speculative workload does not have yet (its verify runs
cuBLAS GEMMs at T rows and PyTorch glue that the decode rules do not describe). This script applies the
same idea to a speculative run: the analysis' kernel table (time per step of every kernel name, summed
durations: under PDL a kernel's wait is inside its duration, so overlapping kernels are not deducted,
and GPU idle is its own row), grouped into families by kernel name, each set beside the bytes the
family must read per verify (reference_model/accounting.py's components, the expert union the run
recorded, the KDA verify's staged states) and the time those bytes take at the run's copy ceiling.

Usage: python3 benchmarks/verify_breakdown.py RECORD.json [--draft-mb N]
  RECORD.json: a speculative RunRecord (`runs/<key>.json` of an ablation) with its analysis beside it
  (`<key>.analysis.json`; `bubblescope ablate --reanalyze` rebuilds it). --draft-mb: the draft's weights
  (default 1118 MB: DSpark's, from the round-3 run's union accounting).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bubblescope.reference_model.accounting import FP32_BYTES, bytes_per_token, dtype_bytes
from bubblescope.reference_model.config import get_preset
from bubblescope.reference_model.spec.union_bytes import expert_bytes

CUBLAS = ("nvjet", "cublasLt", "sm80_xmma", "sm90_xmma", "cutlass", "gemmSN", "gemv2T", "gemvx")
# (family, kernel-name prefixes, matched after a leading "void "); the first family that matches takes it.
FAMILIES = (
    ("MoE experts (union launch)", ("union_experts_kernel", "union_compact_kernel")),
    ("MoE experts (per-row launch)", ("fused_experts_kernel", "deep_experts_kernel")),
    ("KDA verify kernel (state + staged states)", ("_kda_verify",)),
    ("MoE router GEMV", ("gemv_kernel",)),
    ("MoE routing (top-k)", ("routing_kernel",)),
    ("cuBLAS GEMMs: KDA/MLA projections, dense FFN, lm_head, draft", CUBLAS),
    ("add + RMSNorm", ("add_rmsnorm_kernel",)),
    ("KDA gated norm (one launch)", ("gated_norm_kernel",)),
    (
        "PyTorch glue (casts, elementwise, copies, index, cat, reductions)",
        ("at::native", "(anonymous namespace)"),
    ),
)


def family_bytes(record: dict, draft_bytes: int) -> dict[str, int]:
    """Bytes per verify each family must read (0 where it reads next to nothing)."""
    config = get_preset(record["preset"])
    switches = set(record.get("switches") or []) | set(
        (record["workload"]["describe"] or {}).get("switches", [])
    )
    parts = bytes_per_token(
        config, context_len=256, router_bf16="bf16_gate" in switches, lm_head_bf16="bf16_lm_head" in switches
    ).components
    experts = record["experts"]
    moe_layers = config.num_hidden_layers - config.first_k_dense_replace
    union = (experts["distinct_experts_mean"] + 1) * expert_bytes(config) * moe_layers
    tokens = int(experts.get("tokens_per_verify") or 10)
    heads, head_dim = config.num_attention_heads, config.head_dim
    state = heads * head_dim * head_dim * FP32_BYTES
    # Staged verify: the state read once, written after each of the T positions.
    kda_verify = len(config.kda_layers) * (tokens + 1) * state
    gemms = parts["kda"] + parts["mla"] + parts["dense_ffn"] + parts["lm_head"] + draft_bytes
    return {
        "MoE experts (union launch)": int(union),
        "MoE experts (per-row launch)": int(union),
        "KDA verify kernel (state + staged states)": kda_verify,
        "MoE router GEMV": parts["router"],
        "MoE routing (top-k)": moe_layers * tokens * config.num_experts * FP32_BYTES,
        "cuBLAS GEMMs: KDA/MLA projections, dense FFN, lm_head, draft": gemms,
        "add + RMSNorm": parts["norms"],
        "KDA gated norm (one launch)": len(config.kda_layers)
        * 3
        * tokens
        * heads
        * head_dim
        * dtype_bytes(config),
    }


def breakdown(record: dict, analysis: dict, draft_bytes: int) -> list[dict]:
    """One row per family: µs per verify, MB, achieved TB/s, µs at the ceiling, excess µs."""
    ceiling = record["floor"]["bandwidth_gbps"] * 1e9
    time_ns = {name: 0.0 for name, _ in FAMILIES}
    time_ns["other"] = 0.0
    for kernel in analysis["kernels"]:
        name = kernel["name"].removeprefix("void ")
        family = next((label for label, prefixes in FAMILIES if name.startswith(prefixes)), "other")
        time_ns[family] += kernel["ns_per_step"]
    sizes = family_bytes(record, draft_bytes)
    rows = []
    for family, ns in time_ns.items():
        if ns <= 0:
            continue
        size = sizes.get(family, 0)
        at_ceiling_us = size / ceiling * 1e6
        rows.append(
            {
                "family": family,
                "us": ns / 1e3,
                "mb": size / 1e6,
                "tbps": size / ns / 1e3 if size else None,
                "ceiling_us": at_ceiling_us,
                "excess_us": ns / 1e3 - at_ceiling_us,
            }
        )
    summary = analysis["summary"]
    idle_us = summary["idle_ns_per_step"] / 1e3
    idle = {"family": "idle (no kernel running)", "us": idle_us, "mb": 0.0, "tbps": None, "ceiling_us": 0.0}
    rows.append(idle | {"excess_us": idle_us})
    return sorted(rows, key=lambda row: -row["excess_us"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("record", type=Path)
    parser.add_argument("--draft-mb", type=float, default=1118.0)
    args = parser.parse_args(argv)
    record = json.loads(args.record.read_text())
    analysis_path = args.record.with_name(args.record.stem + ".analysis.json")
    if not analysis_path.exists() or "experts" not in record:
        print(
            f"verify_breakdown: needs a speculative record and {analysis_path.name} beside it",
            file=sys.stderr,
        )
        return 2
    analysis = json.loads(analysis_path.read_text())
    rows = breakdown(record, analysis, int(args.draft_mb * 1e6))
    summary = analysis["summary"]
    step_ms, kernels_ms = summary["gpu_step_ns_per_step"] / 1e6, summary["kernel_time_ns_per_step"] / 1e6
    print(
        f"GPU step {step_ms:.2f} ms per verify ({summary['steps']} profiled), kernel time {kernels_ms:.2f} ms"
    )
    distinct = record["experts"]["distinct_experts_mean"]
    print(
        f"ceiling {record['floor']['bandwidth_gbps']:.0f} GB/s; {distinct} distinct routed experts per layer"
    )
    print("| family | µs / verify | MB / verify | TB/s | µs at ceiling | excess µs |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        tbps = f"{row['tbps']:.2f}" if row["tbps"] else "—"
        print(
            f"| {row['family']} | {row['us']:.0f} | {row['mb']:.0f} | {tbps} | {row['ceiling_us']:.0f} "
            f"| {row['excess_us']:.0f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
