"""`verify_gated_norm`: each KDA layer's gated output norm of the verify window as one Triton launch.

The target pass with the switch must give the eager pass's normed final rows and captured residual
rows (DSpark's conditioning): both on the Triton verify kernels (interpreter on the CPU, fp32), so the
only difference is the norm's reduction order and where it rounds.
"""

from __future__ import annotations

import pytest
import torch
from bubblescope.kernels.kda_verify import triton_usable
from bubblescope.reference_model.config import get_preset
from bubblescope.reference_model.generate import new_cache
from bubblescope.reference_model.init import build_model
from bubblescope.reference_model.spec import kda_verify_layer
from bubblescope.reference_model.spec.kda_verify_layer import VerifyOptions
from bubblescope.reference_model.spec.target_verify import target_forward_at

from .helpers import PROMPT_LEN, max_abs_diff, random_ids

WINDOW = 3


def target_pass(model, gated: bool, capture: list[int]):
    device = model.model.word_embeddings.weight.device
    cache = new_cache(model, 32)
    model(random_ids(model.config.vocab_size, PROMPT_LEN, 0).to(device), cache)
    positions = torch.arange(PROMPT_LEN, PROMPT_LEN + WINDOW, device=device).view(1, WINDOW)
    tokens = random_ids(model.config.vocab_size, WINDOW, 1).to(device)
    options = VerifyOptions(
        staged_kda=True, fused_kda_verify=True, use_pdl=True, kernel_norm=True, kernel_gated_norm=gated
    )
    return target_forward_at(model, cache, tokens, positions, PROMPT_LEN + WINDOW, options, capture)


# fp32: reduction order only (1e-5 of the rows' scale). bf16 (GPU): the kernel rounds once where the
# eager ops round at the end too, a few bf16 ulps per KDA layer, through the later layers: 3e-2.
@pytest.mark.parametrize(
    ("dtype", "tolerance"),
    [(torch.float32, 1e-5), pytest.param(torch.bfloat16, 3e-2, marks=pytest.mark.gpu)],
    ids=["fp32", "bf16"],
)
def test_gated_norm_kernel_gives_the_eager_rows(monkeypatch: pytest.MonkeyPatch, dtype, tolerance) -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if not triton_usable(torch.device(device)):
        pytest.skip("needs CUDA or TRITON_INTERPRET=1 (set by tests/spec/conftest.py without CUDA)")
    model = build_model(get_preset("debug"), device, seed=3, dtype=dtype)
    last = model.main_layers[-1].index
    capture = [0, last]
    launches = []
    real = kda_verify_layer.gated_rms_norm_rows
    monkeypatch.setattr(
        kda_verify_layer, "gated_rms_norm_rows", lambda *a, **k: launches.append(1) or real(*a, **k)
    )
    want = target_pass(model, False, capture)
    assert not launches
    got = target_pass(model, True, capture)
    kda_layers = sum(1 for layer in model.main_layers if not layer.is_mla)
    assert kda_layers > 0 and len(launches) == kda_layers
    scale = want.final_hidden.abs().max().item()
    assert max_abs_diff(got.final_hidden, want.final_hidden) <= tolerance * scale
    for index in capture:
        diff = max_abs_diff(got.captured[index], want.captured[index])
        assert diff <= tolerance * want.captured[index].abs().max().item(), (
            f"captured layer {index}: {diff:.2e}"
        )
    # The bound can fail: rows 10 % off exceed it.
    assert max_abs_diff(got.final_hidden, want.final_hidden * 1.1) > tolerance * scale
