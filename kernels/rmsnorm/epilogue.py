"""Residual add + RMSNorm in the epilogue of the launch that produces its input (`norm_epilogue`).

Why an epilogue: a decode step runs one add + RMSNorm after every block (85 `add_rmsnorm` launches per
step on ling3-flash-e256, 137 µs of it, RESULTS.md round 2). Doing it in the *consumers'* prologues lost
(+74 µs): every one of a consumer's ~512 programs redid the whole row's norm on its critical path. Here
it is done ONCE, by the producer's last program, the "last ticket" pattern of the fused MoE router
launch (kernels/moe/fused_kernel.py `router_route_kernel`): every program writes its share of the
block output y, `tl.debug_barrier()` (all of this program's threads have issued their writes), then takes
a ticket with an acq_rel atomic; the program that draws the last ticket has seen every other program's
writes, so it reads the whole y row, adds the residual and writes the residual and the normed row for
the next block, then re-arms the counter (0) for the next call or CUDA-graph replay. No program waits
for another, so nothing depends on the programs being co-resident.

PDL: the producer triggers its dependents early (right after its own `gdc_wait`), so the next kernel may
start while the last program is still norming. That is safe because the consumer reads the normed row
only after its own `gdc_wait`, and `griddepcontrol.wait` returns only once the whole prerequisite grid
has COMPLETED with its memory visible (kernels/_pdl.py), the last program's epilogue included. What a
consumer does before `gdc_wait` (weight prefetch; the early shared expert, which reads x, see
fused_kernel.early_shared_h) never touches rows this epilogue writes in the same launch pair.

Same math and roundings as `add_rmsnorm_kernel` (kernel.py): r = fp32(y) + fp32(residual), residual
stored in its dtype, rstd = 1 / sqrt(sum(r^2) / D + eps) from the fp32 r, normed = w * r * rstd stored
in the output dtype. Only sum(r^2)'s association differs (chunks, other warps), so the residual is
bit for bit and the normed row agrees to an fp32 rounding of rstd (a bf16 element one ulp off, rarely).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from bubblescope.kernels.gemv.checks import (
    FLOAT_DTYPES,
    KernelInputError,
    check_dtype,
    check_same_device,
    check_shape,
)

# As add_rmsnorm: D <= 16384 (the epilogue unrolls D / NORM_CHUNK chunks).
MAX_WIDTH = 16384
# Elements per chunk of the epilogue's row (2560 = 5 chunks): registers, see last_program_add_rmsnorm.
NORM_CHUNK = 512


@dataclass(frozen=True)
class NormEpilogue:
    """Where a producing launch's last program puts the add + RMSNorm of its `[M, D]` output y.

    Attributes:
        residual: `[M, D]` running hidden state, updated in place (residual += y).
        weight: `[D]` the next block's norm weight.
        out: `[M, D]` destination of the normed rows (the next block's input).
        counter: `[1]` int32 ticket counter, 0 between launches (the last program re-arms it); one per
            call site, allocated once, so a CUDA graph replays with it.
        eps: added to mean(r^2).
    """

    residual: torch.Tensor
    weight: torch.Tensor
    out: torch.Tensor
    counter: torch.Tensor
    eps: float

    def chunks(self) -> tuple[int, int]:
        """(CHUNK, CHUNKS): the row in CHUNKS chunks of CHUNK elements (last_program_add_rmsnorm)."""
        width = self.weight.shape[0]
        chunk = min(NORM_CHUNK, triton.next_power_of_2(width))
        return chunk, triton.cdiv(width, chunk)


def check_norm_epilogue(epilogue: NormEpilogue, rows: int, width: int, device: torch.device, op: str) -> None:
    """Raise KernelInputError unless the epilogue's tensors fit a `[rows, width]` output on `device`."""
    if not 1 <= width <= MAX_WIDTH:
        raise KernelInputError(f"{op}: the norm epilogue needs 1 <= D <= {MAX_WIDTH}; got {width}")
    check_shape("epilogue.residual", epilogue.residual, (rows, width), op)
    check_shape("epilogue.out", epilogue.out, (rows, width), op)
    check_shape("epilogue.weight", epilogue.weight, (width,), op)
    check_shape("epilogue.counter", epilogue.counter, (1,), op)
    check_dtype("epilogue.counter", epilogue.counter, (torch.int32,), op)
    for name in ("residual", "weight", "out"):
        check_dtype(f"epilogue.{name}", getattr(epilogue, name), FLOAT_DTYPES, op)
    for name in ("residual", "out"):
        if not getattr(epilogue, name).is_contiguous():
            raise KernelInputError(f"{op}: epilogue.{name} must be contiguous")
    check_same_device(
        op,
        residual=epilogue.residual,
        weight=epilogue.weight,
        out=epilogue.out,
        counter=epilogue.counter,
    )
    if epilogue.residual.device != device:
        raise KernelInputError(
            f"{op}: the epilogue's tensors are on {epilogue.residual.device}, not {device}"
        )


@triton.jit
def last_program_add_rmsnorm(
    p_y,
    p_res,
    p_w,
    p_out,
    p_counter,
    num_programs,
    M,
    D,
    eps,
    CHUNK: tl.constexpr,
    CHUNKS: tl.constexpr,
):
    """Call after this program's last write of y `[M, D]` (row stride D). The program drawing the last
    of `num_programs` tickets does, for every row, r = y + res (fp32), res = r, out = w * r * rstd.

    The row goes in CHUNKS unrolled chunks of CHUNK (NormEpilogue.chunks), twice: sum(r^2), then r again
    (y and res re-read from L2) for the stores. A whole-row block instead holds several [D] fp32 vectors
    in registers at once, and a kernel's registers count for all its programs: offline sm_90 compile
    (benchmarks/compile_norm_epilogue.py), the 2560-row decode GEMV at 4 warps has 56 registers, 140 with
    a whole-row epilogue (3 programs per SM where its 640-program grid needs 5 for one wave), 87 in
    512-element chunks (5 per SM); the experts kernels keep theirs (255 deep, 151 fused).
    """
    # Every thread's writes of y must be issued before this program's ticket is taken.
    tl.debug_barrier()
    ticket = tl.atomic_add(p_counter, 1, sem="acq_rel")
    if ticket == num_programs - 1:
        for i_m in range(0, M):
            b_squares = tl.zeros((CHUNK,), dtype=tl.float32)
            for i_c in tl.static_range(CHUNKS):
                b_r = chunk_sum(p_y, p_res, i_m, i_c, D, CHUNK)
                b_squares += b_r * b_r
            rstd = 1.0 / tl.sqrt(tl.sum(b_squares, axis=0) / D + eps)
            for i_c in tl.static_range(CHUNKS):
                b_r = chunk_sum(p_y, p_res, i_m, i_c, D, CHUNK)
                o_d = i_c * CHUNK + tl.arange(0, CHUNK)
                m_d = o_d < D
                b_w = tl.load(p_w + o_d, mask=m_d, other=0.0).to(tl.float32)
                tl.store(p_res + i_m * D + o_d, b_r.to(p_res.dtype.element_ty), mask=m_d)
                tl.store(p_out + i_m * D + o_d, (b_w * b_r * rstd).to(p_out.dtype.element_ty), mask=m_d)
        # Re-arm for the next call (or the next CUDA-graph replay).
        tl.atomic_xchg(p_counter, 0, sem="relaxed")


@triton.jit
def chunk_sum(p_y, p_res, i_m, i_c, D, CHUNK: tl.constexpr):
    """fp32 y + res of chunk i_c of row i_m, 0 past D."""
    o_d = i_c * CHUNK + tl.arange(0, CHUNK)
    m_d = o_d < D
    # .cg: other SMs wrote y (L2); never serve it from this SM's L1.
    b_r = tl.load(p_y + i_m * D + o_d, mask=m_d, other=0.0, cache_modifier=".cg").to(tl.float32)
    return b_r + tl.load(p_res + i_m * D + o_d, mask=m_d, other=0.0).to(tl.float32)
