"""MLA: absorbed decode form == naive form; interleaved RoPE; the cache holds [normed c ; rotated k_pe]."""

from __future__ import annotations

import math

import pytest
import torch
from bubblescope.reference_model.cache import LatentCache
from bubblescope.reference_model.config import DEBUG
from bubblescope.reference_model.init import default_dtype
from bubblescope.reference_model.mla import MLAAttention
from bubblescope.reference_model.rope import InterleavedRope

FP64_ATOL = 1e-10


def _mla(seed: int = 0, q_lora_rank: int | None = None) -> MLAAttention:
    config = DEBUG.with_(q_lora_rank=q_lora_rank)
    with default_dtype(torch.float64):
        module = MLAAttention(config, config.mla_layers[0])
    generator = torch.Generator().manual_seed(seed)
    module.reset_parameters(generator)
    module.kv_a_layernorm.reset_parameters(generator)
    return module


def _inputs(seq_len: int, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    hidden = torch.randn(2, seq_len, DEBUG.hidden_size, generator=generator, dtype=torch.float64)
    positions = torch.arange(seq_len).expand(2, -1)
    return hidden, positions


@pytest.mark.parametrize("q_lora_rank", [None, 24])
def test_absorbed_equals_naive_over_a_prefix(q_lora_rank: int | None) -> None:
    mla = _mla(q_lora_rank=q_lora_rank)
    hidden, positions = _inputs(9)
    q_nope, q_pe = mla._queries(hidden).split([mla.nope_dim, mla.rope_dim], dim=-1)
    q_pe = mla.rope(q_pe, positions)
    latent = mla._latent(hidden, positions)
    naive = mla.attend_naive(q_nope, q_pe, latent)
    absorbed = mla.attend_absorbed(q_nope, q_pe, latent)
    diff = (naive - absorbed).abs().max().item()
    assert diff < FP64_ATOL, f"max abs diff {diff:.3e}"


def test_decode_with_absorption_on_and_off_agree() -> None:
    mla = _mla()
    hidden, positions = _inputs(7)
    outputs = {}
    for absorb in (True, False):
        mla.absorb_decode = absorb
        cache = LatentCache(torch.zeros(2, 16, DEBUG.mla_cache_width, dtype=torch.float64))
        mla(hidden[:, :4], cache, positions[:, :4])
        steps = [mla(hidden[:, t : t + 1], cache, positions[:, t : t + 1]) for t in range(4, 7)]
        outputs[absorb] = torch.cat(steps, dim=1)
    diff = (outputs[True] - outputs[False]).abs().max().item()
    assert diff < FP64_ATOL, f"max abs diff {diff:.3e}"
    full = mla(hidden, None, positions)[:, 4:]
    assert (outputs[True] - full).abs().max().item() < FP64_ATOL


def test_cache_rows_are_normed_latent_and_rotated_rope_key() -> None:
    mla = _mla()
    hidden, positions = _inputs(5)
    cache = LatentCache(torch.zeros(2, 8, DEBUG.mla_cache_width, dtype=torch.float64))
    mla(hidden, cache, positions + 3)
    c, k_pe = mla.kv_a_proj_with_mqa(hidden).split([mla.latent_dim, mla.rope_dim], dim=-1)
    rows = cache.buffer[:, :5]
    assert cache.length == 5
    assert torch.allclose(rows[..., : mla.latent_dim], mla.kv_a_layernorm(c), atol=1e-12)
    assert torch.allclose(rows[..., mla.latent_dim :], mla.rope(k_pe, positions + 3), atol=1e-12)
    assert not torch.allclose(rows[..., mla.latent_dim :], k_pe, atol=1e-3)


def test_rope_rotates_interleaved_pairs_by_position_times_frequency() -> None:
    rope_dim, theta, position = 8, 6e6, 5
    rope = InterleavedRope(rope_dim, theta)
    features = torch.randn(1, 1, rope_dim, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    rotated = rope(features, torch.tensor([[position]]))
    for j in range(rope_dim // 2):
        angle = position * theta ** (-2 * j / rope_dim)
        pair = complex(features[0, 0, 2 * j].item(), features[0, 0, 2 * j + 1].item())
        expected = pair * complex(math.cos(angle), math.sin(angle))
        got = complex(rotated[0, 0, 2 * j].item(), rotated[0, 0, 2 * j + 1].item())
        assert abs(got - expected) < 1e-6, f"pair {j}: {got} vs {expected}"


def test_rope_scores_depend_only_on_relative_position() -> None:
    rope = InterleavedRope(8, 6e6)
    generator = torch.Generator().manual_seed(4)
    query = torch.randn(1, 1, 8, dtype=torch.float64, generator=generator)
    key = torch.randn(1, 1, 8, dtype=torch.float64, generator=generator)

    def score(q_pos: int, k_pos: int) -> float:
        return (rope(query, torch.tensor([[q_pos]])) * rope(key, torch.tensor([[k_pos]]))).sum().item()

    assert score(10, 3) == pytest.approx(score(107, 100), abs=1e-9)
    assert score(10, 3) != pytest.approx(score(10, 4), abs=1e-6)


def test_output_gate_is_one_sigmoid_per_head() -> None:
    mla = _mla()
    hidden, positions = _inputs(3)
    baseline = mla(hidden, None, positions)
    with torch.no_grad():
        # A huge negative bias-like shift on head 0's gate row closes head 0 only.
        mla.g_proj.weight[0] = -1e6 * hidden[0, 0] / hidden[0, 0].norm()
    gated = mla(hidden, None, positions)
    head_width = DEBUG.v_head_dim
    dense = mla.dense.weight
    # The change in output must lie in the span of head 0's dense columns.
    delta = (gated - baseline)[0, 0]
    head0 = dense[:, :head_width]
    solution = torch.linalg.lstsq(head0, delta[:, None]).solution
    assert torch.allclose(head0 @ solution, delta[:, None], atol=1e-8)
    assert delta.abs().max().item() > 1e-6
