"""Accounting: published Flash numbers, and three independent derivations agreeing per component.

The analytic per-component formulas (accounting.py), the checkpoint name map (tensor_names.py) and the
model itself (built on the meta device) are computed separately; these tests make them agree per
component, so the floor cannot drift from the model.
"""

from __future__ import annotations

import math

import pytest
import torch
from bubblescope.reference_model.accounting import (
    FP32_BYTES,
    STATE_COMPONENTS,
    WEIGHT_COMPONENTS,
    bytes_per_token,
    count_parameters,
    dtype_bytes,
    min_devices_to_fit,
    weight_memory_bytes,
)
from bubblescope.reference_model.config import DEBUG, LING3_FLASH, LING3_TINY, PRESETS, LingConfig
from bubblescope.reference_model.init import default_dtype
from bubblescope.reference_model.model import LingForCausalLM
from bubblescope.reference_model.tensor_names import expected_tensors, is_fp32_tensor

from bubblescope.errors import ConfigError

GB = 1e9


def build_meta_model(
    config: LingConfig,
    dtype: torch.dtype = torch.float32,
    *,
    router_dtype: torch.dtype | None = None,
    lm_head_dtype: torch.dtype | None = None,
) -> LingForCausalLM:
    """The real model on the meta device (nothing allocated); router and lm_head default to `dtype`."""
    with torch.device("meta"), default_dtype(dtype):
        return LingForCausalLM(
            config, router_dtype=router_dtype or dtype, lm_head_dtype=lm_head_dtype or dtype
        )


def test_flash_parameter_counts_match_published() -> None:
    counts = count_parameters(LING3_FLASH)
    assert counts.total == 124_414_211_552
    assert round(count_parameters(LING3_FLASH, include_mtp=True).total / GB, 2) == 127.49
    assert round(counts.active_with_lm_head / GB, 3) == 5.103
    assert round(counts.active / GB, 3) == 4.701
    assert round(counts.active_with_embedding / GB, 3) == 5.506
    assert round(counts.routed_experts / GB, 1) == 120.8
    assert counts.mtp == 0


def test_tiny_total_matches_published() -> None:
    assert round(count_parameters(LING3_TINY).total / GB, 3) == 7.893


@pytest.mark.parametrize(
    ("router_bf16", "lm_head_bf16", "weights_gb"),
    [(True, True, "10.21"), (False, True, "10.31"), (False, False, "11.12")],
)
def test_flash_weight_bytes_match_notes(router_bf16: bool, lm_head_bf16: bool, weights_gb: str) -> None:
    breakdown = bytes_per_token(
        LING3_FLASH, context_len=0, router_bf16=router_bf16, lm_head_bf16=lm_head_bf16
    )
    assert f"{breakdown.weights / GB:.4g}" == weights_gb
    if router_bf16 and lm_head_bf16:
        assert round(breakdown.weights / GB, 3) == 10.207


def test_flash_components_match_notes_table() -> None:
    parts = bytes_per_token(LING3_FLASH, context_len=8192, router_bf16=True, lm_head_bf16=True).components
    assert round(parts["kda"] / 1e6, 1) == 4413.8  # notes: 4,413.5 MB + fp32 A_log/dt_bias
    assert round(parts["mla"] / 1e6, 1) == 447.5
    assert round(parts["dense_ffn"] / 1e6, 1) == 188.7
    assert round(parts["routed_experts"] / 1e6, 1) == 3774.9
    assert round(parts["shared_experts"] / 1e6, 1) == 471.9
    assert round(parts["router"] / 1e6, 1) == 104.9
    assert round(parts["lm_head"] / 1e6, 1) == 804.8
    assert parts["embedding_row"] == 5120
    assert parts["kda_state"] == 35 * 2 * 2_097_152
    assert parts["conv_state"] == 35 * 73_728 * 2
    assert parts["mla_cache"] == 8064 * 8192
    assert parts["mtp"] == 0


