"""KDA layer: whole-sequence vs token-by-token, chained prefills, pieces vs their formulas, parameters."""

from __future__ import annotations

import math

import pytest
import torch
from bubblescope.kernels.kda import KDAInputError, chunk_kda
from bubblescope.reference_model import kda as kda_module
from bubblescope.reference_model.config import DEBUG, LING3_FLASH
from bubblescope.reference_model.kda import (
    RECURRENT_MAX_TOKENS,
    KDAAttention,
    KDAState,
    KDAStateError,
    gated_rms_norm,
    kda_gate,
    l2_normalize,
    short_conv,
)

F64 = torch.float64


def make_layer(seed: int = 0, dtype: torch.dtype = F64) -> KDAAttention:
    layer = KDAAttention(DEBUG, layer_index=1).to(dtype)
    layer.reset_parameters(torch.Generator().manual_seed(seed))
    return layer


def random_hidden(batch: int, seq_len: int, seed: int, dtype: torch.dtype = F64) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(batch, seq_len, DEBUG.hidden_size, generator=gen, dtype=F64).to(dtype)


def describe(got: torch.Tensor, want: torch.Tensor) -> str:
    abs_diff = (got.double() - want.double()).abs().max().item()
    return f"max abs diff {abs_diff:.3e}, rel {abs_diff / max(want.double().abs().max().item(), 1e-30):.3e}"


def assert_states_equal(got: KDAState, want: KDAState, atol: float = 1e-10) -> None:
    assert torch.allclose(got.recurrent, want.recurrent, atol=atol, rtol=0), describe(
        got.recurrent, want.recurrent
    )
    assert torch.allclose(got.conv, want.conv, atol=atol, rtol=0), describe(got.conv, want.conv)


@pytest.mark.parametrize("seq_len", [5, RECURRENT_MAX_TOKENS + 6])
def test_whole_sequence_equals_token_by_token(seq_len: int) -> None:
    """Covers the recurrent (T <= 64) and chunked (T > 64) paths, the conv state and the recurrent state."""
    layer = make_layer()
    hidden = random_hidden(2, seq_len, seed=seq_len)
    whole_state = KDAState.zeros(DEBUG, 2, "cpu", F64)
    whole = layer(hidden, whole_state)
    step_state = KDAState.zeros(DEBUG, 2, "cpu", F64)
    steps = torch.cat([layer(hidden[:, t : t + 1], step_state) for t in range(seq_len)], dim=1)
    assert torch.allclose(whole, steps, atol=1e-10, rtol=0), describe(whole, steps)
    assert_states_equal(whole_state, step_state)
    assert whole.abs().max() > 1e-3, "layer output is suspiciously close to zero"


@pytest.mark.parametrize("first_len", [2, 40])
def test_two_prefills_equal_one(first_len: int) -> None:
    """first_len = 2 is shorter than the conv's 3 history taps, so part of the old conv state survives."""
    layer = make_layer(seed=1)
    hidden = random_hidden(1, first_len + 70, seed=5)
    whole_state = KDAState.zeros(DEBUG, 1, "cpu", F64)
    whole = layer(hidden, whole_state)
    split_state = KDAState.zeros(DEBUG, 1, "cpu", F64)
    parts = [layer(hidden[:, :first_len], split_state), layer(hidden[:, first_len:], split_state)]
    split = torch.cat(parts, dim=1)
    assert torch.allclose(whole, split, atol=1e-10, rtol=0), describe(whole, split)
    assert_states_equal(split_state, whole_state)


def test_no_state_starts_from_zeros() -> None:
    layer = make_layer(seed=2)
    hidden = random_hidden(1, 9, seed=2)
    assert torch.equal(layer(hidden), layer(hidden, KDAState.zeros(DEBUG, 1, "cpu", F64)))


def test_conv_state_holds_last_pre_conv_inputs() -> None:
    layer = make_layer(seed=3)
    hidden = random_hidden(1, 6, seed=3)
    state = KDAState.zeros(DEBUG, 1, "cpu", F64)
    layer(hidden, state)
    taps = DEBUG.short_conv_kernel_size - 1
    for slot, proj in enumerate((layer.q_proj, layer.k_proj, layer.v_proj)):
        # [1, W, taps], oldest first
        want = proj(hidden[:, -taps:]).transpose(1, 2)
        assert torch.allclose(state.conv[:, slot], want, atol=1e-12), f"conv slot {slot}"


