"""End to end: the target as its own draft accepts everything and reproduces plain greedy decoding,
for each setting of staged_kda and no_readback; drafts and the workload behave as documented."""

from __future__ import annotations

import pytest
import torch
from bubblescope.reference_model.generate import generate, new_cache
from bubblescope.reference_model.spec.decoder import SpecDecoder
from bubblescope.reference_model.spec.dspark import target_layers_for
from bubblescope.reference_model.spec.dspark_draft import DSparkDraft, load_dspark_weights
from bubblescope.reference_model.spec.kda_verify_layer import VerifyOptions
from bubblescope.reference_model.spec.nextn import mtp_forward_at
from bubblescope.reference_model.spec.self_draft import SelfDraft
from bubblescope.reference_model.spec.workload import SpecWorkload, make_spec_workload

from bubblescope.errors import CheckpointError, ConfigError

from .helpers import PROMPT_LEN, debug_model_fp64, max_abs_diff, random_ids

NEW_TOKENS = 24


@pytest.fixture(scope="module")
def model():
    return debug_model_fp64(seed=3)


@pytest.mark.parametrize("staged", [False, True], ids=["checkpoint", "staged"])
@pytest.mark.parametrize("no_readback", [False, True], ids=["readback", "no_readback"])
def test_self_draft_accepts_all_and_matches_greedy(model, staged: bool, no_readback: bool) -> None:
    prompt = random_ids(model.config.vocab_size, PROMPT_LEN, 7)
    want = generate(model, prompt[0], NEW_TOKENS)
    cache = new_cache(model, 96)
    draft = SelfDraft(model, cache, block=4, backend="torch")
    decoder = SpecDecoder(
        model, cache, draft, VerifyOptions(staged_kda=staged, backend="torch"), no_readback=no_readback
    )
    decoder.reset(prompt)
    while len(decoder.tokens) < NEW_TOKENS:
        decoder.step()
    decoder.drain()
    assert decoder.tokens[:NEW_TOKENS] == want
    assert set(decoder.accept_lengths) == {5}, f"self-draft must accept every token: {decoder.accept_lengths}"
    assert cache.length == PROMPT_LEN + len(decoder.tokens) - 1


def test_nextn_extend_matches_the_eager_mtp_layer(model) -> None:
    """Over a fresh window the position-addressed MTP equals MTPLayer.forward without a cache."""
    config = model.config
    prompt = random_ids(config.vocab_size, 6, 8)
    hidden = model.forward_hidden(prompt).final
    mtp = model.model.layers[config.num_hidden_layers]
    next_embeds = model.model.word_embeddings(random_ids(config.vocab_size, 6, 9))
    positions = torch.arange(6).view(1, 6)
    want = mtp(hidden, next_embeds, None, positions)
    buffer = torch.zeros(1, 16, config.mla_cache_width, dtype=torch.float64)
    got = mtp_forward_at(mtp, hidden, next_embeds, buffer, positions, 6)
    assert max_abs_diff(got, want) < 1e-12


def test_dspark_target_layers() -> None:
    assert target_layers_for(42) == (1, 11, 23, 29, 35)
    for depth in (6, 9, 24):
        layers = target_layers_for(depth)
        assert len(set(layers)) == 5 and 0 <= min(layers) and max(layers) < depth, (depth, layers)
    with pytest.raises(ConfigError):
        target_layers_for(4)


