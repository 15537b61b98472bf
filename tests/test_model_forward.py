"""LingForCausalLM on the debug preset in fp64: incremental decode == one full forward, HF names, MTP."""

from __future__ import annotations

import pytest
import torch
from bubblescope.reference_model.config import DEBUG, LingConfig
from bubblescope.reference_model.generate import new_cache, prefill
from bubblescope.reference_model.init import build_model
from bubblescope.reference_model.model import LingForCausalLM

from bubblescope.errors import ConfigError

# fp64 end to end: differences are pure reassociation, far below this.
FP64_ATOL = 1e-9
F64 = {"dtype": torch.float64, "router_dtype": torch.float64, "lm_head_dtype": torch.float64}


def _model(config: LingConfig = DEBUG, seed: int = 0) -> LingForCausalLM:
    return build_model(config, "cpu", seed=seed, **F64)


def _ids(length: int, vocab: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, vocab, (1, length), generator=torch.Generator().manual_seed(seed))


def _incremental_logits(model: LingForCausalLM, ids: torch.Tensor, prefill_len: int) -> torch.Tensor:
    cache = new_cache(model, ids.shape[1])
    chunks = [model(ids[:, :prefill_len], cache)]
    for position in range(prefill_len, ids.shape[1]):
        chunks.append(model(ids[:, position : position + 1], cache))
    assert cache.length == ids.shape[1]
    return torch.cat(chunks, dim=1)


@pytest.fixture(scope="module")
def debug_model() -> LingForCausalLM:
    return _model()


# 5: short prefill (KDA recurrent form); 70: past 64 tokens, KDA takes its chunked form.
@pytest.mark.parametrize("prefill_len", [1, 5, 70])
def test_prefill_then_decode_equals_full_forward(debug_model: LingForCausalLM, prefill_len: int) -> None:
    ids = _ids(prefill_len + 8, DEBUG.vocab_size)
    full = debug_model(ids)
    incremental = _incremental_logits(debug_model, ids, prefill_len)
    diff = (incremental - full).abs().max().item()
    assert diff < FP64_ATOL, f"max abs diff {diff:.3e} (logit scale {full.abs().max().item():.2f})"
    # Both layer kinds are present, so the comparison covers KDA states and MLA caches.
    assert DEBUG.kda_layers and DEBUG.mla_layers


def test_q_lora_variant_matches_incremental() -> None:
    config = DEBUG.with_(name="debug-qlora", q_lora_rank=24)
    model = _model(config)
    keys = set(model.state_dict())
    mla = config.mla_layers[0]
    for name in ("q_a_proj.weight", "q_a_layernorm.weight", "q_b_proj.weight"):
        assert f"model.layers.{mla}.attention.{name}" in keys
    assert f"model.layers.{mla}.attention.q_proj.weight" not in keys
    ids = _ids(12, config.vocab_size, seed=1)
    diff = (_incremental_logits(model, ids, 4) - model(ids)).abs().max().item()
    assert diff < FP64_ATOL, f"max abs diff {diff:.3e}"


def _expected_hf_names(config: LingConfig) -> set[str]:
    """Checkpoint names of notes §4, written out independently of the model code."""
    names = {"model.word_embeddings.weight", "model.norm.weight", "lm_head.weight"}
    kda = ["q_proj", "k_proj", "v_proj", "q_conv1d", "k_conv1d", "v_conv1d", "f_proj", "b_proj", "g_proj"]
    kda += ["o_norm", "o_proj"]
    mla = ["q_proj", "kv_a_proj_with_mqa", "kv_a_layernorm", "kv_b_proj", "g_proj", "dense"]
    layers = config.num_hidden_layers + config.num_nextn_predict_layers
    for i in range(layers):
        prefix = f"model.layers.{i}."
        names |= {prefix + "input_layernorm.weight", prefix + "post_attention_layernorm.weight"}
        if config.is_mla_layer(i):
            names |= {f"{prefix}attention.{n}.weight" for n in mla}
        else:
            names |= {f"{prefix}attention.{n}.weight" for n in kda}
            names |= {prefix + "attention.A_log", prefix + "attention.dt_bias"}
        if config.is_moe_layer(i):
            names |= {prefix + "mlp.gate.weight", prefix + "mlp.gate.expert_bias"}
            for proj in ("gate_proj", "up_proj", "down_proj"):
                names.add(f"{prefix}mlp.shared_experts.{proj}.weight")
                names |= {f"{prefix}mlp.experts.{j}.{proj}.weight" for j in range(config.num_experts)}
        else:
            names |= {f"{prefix}mlp.{proj}.weight" for proj in ("gate_proj", "up_proj", "down_proj")}
    mtp = f"model.layers.{config.num_hidden_layers}."
    names |= {mtp + n for n in ("enorm.weight", "hnorm.weight", "eh_proj.weight", "final_layernorm.weight")}
    return names