def test_total_is_weights_plus_states_and_cache_grows_linearly() -> None:
    short = bytes_per_token(LING3_FLASH, context_len=0, router_bf16=True, lm_head_bf16=True)
    long = bytes_per_token(LING3_FLASH, context_len=131072, router_bf16=True, lm_head_bf16=True)
    assert short.weights == sum(short.components[name] for name in WEIGHT_COMPONENTS)
    assert short.total == short.weights + sum(short.components[name] for name in STATE_COMPONENTS)
    assert long.total - short.total == 7 * 1152 * 131072
    assert (
        round(
            bytes_per_token(LING3_FLASH, context_len=8192, router_bf16=True, lm_head_bf16=True).total / GB, 2
        )
        == 10.42
    )


@pytest.mark.parametrize("config", list(PRESETS.values()), ids=list(PRESETS))
def test_parameter_totals_match_name_map(config: LingConfig) -> None:
    for include_mtp in (False, True):
        names = expected_tensors(config, include_mtp=include_mtp)
        assert count_parameters(config, include_mtp=include_mtp).total == sum(map(math.prod, names.values()))


def _component_of(name: str, config: LingConfig) -> str:
    """Classify a checkpoint tensor name into an accounting component (independent of accounting.py)."""
    parts = name.split(".")
    if name == "lm_head.weight":
        return "lm_head"
    if name == "model.word_embeddings.weight":
        return "embedding"
    if name == "model.norm.weight":
        return "norms"
    layer = int(parts[2])
    if layer >= config.num_hidden_layers:
        return "mtp"
    if parts[3] in ("input_layernorm", "post_attention_layernorm"):
        return "norms"
    if parts[3] == "attention":
        return "mla" if config.is_mla_layer(layer) else "kda"
    if parts[4] == "experts":
        return "routed_experts"
    if parts[4] == "shared_experts":
        return "shared_experts"
    if parts[4] == "gate":
        return "router"
    return "dense_ffn"


@pytest.mark.parametrize("config", list(PRESETS.values()), ids=list(PRESETS))
def test_components_match_name_map(config: LingConfig) -> None:
    by_component: dict[str, int] = {}
    for name, shape in expected_tensors(config, include_mtp=True).items():
        key = _component_of(name, config)
        by_component[key] = by_component.get(key, 0) + math.prod(shape)
    analytic = {k: v for k, v in count_parameters(config, include_mtp=True).by_component.items() if v}
    assert analytic == by_component


def _weight_bytes_from_names(config: LingConfig, *, router_bf16: bool, lm_head_bf16: bool) -> int:
    """Bytes of the tensors a batch-1 token reads, picked from the name map (experts 0..k-1 stand in)."""
    elem = dtype_bytes(config)
    total = 0
    for name, shape in expected_tensors(config, include_mtp=False).items():
        numel = math.prod(shape)
        if ".experts." in name and int(name.split(".")[5]) >= config.num_experts_per_tok:
            continue
        if name == "model.word_embeddings.weight":
            numel = shape[1]
        size = elem
        if is_fp32_tensor(name):
            size = FP32_BYTES
        elif name.endswith("mlp.gate.weight"):
            size = 2 if router_bf16 else 4
        elif name == "lm_head.weight":
            size = 2 if lm_head_bf16 else 4
        total += numel * size
    return total


@pytest.mark.parametrize("config", list(PRESETS.values()), ids=list(PRESETS))
@pytest.mark.parametrize("bf16", [False, True])
def test_weight_bytes_match_name_map(config: LingConfig, bf16: bool) -> None:
    analytic = bytes_per_token(config, context_len=0, router_bf16=bf16, lm_head_bf16=bf16).weights
    assert analytic == _weight_bytes_from_names(config, router_bf16=bf16, lm_head_bf16=bf16)


@pytest.mark.parametrize("config", [DEBUG, LING3_TINY, LING3_FLASH], ids=["debug", "tiny", "flash"])
def test_meta_model_matches_accounting(config: LingConfig) -> None:
    """The model itself (meta device: nothing allocated) has exactly the counted parameters and names."""
    model = build_meta_model(config)
    numel = sum(p.numel() for p in model.parameters())
    assert numel == count_parameters(config, include_mtp=True).total
    shapes = {name: tuple(tensor.shape) for name, tensor in model.state_dict().items()}
    assert shapes == expected_tensors(config)