def test_short_conv_formula() -> None:
    gen = torch.Generator().manual_seed(4)
    width, taps = 3, 3
    x = torch.randn(1, 2, width, generator=gen, dtype=F64)
    weight = torch.randn(width, 1, taps + 1, generator=gen, dtype=F64)
    conv_state = torch.randn(1, width, taps, generator=gen, dtype=F64)
    y, new_state = short_conv(x, weight, conv_state)
    history = torch.cat([conv_state, x.transpose(1, 2)], dim=-1)[0]
    for t in range(2):
        for c in range(width):
            mixed = sum(weight[c, 0, j] * history[c, t + j] for j in range(taps + 1))
            assert torch.isclose(y[0, t, c], torch.nn.functional.silu(mixed), atol=1e-12)
    assert torch.equal(new_state[0], history[:, -taps:])


def test_gate_formula_and_range() -> None:
    layer = make_layer(seed=5)
    f = layer.f_proj(random_hidden(2, 50, seed=5))
    g = kda_gate(f, layer.A_log, layer.dt_bias, DEBUG.kda_lower_bound)
    assert g.shape == (2, 50, DEBUG.num_attention_heads, DEBUG.head_dim)
    assert (g > DEBUG.kda_lower_bound).all() and (g < 0).all(), (g.min().item(), g.max().item())
    heads = DEBUG.num_attention_heads
    rate = layer.A_log.exp().repeat_interleave(DEBUG.head_dim)
    want = DEBUG.kda_lower_bound * torch.sigmoid(rate * (f + layer.dt_bias))
    assert torch.allclose(g.reshape(2, 50, -1), want, atol=1e-12)
    # Realistic spread from the documented init: long-memory channels (decay > 0.99) and fast ones (< 0.5).
    decay = g.exp()
    assert (decay > 0.99).any() and (decay < 0.5).any(), decay.quantile(torch.tensor([0.05, 0.95], dtype=F64))
    assert heads == layer.A_log.numel()


def test_l2_normalize_puts_eps_inside_sqrt() -> None:
    x = torch.tensor([[3.0, 4.0], [0.0, 0.0]], dtype=F64)
    got = l2_normalize(x, eps=1.0)
    assert torch.allclose(got, torch.tensor([[3.0, 4.0], [0.0, 0.0]], dtype=F64) / math.sqrt(26.0))
    assert torch.isfinite(l2_normalize(torch.zeros(2, 4))).all()


def test_gated_rms_norm_formula() -> None:
    o = torch.tensor([[1.0, -3.0]], dtype=F64)
    gate = torch.tensor([[0.0, 2.0]], dtype=F64)
    weight = torch.tensor([2.0, 0.5], dtype=F64)
    rms = math.sqrt((1.0 + 9.0) / 2.0 + 0.1)
    want = torch.tensor([[2.0 * 1.0 / rms * 0.5, 0.5 * -3.0 / rms / (1.0 + math.exp(-2.0))]], dtype=F64)
    assert torch.allclose(gated_rms_norm(o, gate, weight, eps=0.1), want, atol=1e-12)


def test_parameter_names_and_shapes_match_checkpoint() -> None:
    with torch.device("meta"):
        layer = KDAAttention(LING3_FLASH, layer_index=0)
    shapes = {name: tuple(p.shape) for name, p in layer.state_dict().items()}
    assert shapes == {
        "q_proj.weight": (4096, 2560),
        "k_proj.weight": (4096, 2560),
        "v_proj.weight": (4096, 2560),
        "q_conv1d.weight": (4096, 1, 4),
        "k_conv1d.weight": (4096, 1, 4),
        "v_conv1d.weight": (4096, 1, 4),
        "f_proj.weight": (4096, 2560),
        "b_proj.weight": (32, 2560),
        "g_proj.weight": (4096, 2560),
        "A_log": (32,),
        "dt_bias": (4096,),
        "o_norm.weight": (128,),
        "o_proj.weight": (2560, 4096),
    }
    assert sum(p.numel() for p in layer.parameters()) == 63_049_888


