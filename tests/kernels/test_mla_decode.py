"""Absorbed-MLA decode kernel vs the naive reference."""

from __future__ import annotations

import pytest
import torch
from bubblescope.kernels.gemv import KernelInputError
from bubblescope.kernels.mla_decode import mla_decode, mla_decode_naive

from tests.kernels.helpers import assert_close, poison


@pytest.mark.parametrize(
    ("heads", "latent", "rope", "cache_rows", "lengths", "splits"),
    [
        (4, 24, 8, 70, [70], 3),  # heads padded to 16, ragged dims, 3 uneven slices
        (16, 32, 16, 100, [1, 0], 4),  # a single row, an empty sequence (zeros), empty slices
        (3, 16, 16, 45, [45, 33], 1),  # one slice: no split
    ],
)
def test_mla_decode_matches_naive(device, heads, latent, rope, cache_rows, lengths, splits):
    batch = len(lengths)
    q_latent = torch.randn(batch, heads, latent, device=device)
    q_pe = torch.randn(batch, heads, rope, device=device)
    cache = torch.randn(batch, cache_rows, latent + rope, device=device)
    seq_lens = torch.tensor(lengths, dtype=torch.int32, device=device)
    scale = (latent + rope) ** -0.5
    out = poison(torch.empty(batch, heads, latent, device=device))
    mla_decode(q_latent, q_pe, cache, seq_lens, scale, num_splits=splits, out=out)
    want = mla_decode_naive(q_latent, q_pe, cache, seq_lens, scale)
    assert_close("mla", out, want, atol=1e-4, rtol=1e-4)


def test_mla_decode_rejects_mismatched_cache():
    q_latent, q_pe = torch.randn(1, 4, 16), torch.randn(1, 4, 8)
    with pytest.raises(KernelInputError, match="cache must have shape"):
        mla_decode(q_latent, q_pe, torch.randn(1, 10, 20), torch.tensor([5]), 0.1)
    with pytest.raises(KernelInputError, match="seq_lens must be one of int32, int64"):
        mla_decode(q_latent, q_pe, torch.randn(1, 10, 24), torch.tensor([5.0]), 0.1)
