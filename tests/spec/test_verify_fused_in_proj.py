"""`verify_fused_in_proj`: each KDA layer's six input projections of the verify window as ONE GEMM over
the fast path's packed in_proj weight (views of it are the module's weights: no second copy).

The target pass with the switch must give the pass without it (fp32 on the CPU: the same products,
only cuBLAS/BLAS blocking may differ; bf16 on the GPU: one GEMM's accumulation order vs six).
"""

from __future__ import annotations

import pytest
import torch
from bubblescope.reference_model.config import get_preset
from bubblescope.reference_model.fast.packing import PACKED_ATTR
from bubblescope.reference_model.generate import new_cache
from bubblescope.reference_model.init import build_model
from bubblescope.reference_model.spec.kda_verify_layer import KDA_PROJECTIONS, VerifyOptions, kda_in_proj
from bubblescope.reference_model.spec.target_verify import target_forward_at

from .helpers import PROMPT_LEN, max_abs_diff, random_ids

WINDOW = 4


def target_pass(model, fused: bool, capture: list[int]):
    device = model.model.word_embeddings.weight.device
    cache = new_cache(model, 32)
    model(random_ids(model.config.vocab_size, PROMPT_LEN, 0).to(device), cache)
    positions = torch.arange(PROMPT_LEN, PROMPT_LEN + WINDOW, device=device).view(1, WINDOW)
    tokens = random_ids(model.config.vocab_size, WINDOW, 1).to(device)
    # backend "torch" on the CPU (no interpreter needed: the switch changes only the projections).
    backend = "auto" if device.type == "cuda" else "torch"
    options = VerifyOptions(staged_kda=True, fused_kda_verify=True, backend=backend, fused_in_proj=fused)
    return target_forward_at(model, cache, tokens, positions, PROMPT_LEN + WINDOW, options, capture)


@pytest.mark.parametrize(
    ("dtype", "tolerance"),
    [(torch.float32, 1e-5), pytest.param(torch.bfloat16, 3e-2, marks=pytest.mark.gpu)],
    ids=["fp32", "bf16"],
)
def test_one_in_proj_gemm_gives_the_six(dtype, tolerance) -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = build_model(get_preset("debug"), device, seed=4, dtype=dtype)
    last = model.main_layers[-1].index
    capture = [0, last]
    want = target_pass(model, False, capture)
    got = target_pass(model, True, capture)
    kda = [layer.attention for layer in model.main_layers if not layer.is_mla]
    assert kda and all(getattr(attn, PACKED_ATTR, None) is not None for attn in kda)
    scale = want.final_hidden.abs().max().item()
    assert max_abs_diff(got.final_hidden, want.final_hidden) <= tolerance * scale
    for index in capture:
        diff = max_abs_diff(got.captured[index], want.captured[index])
        assert diff <= tolerance * want.captured[index].abs().max().item(), (
            f"captured layer {index}: {diff:.2e}"
        )
    # The bound can fail: rows 10 % off exceed it.
    assert max_abs_diff(got.final_hidden, want.final_hidden * 1.1) > tolerance * scale


def test_packed_weight_is_the_modules_weights_in_the_fast_paths_order() -> None:
    model = build_model(get_preset("debug"), "cpu", seed=5, dtype=torch.float32)
    attn = next(layer.attention for layer in model.main_layers if not layer.is_mla)
    before = torch.cat([getattr(attn, name).weight.detach().clone() for name in KDA_PROJECTIONS])
    packed = kda_in_proj(attn)
    assert torch.equal(packed, before)
    # The module's parameters are views of the packed tensor (no second copy), and packing twice is a no-op.
    assert attn.q_proj.weight.data_ptr() == packed.data_ptr()
    assert kda_in_proj(attn) is packed
