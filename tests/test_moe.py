"""MoE: grouped sigmoid routing with selection-only bias, renormalisation, clamps, expert forms."""

from __future__ import annotations

import pytest
import torch
from bubblescope.reference_model.config import DEBUG
from bubblescope.reference_model.ffn import swiglu
from bubblescope.reference_model.init import default_dtype
from bubblescope.reference_model.moe import MoE, MoERouter

# DEBUG: 16 experts in 4 groups of 4, keep 2 groups, top-4, scaling 2.5.
PER_GROUP = DEBUG.experts_per_group


def _router(bias: torch.Tensor | None = None) -> MoERouter:
    with default_dtype(torch.float64):
        router = MoERouter(DEBUG, torch.float64)
    router.reset_parameters(torch.Generator().manual_seed(0))
    if bias is not None:
        with torch.no_grad():
            router.expert_bias.copy_(bias)
    return router


def _scores_from_logits(router: MoERouter, logits: torch.Tensor) -> torch.Tensor:
    """Make the router produce exactly `logits` [E] for the input e_0 (weight column 0 = logits)."""
    with torch.no_grad():
        router.weight.zero_()
        router.weight[:, 0] = logits
    hidden = torch.zeros(1, DEBUG.hidden_size, dtype=torch.float64)
    hidden[0, 0] = 1.0
    return hidden


def test_bias_changes_selection_but_not_weights() -> None:
    logits = torch.linspace(-1.0, 1.0, DEBUG.num_experts, dtype=torch.float64)
    plain = _router(torch.zeros(DEBUG.num_experts))
    hidden = _scores_from_logits(plain, logits)
    ids_plain, _ = plain(hidden)
    assert 0 not in ids_plain[0].tolist()
    bias = torch.zeros(DEBUG.num_experts)
    bias[0] = bias[1] = 10.0
    biased = _router(bias)
    _scores_from_logits(biased, logits)
    ids_biased, weights = biased(hidden)
    chosen = ids_biased[0].tolist()
    assert 0 in chosen and 1 in chosen
    unbiased = torch.sigmoid(logits)[ids_biased[0]]
    expected = unbiased / unbiased.sum() * DEBUG.routed_scaling_factor
    assert torch.allclose(weights[0], expected, atol=1e-12), "weights must use the un-biased scores"


def test_excluded_groups_never_win_even_with_negative_biased_scores() -> None:
    # Group 3 holds the best scores, group 2 the next; every biased score is negative, so masking the
    # excluded groups with 0 instead of -inf would select experts from groups 0 and 1.
    logits = torch.full((DEBUG.num_experts,), -3.0, dtype=torch.float64)
    logits[3 * PER_GROUP :] = 2.0
    logits[2 * PER_GROUP : 3 * PER_GROUP] = 1.0
    router = _router(torch.full((DEBUG.num_experts,), -5.0))
    hidden = _scores_from_logits(router, logits)
    ids, _ = router(hidden)
    groups = {expert // PER_GROUP for expert in ids[0].tolist()}
    assert groups <= {2, 3}, f"selected experts {ids[0].tolist()} leak into excluded groups"
    assert len(set(ids[0].tolist())) == DEBUG.num_experts_per_tok


def test_group_score_is_the_sum_of_the_top_two_biased_scores() -> None:
    # Group 0 has one outstanding expert; group 1 has two good ones: top-2 sums rank group 1 first,
    # a max-only rule would rank group 0 first. Keep 2 groups => with topk_group 1 only group 1 stays.
    config_logits = torch.full((DEBUG.num_experts,), -4.0, dtype=torch.float64)
    config_logits[0] = 4.0
    config_logits[PER_GROUP : PER_GROUP + 2] = 2.0
    with default_dtype(torch.float64):
        router = MoERouter(DEBUG.with_(topk_group=1, num_experts_per_tok=2), torch.float64)
    router.reset_parameters(torch.Generator().manual_seed(0))
    with torch.no_grad():
        router.expert_bias.zero_()
    hidden = _scores_from_logits(router, config_logits)
    ids, _ = router(hidden)
    assert sorted(ids[0].tolist()) == [PER_GROUP, PER_GROUP + 1]


def test_weights_are_renormalised_and_scaled() -> None:
    router = _router()
    hidden = torch.randn(
        7, DEBUG.hidden_size, dtype=torch.float64, generator=torch.Generator().manual_seed(2)
    )
    ids, weights = router(hidden)
    sums = weights.sum(dim=-1)
    assert torch.allclose(sums, torch.full_like(sums, DEBUG.routed_scaling_factor), atol=1e-12)
    scores = torch.sigmoid(hidden @ router.weight.T).gather(-1, ids)
    assert torch.allclose(weights, scores / scores.sum(-1, keepdim=True) * DEBUG.routed_scaling_factor)


def test_swiglu_clamp_only_with_a_positive_limit() -> None:
    gate = torch.tensor([10.0, -10.0, 2.0], dtype=torch.float64)
    up = torch.tensor([10.0, -10.0, -9.0], dtype=torch.float64)
    plain = swiglu(gate, up, 0.0)
    assert torch.allclose(plain, torch.nn.functional.silu(gate) * up)
    clamped = swiglu(gate, up, 4.0)
    expected = torch.nn.functional.silu(gate).clamp(max=4.0) * up.clamp(-4.0, 4.0)
    assert torch.allclose(clamped, expected)
    assert clamped[0].item() == pytest.approx(16.0)


def test_clamps_are_set_only_on_their_layers() -> None:
    seen = {}
    for index in range(DEBUG.first_k_dense_replace, DEBUG.num_hidden_layers + 1):
        moe = MoE(DEBUG, index)
        seen[index] = (moe.experts.limit, moe.shared_experts.limit)
    # debug: routed 4.0 on layers 4-5; shared 5.0 on 3-4, 7.0 on 5; MTP layer (6) unclamped.
    assert seen == {1: (0.0, 0.0), 2: (0.0, 0.0), 3: (0.0, 5.0), 4: (4.0, 5.0), 5: (4.0, 7.0), 6: (0.0, 0.0)}


@pytest.mark.parametrize("layer_index", [2, 5])
def test_gathered_and_grouped_experts_agree(layer_index: int) -> None:
    with default_dtype(torch.float64):
        moe = MoE(DEBUG, layer_index, torch.float64)
    generator = torch.Generator().manual_seed(3)
    for module in moe.modules():
        if hasattr(module, "reset_parameters") and type(module).__module__.startswith("bubblescope"):
            module.reset_parameters(generator)
    # Large inputs so the clamps on layer 5 are actually hit.
    hidden = 6.0 * torch.randn(1, 9, DEBUG.hidden_size, dtype=torch.float64, generator=generator)
    moe.gather_max_rows = 10**6
    gathered = moe(hidden)
    moe.gather_max_rows = 0
    grouped = moe(hidden)
    diff = (gathered - grouped).abs().max().item()
    assert diff < 1e-10, f"max abs diff {diff:.3e}"


def test_incomplete_expert_state_dict_is_reported() -> None:
    moe = MoE(DEBUG, 2)
    state = moe.state_dict()
    del state["experts.3.up_proj.weight"]
    result = moe.load_state_dict(state, strict=False)
    assert "experts.up_proj" in result.missing_keys
    assert any(
        key.startswith("experts.") and key.endswith(".up_proj.weight") for key in result.unexpected_keys
    )
