"""recurrent_kda against flash-linear-attention's naive recurrent KDA (skipped when fla is absent).

fla's naive module only needs torch and einops; it is loaded from its file so the test does not pay for
importing the whole fla package (transformers, Triton autotuners), which takes seconds.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
import torch
from bubblescope.kernels.kda import chunk_kda, recurrent_kda


def load_fla_naive() -> ModuleType:
    spec = importlib.util.find_spec("fla")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("flash-linear-attention (fla) is not installed")
    pytest.importorskip("einops")
    path = Path(next(iter(spec.submodule_search_locations))) / "ops" / "kda" / "naive.py"
    if not path.is_file():
        pytest.skip(f"this fla version has no naive KDA at {path}")
    module_spec = importlib.util.spec_from_file_location("fla_kda_naive_under_test", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    if not hasattr(module, "naive_recurrent_kda"):
        pytest.skip("fla.ops.kda.naive has no naive_recurrent_kda")
    return module


@pytest.mark.parametrize("seq_len", [1, 13, 70])
def test_matches_fla_naive_recurrent(seq_len: int) -> None:
    fla_naive = load_fla_naive()
    gen = torch.Generator().manual_seed(seq_len)
    batch, heads, key_dim, value_dim = 2, 3, 16, 8
    q = torch.nn.functional.normalize(torch.randn(batch, seq_len, heads, key_dim, generator=gen), dim=-1)
    k = torch.nn.functional.normalize(torch.randn(batch, seq_len, heads, key_dim, generator=gen), dim=-1)
    v = torch.randn(batch, seq_len, heads, value_dim, generator=gen)
    g = -5.0 * torch.rand(batch, seq_len, heads, key_dim, generator=gen)
    beta = torch.rand(batch, seq_len, heads, generator=gen)
    state = torch.randn(batch, heads, key_dim, value_dim, generator=gen)
    # fla's naive reference always computes in fp32, so compare in fp32.
    want_o, want_state = fla_naive.naive_recurrent_kda(
        q, k, v, g, beta, initial_state=state, output_final_state=True
    )
    for kernel in (recurrent_kda, chunk_kda):
        got_o, got_state = kernel(q, k, v, g, beta, initial_state=state, output_final_state=True)
        o_diff = (got_o - want_o).abs().max().item()
        state_diff = (got_state - want_state).abs().max().item()
        message = f"{kernel.__name__} vs fla: output max abs diff {o_diff:.3e}, state {state_diff:.3e}"
        assert o_diff < 1e-5 and state_diff < 1e-5, message
