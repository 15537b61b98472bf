"""After any accepted length a, the committed KDA/conv states and MLA rows equal one-by-one decoding.

Checked for both settings of staged_kda and fused_kda_verify: in fp64 with the PyTorch verify
(tolerance 1e-12), and with the Triton kernels on the CPU interpreter (they compute in fp32: 1e-5).
"""

from __future__ import annotations

import pytest
import torch
from bubblescope.kernels.kda_verify import triton_usable
from bubblescope.reference_model.generate import new_cache
from bubblescope.reference_model.spec.kda_verify_layer import VerifyOptions
from bubblescope.reference_model.spec.target_verify import (
    allocate_checkpoint,
    checkpoint_kda,
    commit_verify,
    target_forward_at,
)

from .helpers import PROMPT_LEN, debug_model_fp64, max_abs_diff, random_ids

WINDOW = 7


@pytest.fixture(scope="module")
def model():
    return debug_model_fp64()


def verify_then_commit(model, prompt, tokens, accepted: int, options: VerifyOptions):
    """Prefill, verify `tokens` [1, WINDOW] at the next positions, commit `accepted`; -> (cache, logits)."""
    cache = new_cache(model, 32)
    model(prompt, cache)
    checkpoint = None
    if not options.staged_kda:
        checkpoint = allocate_checkpoint(cache)
        checkpoint_kda(cache, checkpoint)
    positions = torch.arange(PROMPT_LEN, PROMPT_LEN + WINDOW).view(1, WINDOW)
    result = target_forward_at(model, cache, tokens, positions, PROMPT_LEN + WINDOW, options)
    commit_verify(model, cache, result, torch.tensor(accepted), options, checkpoint)
    return cache, model.compute_logits(result.final_hidden)


def one_by_one(model, prompt, tokens, count: int):
    """Prefill, then decode tokens[:, :count] one at a time; -> (cache, logits [1, count, V])."""
    cache = new_cache(model, 32)
    model(prompt, cache)
    logits = [model(tokens[:, step : step + 1], cache) for step in range(count)]
    return cache, torch.cat(logits, dim=1)


def assert_same_state(got, want, committed: int, atol: float) -> None:
    for index, state in want.kda.items():
        diff = max_abs_diff(got.kda[index].recurrent, state.recurrent)
        assert diff <= atol, f"KDA layer {index} recurrent state off by {diff:.2e}"
        diff = max_abs_diff(got.kda[index].conv, state.conv)
        assert diff <= atol, f"KDA layer {index} conv window off by {diff:.2e}"
    for index, latent in want.mla.items():
        if index >= 6:
            continue  # the MTP layer's cache is the draft's business, not the verify's
        diff = max_abs_diff(got.mla[index].buffer[:, :committed], latent.buffer[:, :committed])
        assert diff <= atol, f"MLA layer {index} cache rows off by {diff:.2e}"


@pytest.mark.parametrize("staged", [False, True], ids=["checkpoint", "staged"])
@pytest.mark.parametrize("accepted", [0, 3, WINDOW - 1])
def test_commit_equals_sequential_fp64(model, staged: bool, accepted: int) -> None:
    vocab = model.config.vocab_size
    prompt, tokens = random_ids(vocab, PROMPT_LEN, 0), random_ids(vocab, WINDOW, accepted + 1)
    options = VerifyOptions(staged_kda=staged, backend="torch")
    got, verify_logits = verify_then_commit(model, prompt, tokens, accepted, options)
    want, step_logits = one_by_one(model, prompt, tokens, accepted + 1)
    assert_same_state(got, want, PROMPT_LEN + accepted + 1, 1e-12)
    diff = max_abs_diff(verify_logits[:, : accepted + 1], step_logits)
    assert diff <= 1e-10, f"verify logits differ from one-by-one decoding by {diff:.2e}"


# Each switch takes both values across the two cases (the interpreter is slow; the kernels themselves
# are checked against the reference in test_kda_verify_kernel.py at every combination).
@pytest.mark.parametrize(
    ("staged", "fused"), [(False, True), (True, False)], ids=["checkpoint-fused", "staged-unfused"]
)
def test_commit_equals_sequential_triton(model, staged: bool, fused: bool) -> None:
    if not triton_usable(torch.device("cpu")):
        pytest.skip("needs TRITON_INTERPRET=1 (set by tests/spec/conftest.py without CUDA)")
    vocab = model.config.vocab_size
    prompt, tokens = random_ids(vocab, PROMPT_LEN, 2), random_ids(vocab, WINDOW, 3)
    options = VerifyOptions(staged_kda=staged, fused_kda_verify=fused, backend="triton")
    accepted = 2
    got, _ = verify_then_commit(model, prompt, tokens, accepted, options)
    want, _ = one_by_one(model, prompt, tokens, accepted + 1)
    assert_same_state(got, want, PROMPT_LEN + accepted + 1, 1e-5)


def test_staged_verify_leaves_persistent_state_alone(model) -> None:
    vocab = model.config.vocab_size
    cache = new_cache(model, 32)
    model(random_ids(vocab, PROMPT_LEN, 4), cache)
    before = {index: state.clone() for index, state in cache.kda.items()}
    positions = torch.arange(PROMPT_LEN, PROMPT_LEN + WINDOW).view(1, WINDOW)
    options = VerifyOptions(staged_kda=True, backend="torch")
    target_forward_at(model, cache, random_ids(vocab, WINDOW, 5), positions, PROMPT_LEN + WINDOW, options)
    for index, state in before.items():
        assert torch.equal(cache.kda[index].recurrent, state.recurrent), f"layer {index} recurrent changed"
        assert torch.equal(cache.kda[index].conv, state.conv), f"layer {index} conv changed"