def test_meta_model_bytes_match_weight_memory() -> None:
    model = build_meta_model(DEBUG.with_(dtype="bfloat16"), dtype=torch.bfloat16)
    stored = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    assert stored == weight_memory_bytes(DEBUG.with_(dtype="bfloat16"))


def test_tp_shares() -> None:
    one = bytes_per_token(LING3_FLASH, context_len=4096, router_bf16=True, lm_head_bf16=True).components
    two = bytes_per_token(LING3_FLASH, context_len=4096, router_bf16=True, lm_head_bf16=True, tp=2).components
    for name in ("routed_experts", "shared_experts", "dense_ffn", "lm_head", "kda_state", "conv_state"):
        assert two[name] * 2 == one[name], name
    for name in ("router", "norms", "mla_cache", "embedding_row"):
        assert two[name] == one[name], name
    # o_norm is shared by all heads; the MLA latent projection and its norm serve every head.
    assert 2 * two["kda"] - one["kda"] == 35 * 128 * 2
    assert 2 * two["mla"] - one["mla"] == 7 * (576 * 2560 + 512) * 2


def test_tp_that_does_not_divide_is_refused() -> None:
    with pytest.raises(ConfigError, match="tp=3 does not divide num_attention_heads=32"):
        bytes_per_token(LING3_FLASH, context_len=0, tp=3)
    with pytest.raises(ConfigError, match=">= 1"):
        bytes_per_token(LING3_FLASH, context_len=0, tp=0)
    with pytest.raises(ConfigError, match="context"):
        bytes_per_token(LING3_FLASH, context_len=-1)


def test_mtp_draft_forward_is_counted_only_when_asked() -> None:
    plain = bytes_per_token(LING3_FLASH, context_len=100, router_bf16=True, lm_head_bf16=True)
    with_mtp = bytes_per_token(
        LING3_FLASH, context_len=100, router_bf16=True, lm_head_bf16=True, include_mtp=True
    )
    # notes §2.3: ~99.5 M active params (199 MB) plus a second full lm_head read: about 1.0 GB.
    assert round(with_mtp.components["mtp"] / GB, 1) == 1.0
    assert with_mtp.components["mla_cache"] - plain.components["mla_cache"] == 1152 * 100
    assert with_mtp.weights - plain.weights == with_mtp.components["mtp"]


def test_weight_memory_and_fit() -> None:
    assert round(weight_memory_bytes(LING3_FLASH, include_mtp=False) / GB, 1) == 248.8
    h200_bytes = 143_771_000_000
    assert min_devices_to_fit(LING3_FLASH, h200_bytes, max_devices=8) == 2
    assert min_devices_to_fit(LING3_FLASH, h200_bytes, max_devices=1) is None
    assert min_devices_to_fit(PRESETS["ling3-flash-e256"], h200_bytes, max_devices=1) == 1
    assert min_devices_to_fit(DEBUG, 2 << 30, max_devices=1) == 1


@pytest.mark.parametrize("bf16", [False, True])
def test_flash_weight_bytes_match_meta_model_dtypes(bf16: bool) -> None:
    """Bytes per token from the model's own tensors and dtypes (bf16 model, router/lm_head per switch)."""
    switch_dtype = torch.bfloat16 if bf16 else torch.float32
    model = build_meta_model(
        LING3_FLASH, torch.bfloat16, router_dtype=switch_dtype, lm_head_dtype=switch_dtype
    )
    read_bytes = 0
    for name, tensor in model.state_dict().items():
        parts = name.split(".")
        if parts[1] == "layers" and int(parts[2]) >= LING3_FLASH.num_hidden_layers:
            continue
        if ".experts." in name and int(parts[5]) >= LING3_FLASH.num_experts_per_tok:
            continue
        numel = tensor.shape[1] if name == "model.word_embeddings.weight" else tensor.numel()
        read_bytes += numel * tensor.element_size()
    analytic = bytes_per_token(LING3_FLASH, context_len=0, router_bf16=bf16, lm_head_bf16=bf16)
    assert read_bytes == analytic.weights