def test_state_dict_has_exactly_the_hf_names_and_shapes(debug_model: LingForCausalLM) -> None:
    state = debug_model.state_dict()
    assert set(state) == _expected_hf_names(DEBUG)
    cfg = DEBUG
    mla, moe = cfg.mla_layers[0], cfg.num_hidden_layers - 1
    assert state[f"model.layers.{mla}.attention.kv_a_proj_with_mqa.weight"].shape == (
        cfg.mla_cache_width,
        cfg.hidden_size,
    )
    assert state[f"model.layers.{moe}.mlp.experts.3.down_proj.weight"].shape == (
        cfg.hidden_size,
        cfg.moe_intermediate_size,
    )
    assert state[f"model.layers.{cfg.num_hidden_layers}.eh_proj.weight"].shape == (
        cfg.hidden_size,
        2 * cfg.hidden_size,
    )


def test_state_dict_round_trips_into_a_differently_seeded_model(debug_model: LingForCausalLM) -> None:
    other = _model(seed=5)
    ids = _ids(6, DEBUG.vocab_size)
    assert not torch.equal(other(ids), debug_model(ids))
    other.load_state_dict(debug_model.state_dict())
    assert torch.equal(other(ids), debug_model(ids))


def test_capture_layers_returns_the_residual_stream(debug_model: LingForCausalLM) -> None:
    ids = _ids(5, DEBUG.vocab_size)
    hidden = debug_model.forward_hidden(ids, capture_layers=[1, DEBUG.num_hidden_layers - 1])
    assert sorted(hidden.captured) == [1, DEBUG.num_hidden_layers - 1]
    renormed = debug_model.model.norm(hidden.captured[DEBUG.num_hidden_layers - 1])
    assert torch.allclose(renormed, hidden.final, atol=1e-12)


def test_logits_are_fp32_for_a_bf16_lm_head() -> None:
    model = build_model(DEBUG, "cpu", lm_head_dtype=torch.bfloat16)
    logits = model(_ids(3, DEBUG.vocab_size))
    assert logits.dtype == torch.float32 and logits.shape == (1, 3, DEBUG.vocab_size)


def test_mtp_incremental_equals_stateless(debug_model: LingForCausalLM) -> None:
    ids = _ids(10, DEBUG.vocab_size, seed=2)
    length = ids.shape[1] - 1
    final = debug_model.forward_hidden(ids[:, :length]).final
    positions = torch.arange(length)[None]
    full = debug_model.mtp_logits(final, ids[:, 1:], None, positions)
    cache = new_cache(debug_model, length)
    steps = [
        debug_model.mtp_logits(final[:, t : t + 1], ids[:, t + 1 : t + 2], cache, positions[:, t : t + 1])
        for t in range(length)
    ]
    diff = (torch.cat(steps, dim=1) - full).abs().max().item()
    assert diff < FP64_ATOL, f"max abs diff {diff:.3e}"
    assert full.shape == (1, length, DEBUG.vocab_size)


def test_rope_tables_are_not_in_the_state_dict(debug_model: LingForCausalLM) -> None:
    assert not any("inv_freq" in name for name in debug_model.state_dict())
    assert any(name.endswith("inv_freq") for name, _ in debug_model.named_buffers())


def test_chunked_prefill_equals_one_forward(debug_model: LingForCausalLM) -> None:
    ids = _ids(11, DEBUG.vocab_size, seed=4)
    whole = prefill(debug_model, ids, new_cache(debug_model, 11), chunk_tokens=64)
    chunked_cache = new_cache(debug_model, 11)
    chunked = prefill(debug_model, ids, chunked_cache, chunk_tokens=3)
    assert chunked_cache.length == 11
    assert (whole - chunked).abs().max().item() < FP64_ATOL


def test_mtp_on_a_preset_without_it_is_a_clear_error() -> None:
    config = DEBUG.with_(name="debug-nomtp", num_nextn_predict_layers=0)
    model = _model(config)
    ids = _ids(3, config.vocab_size)
    final = model.forward_hidden(ids).final
    with pytest.raises(ConfigError, match="no MTP layer"):
        model.mtp_logits(final, ids, None, torch.arange(3)[None])


def test_model_built_without_mtp_has_no_mtp_tensors() -> None:
    model = build_model(DEBUG, "cpu", include_mtp=False)
    mtp_prefix = f"model.layers.{DEBUG.num_hidden_layers}."
    assert not any(name.startswith(mtp_prefix) for name in model.state_dict())
    ids = _ids(3, DEBUG.vocab_size)
    with pytest.raises(ConfigError, match="no MTP layer"):
        model.mtp_logits(model.forward_hidden(ids).final, ids, None, torch.arange(3)[None])


def test_cache_clone_and_copy_restore_a_checkpoint(debug_model: LingForCausalLM) -> None:
    ids = _ids(8, DEBUG.vocab_size, seed=6)
    cache = new_cache(debug_model, 10)
    debug_model(ids[:, :6], cache)
    checkpoint = cache.clone()
    first = debug_model(ids[:, 6:7], cache)
    debug_model(ids[:, 7:8], cache)
    assert cache.length == 8 and checkpoint.length == 6
    kda_buffer = cache.kda[DEBUG.kda_layers[0]].recurrent
    cache.copy_(checkpoint)
    assert cache.kda[DEBUG.kda_layers[0]].recurrent is kda_buffer, "copy_ must keep the storage"
    again = debug_model(ids[:, 6:7], cache)
    assert torch.equal(first, again)
