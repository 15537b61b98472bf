"""`verify_norm_kernel`: the verify window's residual adds + RMSNorms as add_rmsnorm launches.

The target pass with the switch must give the eager pass's normed final rows and captured residual
rows (DSpark's conditioning): fp32 model, both on the Triton verify kernels (interpreter on the CPU),
so the only difference is the order of the norm's reduction.
"""

from __future__ import annotations

import pytest
import torch
from bubblescope.kernels.kda_verify import triton_usable
from bubblescope.reference_model.config import get_preset
from bubblescope.reference_model.generate import new_cache
from bubblescope.reference_model.init import build_model
from bubblescope.reference_model.spec import target_verify
from bubblescope.reference_model.spec.kda_verify_layer import VerifyOptions
from bubblescope.reference_model.spec.target_verify import target_forward_at

from .helpers import PROMPT_LEN, max_abs_diff, random_ids

WINDOW = 2


def target_pass(model, kernel_norm: bool, capture: list[int]):
    device = model.model.word_embeddings.weight.device
    cache = new_cache(model, 32)
    model(random_ids(model.config.vocab_size, PROMPT_LEN, 0).to(device), cache)
    positions = torch.arange(PROMPT_LEN, PROMPT_LEN + WINDOW, device=device).view(1, WINDOW)
    tokens = random_ids(model.config.vocab_size, WINDOW, 1).to(device)
    options = VerifyOptions(staged_kda=True, fused_kda_verify=True, kernel_norm=kernel_norm)
    return target_forward_at(model, cache, tokens, positions, PROMPT_LEN + WINDOW, options, capture)


# fp32: only the reduction order differs (1e-5 of the rows' scale). bf16 (GPU only: the interpreter's
# bf16 dots are not trusted, see gemv/kernel.py): the kernel rounds once where eager rounds twice and
# normalises the unrounded sum, a few bf16 ulps (2**-8 relative each) per norm over 4 layers: 3e-2.
@pytest.mark.parametrize(
    ("dtype", "tolerance"),
    [(torch.float32, 1e-5), pytest.param(torch.bfloat16, 3e-2, marks=pytest.mark.gpu)],
    ids=["fp32", "bf16"],
)
def test_kernel_norms_give_the_eager_rows(monkeypatch: pytest.MonkeyPatch, dtype, tolerance) -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if not triton_usable(torch.device(device)) or (dtype == torch.bfloat16 and device != "cuda"):
        pytest.skip("needs CUDA (bf16) or TRITON_INTERPRET=1 (set by tests/spec/conftest.py without CUDA)")
    model = build_model(get_preset("debug"), device, seed=2, dtype=dtype)
    last = model.main_layers[-1].index
    capture = [0, last]
    launches = []
    real = target_verify.add_rmsnorm
    monkeypatch.setattr(target_verify, "add_rmsnorm", lambda *a, **k: launches.append(1) or real(*a, **k))
    want = target_pass(model, False, capture)
    assert not launches
    got = target_pass(model, True, capture)
    # Two per layer (input and post-attention norm, each with the add before it) and the final norm.
    assert len(launches) == 2 * len(model.main_layers) + 1
    assert got.final_hidden.shape == want.final_hidden.shape
    scale = want.final_hidden.abs().max().item()
    assert max_abs_diff(got.final_hidden, want.final_hidden) <= tolerance * scale
    assert sorted(got.captured) == sorted(want.captured) == capture
    for index in capture:
        diff = max_abs_diff(got.captured[index], want.captured[index])
        assert diff <= tolerance * want.captured[index].abs().max().item(), (
            f"captured layer {index}: {diff:.2e}"
        )
    # The bound can fail: rows 10 % off (a missing weight or residual add is O(1)) exceed it.
    assert max_abs_diff(got.final_hidden, want.final_hidden * 1.1) > tolerance * scale
