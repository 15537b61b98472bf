"""KDA chain verify: the plain reference is self-consistent, and both Triton paths match it."""

from __future__ import annotations

import pytest
import torch
from bubblescope.kernels.kda_verify import KDAVerifyInputError, kda_verify, kda_verify_naive
from bubblescope.kernels.kda_verify.naive import delta_rule_verify

from tests.kernels.helpers import assert_close


def make_inputs(batch, seq_len, heads, key_dim, taps=4, dtype=torch.float32, device="cpu", seed=0):
    gen = torch.Generator(device="cpu").manual_seed(seed)
    width = heads * key_dim

    def rand(*shape, std=1.0):
        return (torch.randn(*shape, generator=gen) * std).to(device)

    return dict(
        qkv_pre=rand(batch, seq_len, 3, width).to(dtype),
        f_pre=rand(batch, seq_len, width).to(dtype),
        b_pre=rand(batch, seq_len, heads).to(dtype),
        conv_weight=rand(3, width, taps, std=0.5).to(dtype),
        a_log=rand(heads, std=0.5),
        dt_bias=rand(width, std=0.5),
        initial_state=rand(batch, heads, key_dim, key_dim, std=0.3),
        initial_conv=rand(batch, 3, width, taps - 1).to(dtype),
    )


def test_verify_equals_token_by_token_composition() -> None:
    """Verifying T tokens at once == T single-token verifies chained through the committed state."""
    inputs = {name: t.double() for name, t in make_inputs(2, 5, 3, 6).items()}
    out_all, states_all, windows_all = kda_verify_naive(**inputs)
    state, conv = inputs["initial_state"], inputs["initial_conv"]
    for step in range(5):
        single = dict(
            inputs,
            qkv_pre=inputs["qkv_pre"][:, step : step + 1],
            f_pre=inputs["f_pre"][:, step : step + 1],
            b_pre=inputs["b_pre"][:, step : step + 1],
            initial_state=state,
            initial_conv=conv,
        )
        out, states, windows = kda_verify_naive(**single)
        assert_close(f"o[{step}]", out[:, 0], out_all[:, step], 1e-12, 1e-12)
        assert_close(f"state[{step}]", states[:, 0], states_all[:, step], 1e-12, 1e-12)
        assert_close(f"window[{step}]", windows[:, 0], windows_all[:, step], 0, 0)
        state, conv = states[:, 0], windows[:, 0]
    # the window after the last token holds the last KW-1 pre-conv inputs
    assert_close("last window", windows_all[:, -1], inputs["qkv_pre"][:, -3:].permute(0, 2, 3, 1), 0, 0)


