"""KDA math references: chunked vs recurrent, state chaining, a hand-derived case, input checks."""

from __future__ import annotations

import math

import pytest
import torch
from bubblescope.kernels.kda import KDAInputError, chunk_kda, recurrent_kda
from hypothesis import given, settings
from hypothesis import strategies as st

from bubblescope.errors import BubblescopeError


def random_inputs(
    batch: int,
    seq_len: int,
    heads: int,
    key_dim: int,
    value_dim: int,
    seed: int,
    dtype: torch.dtype = torch.float64,
) -> dict[str, torch.Tensor]:
    """Inputs shaped like the model feeds them: unit keys, log decays in (-5, 0), beta in (0, 1)."""
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    keys = randn(batch, seq_len, heads, key_dim)
    log_decay = -5.0 * torch.rand(batch, seq_len, heads, key_dim, generator=gen, dtype=torch.float64)
    return {
        "q": torch.nn.functional.normalize(randn(batch, seq_len, heads, key_dim), dim=-1).to(dtype),
        "k": torch.nn.functional.normalize(keys, dim=-1).to(dtype),
        "v": randn(batch, seq_len, heads, value_dim).to(dtype),
        "g": log_decay.to(dtype),
        "beta": torch.rand(batch, seq_len, heads, generator=gen, dtype=torch.float64).to(dtype),
        "initial_state": randn(batch, heads, key_dim, value_dim).to(dtype),
    }


def max_diff(got: torch.Tensor, want: torch.Tensor) -> str:
    abs_diff = (got.double() - want.double()).abs().max().item()
    rel = abs_diff / max(want.double().abs().max().item(), 1e-30)
    return f"max abs diff {abs_diff:.3e}, rel {rel:.3e}"


@pytest.mark.parametrize("seq_len", [1, 7, 63, 64, 65, 130])
@pytest.mark.parametrize("with_state", [False, True])
def test_chunk_equals_recurrent_fp64(seq_len: int, with_state: bool) -> None:
    inputs = random_inputs(2, seq_len, 3, 16, 12, seed=seq_len)
    if not with_state:
        inputs["initial_state"] = None
    want_o, want_state = recurrent_kda(**inputs, output_final_state=True)
    got_o, got_state = chunk_kda(**inputs, output_final_state=True)
    assert torch.allclose(got_o, want_o, atol=1e-10, rtol=0), max_diff(got_o, want_o)
    assert torch.allclose(got_state, want_state, atol=1e-10, rtol=0), max_diff(got_state, want_state)


@settings(max_examples=15, deadline=None)
@given(
    seq_len=st.integers(1, 40),
    chunk_size=st.integers(1, 17),
    heads=st.integers(1, 3),
    key_dim=st.integers(1, 9),
    value_dim=st.integers(1, 9),
    seed=st.integers(0, 2**16),
)
def test_chunk_equals_recurrent_any_shape(
    seq_len: int, chunk_size: int, heads: int, key_dim: int, value_dim: int, seed: int
) -> None:
    inputs = random_inputs(1, seq_len, heads, key_dim, value_dim, seed=seed)
    want_o, want_state = recurrent_kda(**inputs, output_final_state=True)
    got_o, got_state = chunk_kda(**inputs, output_final_state=True, chunk_size=chunk_size)
    assert torch.allclose(got_o, want_o, atol=1e-10, rtol=0), max_diff(got_o, want_o)
    assert torch.allclose(got_state, want_state, atol=1e-10, rtol=0), max_diff(got_state, want_state)


@pytest.mark.parametrize("kernel", [recurrent_kda, chunk_kda], ids=["recurrent", "chunked"])
def test_two_prefills_equal_one(kernel) -> None:  # type: ignore[no-untyped-def]
    first_len, second_len = 37, 70
    inputs = random_inputs(2, first_len + second_len, 2, 8, 8, seed=7)
    whole_o, whole_state = kernel(**inputs, output_final_state=True)
    head = {name: x[:, :first_len] if name != "initial_state" else x for name, x in inputs.items()}
    tail = {name: x[:, first_len:] for name, x in inputs.items() if name != "initial_state"}
    head_o, head_state = kernel(**head, output_final_state=True)
    tail_o, tail_state = kernel(**tail, initial_state=head_state, output_final_state=True)
    got_o = torch.cat([head_o, tail_o], dim=1)
    assert torch.allclose(got_o, whole_o, atol=1e-10, rtol=0), max_diff(got_o, whole_o)
    assert torch.allclose(tail_state, whole_state, atol=1e-10, rtol=0), max_diff(tail_state, whole_state)


