"""Weight packing re-points the model's parameters into fused tensors (no second copy); metadata ops."""

from __future__ import annotations

import math

import pytest
import torch
from bubblescope.reference_model.config import DEBUG
from bubblescope.reference_model.fast.metadata import DecodeMetadata
from bubblescope.reference_model.fast.packing import KDAPack, MLAPack, MoEPack, pack_model
from bubblescope.reference_model.generate import new_cache
from bubblescope.reference_model.init import build_model
from bubblescope.reference_model.model import LingForCausalLM


def storage_bytes(model: LingForCausalLM) -> int:
    """Bytes of the distinct storages the model's parameters live in."""
    storages = {p.untyped_storage().data_ptr(): p.untyped_storage().nbytes() for p in model.parameters()}
    return sum(storages.values())


def same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


@pytest.fixture(scope="module")
def packed() -> tuple[LingForCausalLM, object, torch.Tensor, int, int]:
    model = build_model(DEBUG, "cpu", seed=5)
    prompt = torch.arange(3, 12).view(1, -1)
    before_logits = model(prompt)
    before_bytes = storage_bytes(model)
    pack = pack_model(model, new_cache(model, 16))
    return model, pack, before_logits, before_bytes, storage_bytes(model)


def test_packing_adds_no_weight_memory_and_keeps_eager_logits(packed) -> None:
    model, _pack, before_logits, before_bytes, after_bytes = packed
    assert after_bytes == before_bytes, f"{after_bytes} bytes after packing vs {before_bytes} before"
    assert torch.equal(model(torch.arange(3, 12).view(1, -1)), before_logits)


def test_kda_and_mla_projections_are_rows_of_one_fused_tensor(packed) -> None:
    model, pack, *_ = packed
    for layer, layer_pack in zip(model.main_layers, pack.layers, strict=True):
        attn = layer.attention
        if isinstance(layer_pack.attention, KDAPack):
            rows = [attn.q_proj, attn.k_proj, attn.v_proj, attn.f_proj, attn.g_proj, attn.b_proj]
        else:
            assert isinstance(layer_pack.attention, MLAPack)
            rows = [attn.q_proj, attn.kv_a_proj_with_mqa, attn.g_proj]
        fused = layer_pack.attention.in_proj
        start = 0
        for linear in rows:
            assert same_storage(linear.weight, fused)
            assert torch.equal(fused[start : start + linear.weight.shape[0]], linear.weight)
            start += linear.weight.shape[0]
        assert start == fused.shape[0]


def test_experts_and_shared_expert_live_in_the_slot_stacks(packed) -> None:
    model, pack, *_ = packed
    moe_layers = [
        (layer.mlp, lp.mlp)
        for layer, lp in zip(model.main_layers, pack.layers, strict=True)
        if isinstance(lp.mlp, MoEPack)
    ]
    assert moe_layers
    for moe, moe_pack in moe_layers:
        w = moe_pack.weights
        inner = moe.experts.gate_proj.shape[1]
        experts = moe.experts.gate_proj.shape[0]
        assert w.shared_slot == experts and w.w13.shape[0] == experts + 1
        assert same_storage(moe.experts.up_proj, w.w13) and same_storage(
            moe.shared_experts.down_proj.weight, w.w2
        )
        assert torch.equal(w.w13[:experts, inner:], moe.experts.up_proj)
        assert torch.equal(w.w13[experts, :inner], moe.shared_experts.gate_proj.weight)
        assert torch.equal(w.w2[experts], moe.shared_experts.down_proj.weight)
        assert w.swiglu_limit == moe.experts.limit and w.shared_swiglu_limit == moe.shared_experts.limit


def test_packing_twice_reuses_the_fused_tensors(packed) -> None:
    model, pack, *_ = packed
    again = pack_model(model, new_cache(model, 16))
    for first, second in zip(pack.layers, again.layers, strict=True):
        assert first.attention.in_proj is second.attention.in_proj
        if isinstance(first.mlp, MoEPack):
            assert first.mlp.weights.w13 is second.mlp.weights.w13


def test_bf16_router_and_lm_head_are_copies_made_once(packed) -> None:
    _model, pack, *_ = packed
    moe_pack = next(lp.mlp for lp in pack.layers if isinstance(lp.mlp, MoEPack))
    bf16 = moe_pack.with_router(True).router
    assert bf16.dtype == torch.bfloat16 and moe_pack.with_router(True).router is bf16
    assert moe_pack.with_router(False).router.dtype == torch.float32
    assert pack.lm_head(True) is pack.lm_head(True) and pack.lm_head(False).dtype == torch.float32


def test_metadata_prepare_and_advance() -> None:
    inv_freq = torch.tensor([1.0, 0.25], dtype=torch.float32)
    meta = DecodeMetadata(inv_freq, capacity=10, device=torch.device("cpu"))
    meta.raw.copy_(torch.tensor([7, 5]))
    meta.prepare()
    assert meta.positions.tolist() == [5] and meta.seq_lens.tolist() == [6]
    assert meta.seq_lens.dtype == torch.int32
    assert meta.cos[0, 1].item() == pytest.approx(math.cos(5 * 0.25), abs=1e-6)
    assert meta.sin[0, 0].item() == pytest.approx(math.sin(5.0), abs=1e-6)
    meta.next_token.fill_(9)
    meta.advance()
    assert meta.raw.tolist() == [9, 6]
