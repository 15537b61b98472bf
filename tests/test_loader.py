"""Checkpoint loader and writer: round trips into the real model, precise refusals, no unpickling."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
import torch
from bubblescope.reference_model.checkpoint_writer import plan_shards, write_synthetic_checkpoint
from bubblescope.reference_model.config import DEBUG
from bubblescope.reference_model.init import build_model
from bubblescope.reference_model.loader import INDEX_FILE, SINGLE_FILE, load_checkpoint
from bubblescope.reference_model.model import LingForCausalLM
from hypothesis import given
from hypothesis import strategies as st
from safetensors.torch import save_file

from bubblescope.errors import CheckpointError


@pytest.fixture(scope="module")
def source_model() -> LingForCausalLM:
    return build_model(DEBUG, "cpu", seed=0)


@pytest.fixture(scope="module")
def sharded(source_model: LingForCausalLM, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("sharded")
    write_synthetic_checkpoint(source_model, folder, max_shard_bytes=600_000)
    return folder


@pytest.fixture(autouse=True)
def _no_unpickling(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any use of torch.load or pickle during loading fails the test."""

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the loader must never unpickle")

    monkeypatch.setattr(torch, "load", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)


def _fresh_model() -> LingForCausalLM:
    return build_model(DEBUG, "cpu", seed=1)


def _assert_same_weights(left: torch.nn.Module, right: torch.nn.Module) -> None:
    right_state = right.state_dict()
    for name, tensor in left.state_dict().items():
        assert torch.equal(tensor, right_state[name]), name


def _state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}


def test_sharded_round_trip_into_real_model(source_model: LingForCausalLM, sharded: Path) -> None:
    index = json.loads((sharded / INDEX_FILE).read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) > 1
    assert index["metadata"]["total_size"] == sum(
        t.numel() * t.element_size() for t in source_model.state_dict().values()
    )
    target = _fresh_model()
    before = target.model.layers[2].mlp.experts.gate_proj.detach().clone()
    report = load_checkpoint(target, sharded)
    assert report.tensors == len(source_model.state_dict())
    assert len(report.shards) == len(shards)
    assert not torch.equal(before, target.model.layers[2].mlp.experts.gate_proj)
    _assert_same_weights(source_model, target)
    tokens = torch.tensor([[1, 5, 7, 11]])
    with torch.no_grad():
        assert torch.equal(source_model(tokens), target(tokens))


def test_single_file_by_folder_and_by_path(source_model: LingForCausalLM, tmp_path: Path) -> None:
    save_file({name: t.contiguous() for name, t in source_model.state_dict().items()}, tmp_path / SINGLE_FILE)
    for path in (tmp_path, tmp_path / SINGLE_FILE):
        target = _fresh_model()
        load_checkpoint(target, path)
        _assert_same_weights(source_model, target)


def test_index_path_and_dtype_cast(source_model: LingForCausalLM, tmp_path: Path) -> None:
    bf16 = {name: tensor.to(torch.bfloat16) for name, tensor in source_model.state_dict().items()}
    write_synthetic_checkpoint(bf16, tmp_path, max_shard_bytes=1 << 20)
    target = _fresh_model()
    load_checkpoint(target, tmp_path / INDEX_FILE)
    for name, tensor in target.state_dict().items():
        assert tensor.dtype == torch.float32
        assert torch.equal(tensor, bf16[name].to(torch.float32)), name


def test_expert_bias_alias_is_accepted(source_model: LingForCausalLM, tmp_path: Path) -> None:
    renamed = {
        name.replace("gate.expert_bias", "gate.e_score_correction_bias"): tensor
        for name, tensor in source_model.state_dict().items()
    }
    assert any("e_score_correction_bias" in name for name in renamed)
    write_synthetic_checkpoint(renamed, tmp_path, max_shard_bytes=1 << 20)
    target = _fresh_model()
    load_checkpoint(target, tmp_path)
    _assert_same_weights(source_model, target)


