"""lm_head + greedy argmax kernel vs the naive reference, including ties across strips."""

from __future__ import annotations

import pytest
import torch
from bubblescope.kernels.gemv import GemvConfig, KernelInputError
from bubblescope.kernels.lm_head import lm_head_greedy, lm_head_greedy_naive

from tests.kernels.helpers import assert_close, poison


@pytest.mark.parametrize(("rows", "vocab", "w_dtype"), [(1, 203, torch.bfloat16), (2, 77, torch.float32)])
def test_lm_head_greedy_matches_naive(device, rows, vocab, w_dtype):
    x = torch.randn(rows, 48, device=device).to(w_dtype if rows > 1 else torch.float32)
    weight = torch.randn(vocab, 48, device=device).to(w_dtype)
    logits = poison(torch.empty(rows, vocab, device=device))
    tokens = poison(torch.empty(rows, dtype=torch.int64, device=device))
    lm_head_greedy(x, weight, logits=logits, tokens=tokens, config=GemvConfig(block_n=16, block_k=32))
    want_tokens, want_logits = lm_head_greedy_naive(x, weight)
    assert_close("logits", logits, want_logits, atol=1e-3, rtol=1e-3)
    assert torch.equal(tokens.cpu(), want_tokens.cpu()), f"tokens {tokens.tolist()} != {want_tokens.tolist()}"
    assert torch.equal(tokens.cpu(), want_logits.argmax(dim=1).cpu())


def test_lm_head_ties_pick_lowest_index(device):
    """Rows 5, 40 and 70 are identical (three strips of 16); the winner must be 5, as torch.argmax."""
    weight = torch.randn(80, 32, device=device) * 0.01
    x = torch.randn(1, 32, device=device)
    winner = x[0] / x[0].norm()
    weight[[5, 40, 70]] = winner
    tokens = lm_head_greedy(x, weight, config=GemvConfig(block_n=16, block_k=32))
    assert tokens.tolist() == [5], f"got {tokens.tolist()}"
    assert tokens.tolist() == (x @ weight.T).argmax(dim=1).tolist()


def test_lm_head_rejects_bad_logits_buffer():
    with pytest.raises(KernelInputError, match="logits must be one of float32"):
        lm_head_greedy(torch.randn(1, 8), torch.randn(10, 8), logits=torch.empty(1, 10, dtype=torch.bfloat16))


@pytest.mark.parametrize("programs", [1, 2, 3])
def test_lm_head_persistent_programs_keep_lowest_tie(device, programs):
    """Few programs walk many strips: ties inside one program and across programs both resolve to
    the lowest index; logits match the reference everywhere."""
    weight = torch.randn(150, 40, device=device) * 0.01
    x = torch.randn(1, 40, device=device)
    weight[[17, 18, 90, 120]] = x[0] / x[0].norm()
    logits = poison(torch.empty(1, 150, device=device))
    config = GemvConfig(block_n=8, block_k=16)
    tokens = lm_head_greedy(x, weight, logits=logits, config=config, programs=programs)
    want_tokens, want_logits = lm_head_greedy_naive(x, weight)
    assert_close("logits", logits, want_logits, atol=1e-3, rtol=1e-3)
    assert tokens.tolist() == [17] == want_tokens.tolist(), f"got {tokens.tolist()}"


def test_lm_head_rejects_bad_programs():
    with pytest.raises(KernelInputError, match="programs"):
        lm_head_greedy(torch.randn(1, 8), torch.randn(10, 8), programs=0)