def test_delta_rule_matches_closed_form_one_step() -> None:
    """One step by hand: S1 = D S0 + k beta (v - (D S0)^T k)^T, o = S1^T q."""
    gen = torch.Generator().manual_seed(3)
    q, k, g = (torch.randn(1, 1, 1, 4, generator=gen, dtype=torch.float64) for _ in range(3))
    v = torch.randn(1, 1, 1, 5, generator=gen, dtype=torch.float64)
    beta = torch.rand(1, 1, 1, generator=gen, dtype=torch.float64)
    s0 = torch.randn(1, 1, 4, 5, generator=gen, dtype=torch.float64)
    decayed = g[0, 0, 0].exp()[:, None] * s0[0, 0]
    s1 = decayed + torch.outer(k[0, 0, 0], beta[0, 0, 0] * (v[0, 0, 0] - decayed.T @ k[0, 0, 0]))
    out, states = delta_rule_verify(q, k, v, g, beta, s0)
    assert_close("state", states[0, 0, 0], s1, 1e-12, 1e-12)
    assert_close("o", out[0, 0, 0], s1.T @ q[0, 0, 0], 1e-12, 1e-12)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize(
    ("batch", "seq_len", "heads", "key_dim"), [(1, 9, 2, 16), (2, 3, 3, 12), (1, 1, 2, 8)]
)
def test_triton_matches_naive(fused: bool, batch: int, seq_len: int, heads: int, key_dim: int) -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    inputs = make_inputs(batch, seq_len, heads, key_dim, device=device, seed=seq_len + heads)
    before = {name: tensor.clone() for name, tensor in inputs.items()}
    want = kda_verify_naive(**inputs)
    width = heads * key_dim
    out = torch.full((batch, seq_len, heads, key_dim), float("nan"), device=device)
    states = torch.full((batch, seq_len, heads, key_dim, key_dim), float("nan"), device=device)
    windows = torch.full((batch, seq_len, 3, width, 3), float("nan"), device=device)
    got = kda_verify(
        **inputs, fused=fused, backend="triton", out=out, states_out=states, windows_out=windows, block_v=8
    )
    for name, got_t, want_t in zip(("o", "states", "windows"), got, want, strict=True):
        assert_close(name, got_t, want_t, 2e-5, 2e-4)
    for name, tensor in inputs.items():
        assert torch.equal(tensor, before[name]), f"verify modified its input {name}"


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "unfused"])
def test_final_only_mode_in_place(fused: bool) -> None:
    """keep_all=False writes only the last state/window; the state may be updated in place."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    inputs = make_inputs(1, 5, 2, 8, device=device, seed=11)
    _, want_states, want_windows = kda_verify_naive(**inputs)
    state = inputs["initial_state"].clone()
    windows = torch.full((1, 1, 3, 16, 3), float("nan"), device=device)
    kda_verify(
        **dict(inputs, initial_state=state),
        fused=fused,
        backend="triton",
        keep_all=False,
        states_out=state.view(1, 1, 2, 8, 8),
        windows_out=windows,
    )
    assert_close("final state", state, want_states[:, -1], 2e-5, 2e-4)
    assert_close("final window", windows[:, 0], want_windows[:, -1], 0, 0)


def test_triton_reads_strided_projections() -> None:
    """qkv_pre and f_pre sliced from one fused projection output (non-contiguous) work as is."""
    inputs = make_inputs(1, 4, 2, 8, device="cuda" if torch.cuda.is_available() else "cpu", seed=5)
    width = 16
    # [B, T, 4W]: q, k, v, f side by side, as a fused projection would produce them
    packed = torch.cat([inputs["qkv_pre"].reshape(1, 4, 3 * width), inputs["f_pre"]], dim=-1)
    strided = dict(
        inputs, qkv_pre=packed[..., : 3 * width].view(1, 4, 3, width), f_pre=packed[..., 3 * width :]
    )
    assert not strided["f_pre"].is_contiguous()
    want = kda_verify_naive(**inputs)
    got = kda_verify(**strided, fused=True, backend="triton")
    for name, got_t, want_t in zip(("o", "states", "windows"), got, want, strict=True):
        assert_close(name, got_t, want_t, 2e-5, 2e-4)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (dict(b_pre=torch.zeros(1, 2, 5)), "does not split"),
        (dict(a_log=torch.zeros(3)), "A_log"),
        (dict(initial_conv=torch.zeros(1, 3, 16, 2)), "initial_conv"),
        (dict(qkv_pre=torch.zeros(1, 2, 16)), "qkv_pre"),
    ],
)
def test_bad_inputs_raise_one_line(change: dict, message: str) -> None:
    inputs = dict(make_inputs(1, 2, 2, 8), **change)
    with pytest.raises(KDAVerifyInputError, match=message):
        kda_verify(**inputs, backend="torch")


@pytest.mark.gpu
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("seq_len", [1, 4, 9])
def test_real_shapes_on_gpu(fused: bool, seq_len: int) -> None:
    """Flash shapes: H=32, K=V=128, bf16 activations, fp32 state; PDL on."""
    inputs = make_inputs(1, seq_len, 32, 128, dtype=torch.bfloat16, device="cuda", seed=seq_len)
    want = kda_verify_naive(**inputs)
    got = kda_verify(**inputs, fused=fused, use_pdl=True)
    torch.cuda.synchronize()
    assert_close("o", got[0], want[0], 2e-2, 2e-2)
    assert_close("states", got[1], want[1], 1e-4, 1e-3)
    assert_close("windows", got[2], want[2], 0, 0)
