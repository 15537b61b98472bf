"""The optimization switches of the reference workload (ARCHITECTURE §3): one frozen dataclass.

Off is what a stock engine runs; on is the optimization. A switch is applied by construction or module
swap, never by flipping another switch. Which switches a workload offers depends on what is built:
the eager reference path implements `bf16_gate` and `bf16_lm_head` (router / lm_head dtype).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields

from bubblescope.errors import ConfigError
from bubblescope.workload import SwitchInfo

SWITCH_INFO: list[SwitchInfo] = [
    SwitchInfo(
        "no_readback",
        "keep decode metadata on device and enqueue step k+1 before the host sees step k's token",
        "per-step host reads of sequence length / accepted count to build the next step's metadata",
        needs_gpu=True,
    ),
    SwitchInfo(
        "pdl",
        "Programmatic Dependent Launch: issue weight loads before the previous kernel finishes",
        "plain Triton launches that wait for the previous kernel to drain",
        needs_gpu=True,
    ),
    SwitchInfo(
        "fused_moe",
        "routing and expert compute (shared expert included) in the fewest launches",
        "separate gate GEMV, sigmoid, bias, grouped top-k, renormalise and expert launches",
        needs_gpu=True,
    ),
    SwitchInfo(
        "fast_topk",
        "grouped top-k routing on packed (score, position) keys: one integer max per chosen expert",
        "argmax of (value, index) pairs over flat [E] and [groups, E] blocks, two reductions per expert",
        needs_gpu=True,
    ),
    SwitchInfo(
        "early_shared",
        "fused MoE: the shared expert's gate/up + SwiGLU stream before the experts launch waits for routing",
        "every expert slot, the shared one too, waits for the router launch (its first tiles prefetched)",
        needs_gpu=True,
    ),
    SwitchInfo(
        "deep_experts",
        "fused MoE: each experts program keeps two weight tiles in flight instead of one",
        "each experts program streams its expert's I-slice with one tile prefetched",
        needs_gpu=True,
    ),
    SwitchInfo(
        "tma_experts",
        "fused MoE: the experts launch's weight tiles arrive by TMA bulk copies into shared memory, "
        "several in flight per program, and feed tensor-core dots from there",
        "each experts program loads its weight tiles into registers (two in flight with deep_experts)",
        needs_gpu=True,
    ),
    SwitchInfo(
        "fused_mla_glue",
        "MLA: W_UK into the query, and W_UV with the head gate into the output, as two Triton launches",
        "PyTorch ops around the MLA attention: cast + bmm before, bmm, sigmoid, multiply and casts after",
        needs_gpu=True,
    ),
    SwitchInfo(
        "norm_epilogue",
        "each residual add + RMSNorm done by the last program of the launch producing its input "
        "(attention output projections, dense FFN down, fused MoE experts); measured 0.13-0.18 ms per "
        "token slower on one H200 (RESULTS.md, issue 27 round 3)",
        "a separate add_rmsnorm launch after every block (85 a step on ling3-flash-e256)",
        needs_gpu=True,
    ),
    SwitchInfo(
        "routing_in_experts",
        "fused MoE: each experts program routes its own token from the router logits after its wait",
        "the router launch's last program (by ticket) routes, and the experts launch reads its ids back",
        needs_gpu=True,
    ),
    SwitchInfo(
        "kda_norm_in_oproj",
        "KDA decode stores gated, un-normed head rows and slice sums of squares; o_proj's GEMV scales each "
        "head's V-chunk by its rstd as it loads x (no workspace, no last-program norm in KDA); measured "
        "0.23 ms per token slower on one H200 (RESULTS.md, issue 27 round 4)",
        "KDA decode's last program per head (by ticket) reads the head's row back, norms, gates, stores it",
        needs_gpu=True,
    ),
    SwitchInfo(
        "expert_union",
        "speculative verify: each distinct routed expert streamed once for every window row that chose it",
        "one program per (row, slot): an expert chosen by k rows of the window is streamed k times",
        needs_gpu=True,
    ),
    SwitchInfo(
        "bf16_gate",
        "router gate GEMV in bf16 (fp32 accumulation)",
        "fp32 router weights and GEMV (HF's router_dtype fp32)",
        needs_gpu=False,
    ),
    SwitchInfo(
        "bf16_lm_head",
        "lm_head in bf16, logits returned in fp32",
        "fp32 lm_head weights and GEMV",
        needs_gpu=False,
    ),
    SwitchInfo(
        "staged_kda",
        "speculative verify writes each position's KDA state to scratch and commits only the accepted one",
        "checkpointing the whole KDA state and restoring/recomputing on rejection",
        needs_gpu=True,
    ),
    SwitchInfo(
        "fused_kda_verify",
        "KDA verify as one fused kernel per layer",
        "separate conv, gating and delta-rule launches during verify",
        needs_gpu=True,
    ),
    SwitchInfo(
        "verify_norm_kernel",
        "speculative verify: each residual add + RMSNorm of the window as one Triton launch",
        "the eager RMSNorm module (~8 PyTorch kernels per norm) and a separate residual add",
        needs_gpu=True,
    ),
    SwitchInfo(
        "verify_gated_norm",
        "speculative verify: KDA's per-head output norm and sigmoid gate as one Triton launch per layer",
        "the eager gated RMSNorm: ~11 PyTorch kernels per KDA layer (casts, pow, mean, rsqrt, sigmoid, ...)",
        needs_gpu=True,
    ),
    SwitchInfo(
        "verify_fused_in_proj",
        "speculative verify: KDA's six input projections as one GEMM over the packed in_proj weight",
        "six GEMMs per KDA layer (q, k, v, f, g, b projections of the window) and a stack",
        needs_gpu=True,
    ),
    SwitchInfo(
        "graph_metadata",
        "prepare decode metadata inside the captured CUDA graph",
        "eager metadata ops between graph replays",
        needs_gpu=True,
    ),
    SwitchInfo(
        "fast_allreduce",
        "one-shot all-reduce over peer memory (PyTorch symmetric memory, no NVLink multicast)",
        "NCCL all-reduce of each 5 KB hidden row (~18 us a call in a CUDA graph on two H200s, 84 a token)",
        needs_gpu=True,
    ),
]

# (first, second, why): pairs that cannot be on together. Empty today: every switch above composes
# with every other. A later switch that cannot adds its pair here; LingSwitches then refuses it.
INCOMPATIBLE_PAIRS: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True)
class LingSwitches:
    """One bool per switch; all False is the baseline."""

    no_readback: bool = False
    pdl: bool = False
    fused_moe: bool = False
    fast_topk: bool = False
    # Acts on the fused MoE launch only: with fused_moe off the step is unchanged.
    early_shared: bool = False
    # Acts on the fused MoE launch only, like early_shared; a verify window under expert_union keeps
    # the union launch.
    deep_experts: bool = False
    # Acts on the fused MoE experts launch (not a verify window's union launch), where the expert
    # weights' rows are 16-byte aligned (every preset's).
    tma_experts: bool = False
    # Acts on the fused MoE launch of one token only (a verify window keeps its routing launch).
    routing_in_experts: bool = False
    # Acts on the one-token fast step's MLA layers (the speculative verify keeps its own MLA path).
    fused_mla_glue: bool = False
    # Acts on the one-token fast step at TP=1 (an all-reduce sits between producer and norm at TP).
    norm_epilogue: bool = False
    # Acts on the one-token fast step's KDA layers (the speculative verify keeps kda_verify's norm).
    kda_norm_in_oproj: bool = False
    # Acts on a window of several rows (the speculative verify); a one-token step is unchanged.
    expert_union: bool = False
    bf16_gate: bool = False
    bf16_lm_head: bool = False
    staged_kda: bool = False
    fused_kda_verify: bool = False
    # Acts on the speculative verify window only.
    verify_norm_kernel: bool = False
    # Acts on the speculative verify window's KDA layers only.
    verify_gated_norm: bool = False
    verify_fused_in_proj: bool = False
    graph_metadata: bool = False
    # Only tensor-parallel workloads offer it (at TP=1 there is no all-reduce).
    fast_allreduce: bool = False

    def __post_init__(self) -> None:
        for first, second, why in INCOMPATIBLE_PAIRS:
            if getattr(self, first) and getattr(self, second):
                raise ConfigError(f"switches {first} and {second} cannot be on together: {why}")

    @classmethod
    def from_names(cls, names: Iterable[str]) -> LingSwitches:
        """Switches named on, the rest off.

        Raises:
            ConfigError: an unknown name (listing the valid ones) or an incompatible pair (naming both).
        """
        valid = [field.name for field in fields(cls)]
        chosen = set(names)
        unknown = sorted(chosen - set(valid))
        if unknown:
            raise ConfigError(f"unknown switch {', '.join(unknown)}; valid switches: {', '.join(valid)}")
        return cls(**{name: True for name in chosen})

    def enabled(self) -> frozenset[str]:
        """Names of the switches that are on."""
        return frozenset(field.name for field in fields(self) if getattr(self, field.name))


def require_implemented(enabled: Iterable[str], implemented: Iterable[str], implementer: str) -> None:
    """Refuse switches a workload does not implement, naming them and the ones it does.

    Args:
        enabled: the switch names asked for.
        implemented: the names this workload implements, in the order the message lists them.
        implementer: who refuses, as the message says it ("ling3's fast path", "ling3 at TP").

    Raises:
        ConfigError: some of `enabled` are not in `implemented`.
    """
    available = list(implemented)
    missing = sorted(set(enabled) - set(available))
    if missing:
        names, valid = ", ".join(missing), ", ".join(available)
        raise ConfigError(f"switch {names} is not implemented by {implementer}; available: {valid}")
