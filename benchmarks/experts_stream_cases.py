"""bench_routing.py's cases for issue 27's experts question: how should the decode experts launch stream
the gathered expert weights?

One layer at e256 shapes on today's fastest decode configuration (fast_topk, early_shared,
routing_in_experts), same weights and tokens as the "route sites" cases, so the ratios are same-run
ratios; only the experts launch differs:
- `deep_experts` as the decoder runs it (tiles in pairs in registers, 64-row I-slice, 8 warps);
- `tma_experts` (kernels/moe/tma_kernel.py): tiles by TMA copies into shared memory, Triton's pipeliner
  keeping STAGES - 1 in flight, products elementwise in registers ("fma") or on tensor cores straight
  from shared memory ("dot"); I-slices of 64 rows (108 programs) or 32 (216 programs: all 132 SMs); the
  token's row by TMA with the weights, or by plain loads in the loop.
Every case is checked against moe_naive / route_naive first (routing_site_cases.case_layer).
"""

from __future__ import annotations

from collections.abc import Callable

from bubblescope.kernels.moe import FusedMoEConfig
from routing_site_cases import E256_SHAPE, case_layer

# (label, tma, dot, stages, block_i, warps): today's launch first, then the candidates; the token's row
# comes by TMA too (tma_x) but in the last one, which measures what that saves.
CANDIDATES = (
    ("deep_experts pairs bi64 w8 (today)", False, False, 0, 64, 8),
    ("tma dot s4 bi64 w4", True, True, 4, 64, 4),
    ("tma fma s4 bi64 w8", True, False, 4, 64, 8),
    ("tma fma s4 bi32 w4", True, False, 4, 32, 4),
    ("tma dot s6 bi64 w4", True, True, 6, 64, 4),
    ("tma dot s4 bi32 w4", True, True, 4, 32, 4),
    ("tma fma s6 bi32 w4", True, False, 6, 32, 4),
    ("tma dot s4 bi64 w4, x by plain loads", True, True, 4, 64, 4),
)


def stream_config(
    shape: tuple[int, int, int], label: str, tma: bool, dot: bool, stages: int, block_i: int, warps: int
) -> FusedMoEConfig:
    """The decode layer's switches with this experts launch; tiny tiles at the dry-run shape."""
    common = dict(
        fast_topk=True,
        early_shared=True,
        deep_experts=True,
        routing_site="experts",
        tma_experts=tma,
        tma_dot=dot,
        tma_stages=stages or 4,
        tma_x="plain loads" not in label,
    )
    if shape == E256_SHAPE:
        # warps: the experts launch's (the router launch keeps the decode step's 8).
        warp_knob = dict(tma_num_warps=warps) if tma else dict(num_warps=warps)
        return FusedMoEConfig(**common, deep_block_i=block_i, tma_block_i=block_i, **warp_knob)
    return FusedMoEConfig(
        **common, router_block_n=16, deep_block_i=16, tma_block_i=16, block_d=32, block_dout=32, num_warps=4
    )


def experts_stream_cases(shape: tuple[int, int, int], device: str) -> dict[str, Callable[[], dict]]:
    """Name -> case builder, names starting "experts stream <tag>" (bench_routing --only selects them)."""
    tag = "e256" if shape == E256_SHAPE else "tiny"
    cases: dict[str, Callable[[], dict]] = {}
    for label, *knobs in CANDIDATES:
        config = stream_config(shape, label, *knobs)
        cases[f"experts stream {tag} {label}"] = lambda c=config: case_layer(shape, device, "experts", c)
    return cases