def test_hand_derived_tiny_case() -> None:
    """H=1, K=V=2, T=2, scale 1, zero start; values worked out by hand below.

    t=1: no decay, k=(1,0), v=(2,3), beta=1/2: u = (1, 1.5), S = [[1, 1.5], [0, 0]], o = S^T (1,0) = (1, 1.5).
    t=2: decay row 0 by 1/2: S = [[0.5, 0.75], [0, 0]]; k=(0.6,0.8): S^T k = (0.3, 0.45);
         v=(1,-1), beta=1: u = (0.7, -1.45); S += k u^T = [[0.42, -0.87], [0.56, -1.16]]
         -> S = [[0.92, -0.12], [0.56, -1.16]]; q=(0,1): o = row 1 = (0.56, -1.16).
    """
    f64 = torch.float64
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=f64).view(1, 2, 1, 2)
    k = torch.tensor([[1.0, 0.0], [0.6, 0.8]], dtype=f64).view(1, 2, 1, 2)
    v = torch.tensor([[2.0, 3.0], [1.0, -1.0]], dtype=f64).view(1, 2, 1, 2)
    g = torch.tensor([[0.0, 0.0], [math.log(0.5), 0.0]], dtype=f64).view(1, 2, 1, 2)
    beta = torch.tensor([0.5, 1.0], dtype=f64).view(1, 2, 1)
    want_o = torch.tensor([[1.0, 1.5], [0.56, -1.16]], dtype=f64).view(1, 2, 1, 2)
    want_state = torch.tensor([[0.92, -0.12], [0.56, -1.16]], dtype=f64).view(1, 1, 2, 2)
    for kernel in (recurrent_kda, chunk_kda):
        o, state = kernel(q, k, v, g, beta, scale=1.0, output_final_state=True)
        assert torch.allclose(o, want_o, atol=1e-12), f"{kernel.__name__}: {o.flatten().tolist()}"
        assert torch.allclose(state, want_state, atol=1e-12), f"{kernel.__name__}: {state.flatten().tolist()}"
        # The default scale K^-1/2 multiplies q only: the output shrinks by 1/sqrt(2), the state does not.
        o_default, state_default = kernel(q, k, v, g, beta, output_final_state=True)
        assert torch.allclose(o_default, want_o / math.sqrt(2.0), atol=1e-12)
        assert torch.allclose(state_default, want_state, atol=1e-12)


def test_dtypes_and_optional_state() -> None:
    inputs = random_inputs(1, 5, 2, 4, 4, seed=3, dtype=torch.bfloat16)
    for kernel in (recurrent_kda, chunk_kda):
        o, state = kernel(**inputs)
        assert o.dtype == torch.bfloat16 and state is None
        o, state = kernel(**inputs, output_final_state=True)
        assert state is not None and state.dtype == torch.float32 and state.shape == (1, 2, 4, 4)


def test_full_decay_chunk_stays_finite_fp32() -> None:
    """The strongest decay the gate allows (-5 per token, e^-320 over a chunk) must not overflow in fp32."""
    inputs = random_inputs(1, 130, 2, 16, 16, seed=11, dtype=torch.float32)
    inputs["g"] = torch.full_like(inputs["g"], -5.0)
    want_o, want_state = recurrent_kda(**inputs, output_final_state=True)
    got_o, got_state = chunk_kda(**inputs, output_final_state=True)
    assert torch.isfinite(got_o).all() and torch.isfinite(got_state).all()
    assert torch.allclose(got_o, want_o, atol=1e-5), max_diff(got_o, want_o)
    assert torch.allclose(got_state, want_state, atol=1e-5), max_diff(got_state, want_state)


@pytest.mark.parametrize(
    "change",
    [
        {"k": torch.zeros(1, 4, 2, 3)},
        {"v": torch.zeros(1, 5, 2, 4)},
        {"beta": torch.zeros(1, 4)},
        {"initial_state": torch.zeros(1, 2, 4, 5)},
        {"q": torch.zeros(4, 2, 4)},
    ],
    ids=["k", "v", "beta", "state", "rank"],
)
def test_bad_shapes_raise_one_line_error(change: dict[str, torch.Tensor]) -> None:
    inputs = random_inputs(1, 4, 2, 4, 4, seed=0, dtype=torch.float32)
    inputs.update(change)
    for kernel in (recurrent_kda, chunk_kda):
        with pytest.raises(KDAInputError) as info:
            kernel(**inputs)
        assert isinstance(info.value, BubblescopeError) and "\n" not in str(info.value)


def test_bad_chunk_size() -> None:
    with pytest.raises(KDAInputError, match="chunk_size"):
        chunk_kda(**random_inputs(1, 4, 1, 2, 2, seed=0), chunk_size=0)
