"""Launcher and public entry point of the KDA block kernel (in_proj GEMV -> KDA decode -> o_proj GEMV)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import triton
from bubblescope.kernels._pdl import is_interpreting, launch_options, resolve_pdl
from bubblescope.kernels.gemv.checks import KernelInputError, check_shape
from bubblescope.kernels.gemv.ops import check_gemv_inputs, choose_config
from bubblescope.kernels.gemv.prefetch import prefetch_lines
from bubblescope.kernels.kda_block.kernel import kda_block_kernel
from bubblescope.kernels.kda_block.occupancy import resident_programs
from bubblescope.kernels.kda_decode.ops import check_kda_decode_inputs
from bubblescope.kernels.kda_decode.params import KDALayerState, KDALayerWeights, decode_block_sizes
from bubblescope.kernels.kda_decode.split_launch import shared_workspace

OP = "kda_block"
# One program's warps in every phase: the decoder's GEMV tiles and the split KDA kernel all use 4.
NUM_WARPS = 4


@dataclass(frozen=True)
class KDABlockConfig:
    """How the block runs.

    Attributes:
        persistent: one launch with grid barriers (GPU only); False: the same kernel as three launches
            (one per phase). None: one launch on a GPU, three in the CPU interpreter.
        v_splits: programs per KDA head in phase 2 (the decoder's 4 on Flash).
        programs: grid size; None = every program the GPU holds at once (persistent) or one per KDA
            work item (interpreter). A persistent grid larger than the GPU holds is refused.
        in_tiles, out_tiles: (BLOCK_N, BLOCK_K) of the in_proj and o_proj strips; None = the decode
            GEMV's own choice (`choose_config`), so the sums are those of the three-launch path.
        l2_prefetch: one launch only: before the first barrier each program asks L2 for every o_proj
            row it will stream after the second, so HBM stays busy through the barriers and phase 2.
        max_registers: ptxas register cap per thread (triton's `maxnreg`); None = the compiler's choice.
            The phases' peaks add up in one kernel (phase 2: ~145 on sm_90), and the grid is what fits.
    """

    persistent: bool | None = None
    v_splits: int = 4
    programs: int | None = None
    in_tiles: tuple[int, int] | None = None
    out_tiles: tuple[int, int] | None = None
    l2_prefetch: bool = True
    max_registers: int | None = None
    # Three launches only: which phases run (a benchmark's diagnostic: e.g. (1,) times the in_proj
    # strips on the persistent grid alone; anything but (1, 2, 3) leaves the block unfinished).
    phases: tuple[int, ...] = (1, 2, 3)


@dataclass
class KDABlockLaunchInfo:
    """What the last persistent launch of a kernel variant ran with (for benchmarks)."""

    programs: int = 0
    facts: dict[str, int] = field(default_factory=dict)


_BARRIERS: dict[str, torch.Tensor] = {}
_RESIDENT: dict[tuple, tuple[int, dict[str, int]]] = {}
LAST_LAUNCH = KDABlockLaunchInfo()


def barrier_counter(device: torch.device) -> torch.Tensor:
    """The zeroed int32 arrival counter every launch on `device` re-arms (allocate before graph capture)."""
    key = str(device)
    if key not in _BARRIERS:
        _BARRIERS[key] = torch.zeros(1, dtype=torch.int32, device=device)
    return _BARRIERS[key]


def strip_tiles(tiles: tuple[int, int] | None, rows: int, cols: int) -> tuple[int, int]:
    """(BLOCK_N, BLOCK_K): the given ones, the interpreter's few wide strips, or the GPU GEMV's choice."""
    if tiles is not None:
        return tiles
    if is_interpreting():
        return min(256, triton.next_power_of_2(rows)), min(1024, triton.next_power_of_2(cols))
    config = choose_config(1, rows, cols)
    return config.block_n, config.block_k


def launch_kda_block(
    x: torch.Tensor,
    in_proj: torch.Tensor,
    proj_views: dict[str, torch.Tensor],
    proj: torch.Tensor,
    weights: KDALayerWeights,
    state: KDALayerState,
    attn: torch.Tensor,
    o_proj: torch.Tensor,
    out: torch.Tensor,
    eps: float,
    pdl: bool,
    config: KDABlockConfig,
    persistent: bool,
) -> None:
    """Launch kda_block_kernel on validated inputs: PHASE 0 once, or phases 1, 2, 3 in turn."""
    _, heads, key_dim, value_dim = state.recurrent.shape
    v_slice = triton.cdiv(value_dim, config.v_splits)
    workspace = shared_workspace(1, heads, value_dim, x.device)
    in_n, in_k = strip_tiles(config.in_tiles, in_proj.shape[0], in_proj.shape[1])
    out_n, out_k = strip_tiles(config.out_tiles, o_proj.shape[0], o_proj.shape[1])
    args = (
        x, in_proj, proj, *(proj_views[name] for name in ("q", "k", "v", "f", "b", "gate")),
        weights.q_conv, weights.k_conv, weights.v_conv, weights.a_log, weights.dt_bias, weights.o_norm,
        state.q_conv, state.k_conv, state.v_conv, state.recurrent, attn, workspace.o, workspace.count,
        o_proj, out, barrier_counter(x.device), in_proj.shape[0], in_proj.shape[1], o_proj.shape[0],
        in_proj.stride(0), o_proj.stride(0), heads, key_dim, value_dim, v_slice, float(weights.lower_bound),
        key_dim**-0.5, eps,
    )  # fmt: skip
    constants = dict(
        NUM_V_SPLITS=config.v_splits,
        **decode_block_sizes(weights.q_conv.shape[1], key_dim, value_dim),
        BLOCK_VS=triton.next_power_of_2(v_slice),
        IN_BLOCK_N=in_n,
        IN_BLOCK_K=in_k,
        OUT_BLOCK_N=out_n,
        OUT_BLOCK_K=out_k,
        L2_PREFETCH=config.l2_prefetch,
        PREFETCH_LINES=prefetch_lines(NUM_WARPS),
        USE_PDL=pdl,
        num_warps=NUM_WARPS,
        **({"maxnreg": config.max_registers} if config.max_registers else {}),
    )
    items = heads * config.v_splits
    if not persistent:
        programs = config.programs or (
            items if is_interpreting() else resident_grid(args, constants, x.device, pdl)
        )
        check_programs(programs, items)
        for phase in config.phases:
            kda_block_kernel[(programs,)](*args, PHASE=phase, **constants, **launch_options(pdl))
        return
    resident = resident_grid(args, constants, x.device, pdl)
    programs = config.programs or resident
    check_programs(programs, items)
    if programs > resident:
        raise KernelInputError(f"{OP}: {programs} programs, but the GPU holds only {resident} at once")
    LAST_LAUNCH.programs, LAST_LAUNCH.facts = programs, _RESIDENT[resident_key(constants, x.device, pdl)][1]
    kda_block_kernel[(programs,)](*args, PHASE=0, **constants, **launch_options(pdl))


def check_programs(programs: int, items: int) -> None:
    if programs < items:
        raise KernelInputError(f"{OP}: the grid needs >= H * v_splits = {items} programs; got {programs}")


def resident_key(constants: dict, device: torch.device, pdl: bool) -> tuple:
    return (str(device), pdl, *sorted(constants.items()))


def resident_grid(args: tuple, constants: dict, device: torch.device, pdl: bool) -> int:
    """Programs of the PHASE 0 kernel the GPU holds at once (compiled once per variant, then cached;
    with the launch's own PDL option, so the real launch reuses this compile)."""
    key = resident_key(constants, device, pdl)
    if key not in _RESIDENT:
        compiled = kda_block_kernel.warmup(*args, PHASE=0, **constants, **launch_options(pdl), grid=(1,))
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        _RESIDENT[key] = resident_programs(compiled, NUM_WARPS, sms)
    return _RESIDENT[key][0]


def kda_block(
    x: torch.Tensor,
    in_proj: torch.Tensor,
    widths: tuple[int, ...],
    weights: KDALayerWeights,
    state: KDALayerState,
    o_proj: torch.Tensor,
    eps: float = 1e-6,
    use_pdl: bool = False,
    config: KDABlockConfig | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """One decode token through a KDA block: `o_proj(KDA(in_proj(x)))`, one launch on a GPU.

    Args:
        x: normed hidden `[1, D]` (batch 1).
        in_proj: `[5W + H, D]` fused rows [q | k | v | f | g | b] (the decoder's KDAPack.in_proj).
        widths: row counts of q, k, v, f, g, b inside in_proj (W = H*K = H*V).
        weights, state: the layer's KDA weights and state (state updated in place).
        o_proj: `[D_out, W]`.
        eps: L2-norm and output-RMSNorm epsilon (1e-6 for Ling).
        use_pdl: Programmatic Dependent Launch where supported (x is read after `gdc_wait`).
        config: KDABlockConfig; default one persistent launch on a GPU.
        out: optional `[1, D_out]` destination.
    Returns:
        `[1, D_out]` in x's dtype; the intermediate rows round to x's dtype as in the three launches.
    """
    config = config or KDABlockConfig()
    persistent = (not is_interpreting()) if config.persistent is None else config.persistent
    if persistent and (is_interpreting() or x.device.type != "cuda"):
        raise KernelInputError(f"{OP}: the one-launch kernel needs a GPU (its grid barrier would deadlock)")
    check_gemv_inputs(x, in_proj, OP)
    if x.shape[0] != 1:
        raise KernelInputError(f"{OP}: batch 1 only; x has {x.shape[0]} rows")
    if len(widths) != 6 or sum(widths) != in_proj.shape[0]:
        raise KernelInputError(
            f"{OP}: widths must be 6 row counts summing to {in_proj.shape[0]}; got {widths}"
        )
    # [1, 5W + H]: the kernel's column views of one row, as the decoder splits it.
    proj = torch.empty(1, in_proj.shape[0], dtype=x.dtype, device=x.device)
    q, k, v, f, g, b = proj.split(list(widths), dim=1)
    views = {"q": q, "k": k, "v": v, "f": f, "b": b, "gate": g}
    check_kda_decode_inputs(views, weights, state)
    attn = torch.empty(1, v.shape[1], dtype=x.dtype, device=x.device)
    check_gemv_inputs(attn, o_proj, OP)
    if not 1 <= config.v_splits <= state.recurrent.shape[3]:
        raise KernelInputError(f"{OP}: v_splits must be in 1..V; got {config.v_splits}")
    if out is None:
        out = torch.empty(1, o_proj.shape[0], dtype=x.dtype, device=x.device)
    check_shape("out", out, (1, o_proj.shape[0]), OP)
    if out.stride(1) != 1 or out.dtype != x.dtype:
        raise KernelInputError(f"{OP}: out must be contiguous {x.dtype}")
    pdl = resolve_pdl(use_pdl, x.device)
    launch_kda_block(x, in_proj, views, proj, weights, state, attn, o_proj, out, eps, pdl, config, persistent)
    return out