def test_alias_and_canonical_together_are_refused(source_model: LingForCausalLM, tmp_path: Path) -> None:
    state = dict(source_model.state_dict())
    state["model.layers.2.mlp.gate.e_score_correction_bias"] = state[
        "model.layers.2.mlp.gate.expert_bias"
    ].clone()
    write_synthetic_checkpoint(state, tmp_path, max_shard_bytes=1 << 20)
    with pytest.raises(CheckpointError, match=r"model\.layers\.2\.mlp\.gate\.expert_bias is stored twice"):
        load_checkpoint(_fresh_model(), tmp_path)


def test_mismatches_are_listed_precisely_and_nothing_is_loaded(
    source_model: LingForCausalLM, tmp_path: Path
) -> None:
    state = dict(source_model.state_dict())
    dropped = [name for name in state if ".experts." in name][:7]
    for name in dropped:
        del state[name]
    state["model.layers.0.attention.bogus.weight"] = torch.zeros(3)
    state["model.norm.weight"] = torch.zeros(DEBUG.hidden_size + 1)
    write_synthetic_checkpoint(state, tmp_path, max_shard_bytes=1 << 20)
    target = _fresh_model()
    before = _state(target)
    with pytest.raises(CheckpointError) as caught:
        load_checkpoint(target, tmp_path)
    message = str(caught.value)
    assert "\n" not in message
    assert "7 missing: " in message and dropped[0] in message and "(+2 more)" in message
    assert dropped[6] not in message
    assert "1 unexpected: model.layers.0.attention.bogus.weight" in message
    assert (
        f"1 wrongly shaped: model.norm.weight [{DEBUG.hidden_size + 1}] vs model [{DEBUG.hidden_size}]"
        in message
    )
    _assert_same_weights(target, _LoadedState(before))


class _LoadedState(torch.nn.Module):
    """Wraps a saved state so _assert_same_weights can compare against it."""

    def __init__(self, state: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self._saved = state

    def state_dict(self, *args: object, **kwargs: object) -> dict[str, torch.Tensor]:  # type: ignore[override]
        return self._saved


def test_integer_tensor_for_float_parameter_is_refused(source_model: LingForCausalLM, tmp_path: Path) -> None:
    state = dict(source_model.state_dict())
    state["model.norm.weight"] = torch.ones(DEBUG.hidden_size, dtype=torch.int32)
    write_synthetic_checkpoint(state, tmp_path, max_shard_bytes=1 << 20)
    with pytest.raises(CheckpointError, match=r"1 not floating point: model\.norm\.weight \(I32\)"):
        load_checkpoint(_fresh_model(), tmp_path)


def test_pickle_formats_are_refused(tmp_path: Path) -> None:
    (tmp_path / "pytorch_model.bin").write_bytes(b"\x80\x04K\x01.")
    with pytest.raises(CheckpointError, match="pytorch_model.bin .*never unpickled"):
        load_checkpoint(_fresh_model(), tmp_path)
    with pytest.raises(CheckpointError, match="not a safetensors checkpoint"):
        load_checkpoint(_fresh_model(), tmp_path / "pytorch_model.bin")


def test_missing_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="checkpoint not found"):
        load_checkpoint(_fresh_model(), tmp_path / "absent")


@pytest.mark.parametrize("content", [b"", b"not a safetensors file at all", b"\xff" * 64])
def test_corrupt_file_names_the_file(tmp_path: Path, content: bytes) -> None:
    (tmp_path / SINGLE_FILE).write_bytes(content)
    with pytest.raises(CheckpointError, match=f"{SINGLE_FILE}: not a readable safetensors file") as caught:
        load_checkpoint(_fresh_model(), tmp_path)
    assert "\n" not in str(caught.value)


def test_truncated_shard_is_refused_before_loading(sharded: Path, tmp_path: Path) -> None:
    for file in sharded.iterdir():
        (tmp_path / file.name).write_bytes(file.read_bytes())
    victim = sorted(tmp_path.glob("model-*.safetensors"))[-1]
    victim.write_bytes(victim.read_bytes()[:-100])
    target = _fresh_model()
    before = _state(target)
    with pytest.raises(CheckpointError, match=victim.name):
        load_checkpoint(target, tmp_path)
    _assert_same_weights(target, _LoadedState(before))