def test_dspark_weights_load_by_name(model, tmp_path) -> None:
    from safetensors.torch import save_file

    draft = DSparkDraft(model, block=4, capacity=32, seed=1)
    state = {f"model.{name}": tensor.contiguous() for name, tensor in draft.module.state_dict().items()}
    state["lm_head.weight"] = torch.zeros(2, 2, dtype=torch.float64)
    save_file(state, str(tmp_path / "draft.safetensors"))
    other = DSparkDraft(model, block=4, capacity=32, seed=2)
    assert max_abs_diff(other.module.fc.weight, draft.module.fc.weight) > 0
    ignored = load_dspark_weights(other, tmp_path / "draft.safetensors")
    assert ignored == []
    for name, tensor in draft.module.state_dict().items():
        assert torch.equal(other.module.state_dict()[name], tensor), name
    del state["model.fc.weight"]
    save_file(state, str(tmp_path / "partial.safetensors"))
    with pytest.raises(CheckpointError, match="missing"):
        load_dspark_weights(other, tmp_path / "partial.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError):
        load_dspark_weights(other, tmp_path / "junk.safetensors")


@pytest.mark.parametrize("spec", ["nextn", "dspark"])
def test_spec_workload_reports_accept_lengths(spec: str) -> None:
    workload = make_spec_workload("debug", "cpu", spec=spec, block=4, accept_len=3.0, max_steps=16)
    emitted = [workload.step() for _ in range(3)]
    summary = workload.spec_summary()
    assert all(1 <= count <= 5 for count in emitted)
    assert summary["spec"] == {"kind": spec, "block": 4, "acceptance": "oracle", "accept_len_target": 3.0}
    assert summary["accept_len"] == sum(emitted) / len(emitted)
    assert len(workload.tokens()) == 1 + sum(emitted)
    assert workload.describe()["spec"]["kind"] == spec
    assert summary["experts"]["verifies"] == 3
    assert 1 <= summary["experts"]["distinct_experts_mean"] <= summary["experts"]["upper_bound"]


def test_spec_workload_rejects_bad_settings() -> None:
    with pytest.raises(ConfigError, match="--spec"):
        make_spec_workload("debug", "cpu", spec="medusa")
    with pytest.raises(ConfigError, match="accept-len"):
        make_spec_workload("debug", "cpu", spec="nextn", block=8, accept_len=9.95)
    workload = make_spec_workload("debug", "cpu", spec="nextn", block=2, max_steps=4)
    with pytest.raises(ConfigError, match="not implemented"):
        workload.prepare(frozenset({"fused_moe"}))
    workload.prepare(frozenset({"bf16_gate", "bf16_lm_head"}))
    assert workload.model.lm_head.weight.dtype == torch.bfloat16
    assert 1 <= workload.step() <= 3
    workload.prepare(frozenset())
    assert workload.model.lm_head.weight.dtype == torch.float32
    from bubblescope.reference_model.config import get_preset

    with pytest.raises(ConfigError, match="MTP"):
        SpecWorkload(get_preset("debug").with_(num_nextn_predict_layers=0), "cpu", spec="nextn")


def test_kernel_moe_matches_the_eager_moe() -> None:
    """The verify's MoE on the Triton MoE kernels equals the eager module on a 5-token window."""
    from bubblescope.kernels.kda_verify import triton_usable
    from bubblescope.reference_model.config import get_preset
    from bubblescope.reference_model.init import build_model
    from bubblescope.reference_model.moe import MoE
    from bubblescope.reference_model.spec.routing import RoutingProbe
    from bubblescope.reference_model.spec.verify_moe import KernelMoE

    if not triton_usable(torch.device("cpu")):
        pytest.skip("needs TRITON_INTERPRET=1 (set by tests/spec/conftest.py without CUDA)")
    model = build_model(get_preset("debug"), "cpu", seed=0)
    moe = next(layer.mlp for layer in model.main_layers if isinstance(layer.mlp, MoE))
    normed = torch.randn(1, 5, model.config.hidden_size, generator=torch.Generator().manual_seed(0))
    want = moe(normed)
    probe = RoutingProbe(model)
    with probe.recording():
        got = KernelMoE(model, probe=probe)(moe, normed)
    assert max_abs_diff(got, want) < 1e-5
    ids, _ = moe.gate(normed[0])
    assert torch.equal(probe.records[0][0].sort(-1).values, ids.sort(-1).values)
