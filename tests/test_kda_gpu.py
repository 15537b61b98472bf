"""KDA on a CUDA device at real head sizes (skipped without CUDA)."""

from __future__ import annotations

import pytest
import torch
from bubblescope.kernels.kda import chunk_kda, recurrent_kda
from bubblescope.reference_model.config import LING3_TINY
from bubblescope.reference_model.kda import KDAAttention, KDAState

pytestmark = pytest.mark.gpu


def test_chunk_equals_recurrent_flash_heads_on_cuda() -> None:
    gen = torch.Generator(device="cuda").manual_seed(0)
    batch, seq_len, heads, head_dim = 1, 200, 32, 128
    shape = (batch, seq_len, heads, head_dim)
    q = torch.nn.functional.normalize(torch.randn(shape, generator=gen, device="cuda"), dim=-1)
    k = torch.nn.functional.normalize(torch.randn(shape, generator=gen, device="cuda"), dim=-1)
    v = torch.randn(shape, generator=gen, device="cuda")
    g = -5.0 * torch.rand(shape, generator=gen, device="cuda")
    beta = torch.rand(batch, seq_len, heads, generator=gen, device="cuda")
    state = torch.randn(batch, heads, head_dim, head_dim, generator=gen, device="cuda")
    inputs = [x.double() for x in (q, k, v, g, beta)]
    want_o, want_state = recurrent_kda(*inputs, initial_state=state.double(), output_final_state=True)
    got_o, got_state = chunk_kda(q, k, v, g, beta, initial_state=state, output_final_state=True)
    o_diff = (got_o.double() - want_o).abs().max().item()
    state_diff = (got_state.double() - want_state).abs().max().item()
    assert o_diff < 1e-3 and state_diff < 1e-3, (
        f"fp32 chunked vs fp64 recurrent: o {o_diff:.3e}, state {state_diff:.3e}"
    )


def test_bf16_layer_on_cuda_prefill_then_decode() -> None:
    """Real Tiny widths in bf16: parameters are filled on the device, gate parameters stay fp32, and a
    prefill (chunked path) followed by decode steps tracks the same layer run in fp64 on the GPU."""
    layer = KDAAttention(LING3_TINY, layer_index=0).to(device="cuda", dtype=torch.bfloat16)
    layer.reset_parameters(torch.Generator(device="cuda").manual_seed(1))
    assert all(p.device.type == "cuda" for p in layer.parameters())
    assert layer.A_log.dtype == torch.float32 and layer.dt_bias.dtype == torch.float32
    reference = KDAAttention(LING3_TINY, layer_index=0).to(device="cuda", dtype=torch.float64)
    reference.load_state_dict(layer.state_dict())
    gen = torch.Generator(device="cuda").manual_seed(2)
    hidden = torch.randn(1, 100, LING3_TINY.hidden_size, generator=gen, device="cuda", dtype=torch.float64)
    state = KDAState.zeros(LING3_TINY, 1, "cuda", torch.bfloat16)
    ref_state = KDAState.zeros(LING3_TINY, 1, "cuda", torch.float64)
    outputs = [layer(hidden[:, :90].bfloat16(), state)]
    ref_outputs = [reference(hidden[:, :90], ref_state)]
    for t in range(90, 100):
        outputs.append(layer(hidden[:, t : t + 1].bfloat16(), state))
        ref_outputs.append(reference(hidden[:, t : t + 1], ref_state))
    got, want = torch.cat(outputs, dim=1).double(), torch.cat(ref_outputs, dim=1)
    rel = ((got - want).norm() / want.norm()).item()
    assert rel < 0.05, f"bf16 vs fp64 relative error {rel:.3e}"