def test_bad_index_files(sharded: Path, tmp_path: Path) -> None:
    index = json.loads((sharded / INDEX_FILE).read_text())
    for file in sharded.glob("model-*.safetensors"):
        (tmp_path / file.name).write_bytes(file.read_bytes())
    (tmp_path / INDEX_FILE).write_text("{not json")
    with pytest.raises(CheckpointError, match="not a safetensors index"):
        load_checkpoint(_fresh_model(), tmp_path)
    first_name = next(iter(index["weight_map"]))
    wrong_shard = dict(index["weight_map"])
    shard_names = sorted(set(wrong_shard.values()))
    wrong_shard[first_name] = next(name for name in shard_names if name != wrong_shard[first_name])
    (tmp_path / INDEX_FILE).write_text(json.dumps({"weight_map": wrong_shard}))
    with pytest.raises(
        CheckpointError, match=f"lacks tensors its index assigns to it: 1 absent: {first_name}"
    ):
        load_checkpoint(_fresh_model(), tmp_path)
    escaping = dict(index["weight_map"], **{first_name: "../elsewhere.safetensors"})
    (tmp_path / INDEX_FILE).write_text(json.dumps({"weight_map": escaping}))
    with pytest.raises(CheckpointError, match="is not a .safetensors file here"):
        load_checkpoint(_fresh_model(), tmp_path)
    missing = dict(index["weight_map"], **{first_name: "model-99999-of-99999.safetensors"})
    (tmp_path / INDEX_FILE).write_text(json.dumps({"weight_map": missing}))
    with pytest.raises(CheckpointError, match="shard files missing: model-99999-of-99999.safetensors"):
        load_checkpoint(_fresh_model(), tmp_path)


def test_meta_model_is_refused(sharded: Path) -> None:
    with torch.device("meta"):
        meta_model = LingForCausalLM(DEBUG)
    with pytest.raises(CheckpointError, match="meta"):
        load_checkpoint(meta_model, sharded)


def test_writer_refuses_bad_input(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="max_shard_bytes"):
        write_synthetic_checkpoint({"a": torch.zeros(2)}, tmp_path, max_shard_bytes=0)
    with pytest.raises(CheckpointError, match="empty"):
        write_synthetic_checkpoint({}, tmp_path, max_shard_bytes=10)
    with pytest.raises(CheckpointError, match="meta"):
        write_synthetic_checkpoint({"a": torch.empty(2, device="meta")}, tmp_path, max_shard_bytes=10)


def test_writer_handles_views_and_shared_storage(tmp_path: Path) -> None:
    base = torch.arange(12, dtype=torch.float32).view(3, 4)
    state = {"whole": base, "row": base[1], "column": base[:, 2], "again": base}
    write_synthetic_checkpoint(state, tmp_path, max_shard_bytes=1 << 20)
    from safetensors import safe_open

    with safe_open(str(next(tmp_path.glob("model-*.safetensors"))), framework="pt") as handle:
        for name, tensor in state.items():
            assert torch.equal(handle.get_tensor(name), tensor), name


@given(
    sizes=st.lists(st.integers(min_value=0, max_value=500), min_size=1, max_size=40),
    limit=st.integers(min_value=1, max_value=600),
)
def test_plan_shards_invariants(sizes: list[int], limit: int) -> None:
    named = {f"t{i}": size for i, size in enumerate(sizes)}
    groups = plan_shards(named, limit)
    assert [name for group in groups for name in group] == list(named)
    for group in groups:
        assert group
        assert len(group) == 1 or sum(named[name] for name in group) <= limit


@pytest.mark.gpu
def test_load_onto_cuda_keeps_device_and_dtypes(source_model: LingForCausalLM, sharded: Path) -> None:
    target = build_model(DEBUG, "cuda", seed=1, router_dtype=torch.bfloat16, lm_head_dtype=torch.bfloat16)
    dtypes = {name: tensor.dtype for name, tensor in target.state_dict().items()}
    load_checkpoint(target, sharded)
    source_state = source_model.state_dict()
    for name, tensor in target.state_dict().items():
        assert tensor.is_cuda and tensor.dtype == dtypes[name], name
        assert torch.equal(tensor.cpu(), source_state[name].to(tensor.dtype)), name