def test_bf16_model_keeps_gate_parameters_fp32() -> None:
    layer = make_layer(seed=6, dtype=torch.float32)
    a_log, dt_bias = layer.A_log.detach().clone(), layer.dt_bias.detach().clone()
    layer.to(torch.bfloat16)
    assert layer.q_proj.weight.dtype == torch.bfloat16
    assert layer.A_log.dtype == torch.float32 and layer.dt_bias.dtype == torch.float32
    assert torch.equal(layer.A_log, a_log) and torch.equal(layer.dt_bias, dt_bias)


def test_bf16_forward_tracks_fp64() -> None:
    layer = make_layer(seed=7, dtype=torch.float32)
    reference = KDAAttention(DEBUG, layer_index=1).to(F64)
    reference.load_state_dict(layer.state_dict())
    layer.to(torch.bfloat16)
    hidden = random_hidden(1, 70, seed=7)
    state = KDAState.zeros(DEBUG, 1, "cpu", torch.bfloat16)
    got = layer(hidden.to(torch.bfloat16), state)
    want = reference(hidden)
    assert got.dtype == torch.bfloat16 and state.recurrent.dtype == torch.float32
    rel = (got.double() - want).norm() / want.norm()
    assert rel < 0.05, f"bf16 vs fp64 relative error {rel:.3e}"


def test_reset_parameters_is_seeded_and_never_zero() -> None:
    first, again, other = make_layer(seed=8), make_layer(seed=8), make_layer(seed=9)
    for (name, p), q, r in zip(first.named_parameters(), again.parameters(), other.parameters(), strict=True):
        assert torch.equal(p, q), f"{name} differs for the same seed"
        assert not torch.equal(p, r), f"{name} ignores the generator"
        assert (p != 0).all(), f"{name} has zeros"
    assert ((first.A_log >= 0) & (first.A_log <= math.log(16.0))).all()
    assert (first.o_norm.weight - 1).abs().max() < 0.2
    assert first.o_proj.weight.std() < first.q_proj.weight.std()


def test_state_zeros_clone_copy() -> None:
    state = KDAState.zeros(DEBUG, 2, "cpu", torch.bfloat16)
    assert state.recurrent.shape == (2, 4, 16, 16) and state.recurrent.dtype == torch.float32
    assert state.conv.shape == (2, 3, 64, 3) and state.conv.dtype == torch.bfloat16
    make_layer(seed=10, dtype=torch.bfloat16)(random_hidden(2, 4, seed=10, dtype=torch.bfloat16), state)
    copy = state.clone()
    assert copy.recurrent.data_ptr() != state.recurrent.data_ptr()
    target = KDAState.zeros(DEBUG, 2, "cpu", torch.bfloat16)
    pointer = target.recurrent.data_ptr()
    target.copy_(copy)
    assert target.recurrent.data_ptr() == pointer
    assert torch.equal(target.recurrent, state.recurrent) and torch.equal(target.conv, state.conv)
    with pytest.raises(KDAStateError):
        target.copy_(KDAState.zeros(DEBUG, 1, "cpu", torch.bfloat16))


def test_wrong_state_shape_is_one_line_error() -> None:
    layer = make_layer()
    with pytest.raises(KDAStateError) as info:
        layer(random_hidden(2, 3, seed=0), KDAState.zeros(DEBUG, 1, "cpu", F64))
    assert "\n" not in str(info.value)


def test_wrong_hidden_shape_is_one_line_error() -> None:
    with pytest.raises(KDAInputError) as info:
        make_layer()(torch.zeros(2, 3, DEBUG.hidden_size + 1, dtype=F64))
    assert "\n" not in str(info.value)
    with pytest.raises(KDAInputError):
        make_layer()(torch.zeros(DEBUG.hidden_size, dtype=F64))


@pytest.mark.parametrize(
    "seq_len, chunked", [(RECURRENT_MAX_TOKENS, False), (RECURRENT_MAX_TOKENS + 1, True)]
)
def test_long_inputs_use_chunked_form(seq_len: int, chunked: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args[0].shape[1])
        return chunk_kda(*args, **kwargs)

    monkeypatch.setattr(kda_module, "chunk_kda", spy)
    make_layer()(random_hidden(1, seq_len, seed=0))
    assert calls == ([seq_len] if chunked else [])
