"""The reference workload at TP = N: one rank's greedy decode loop over its shard (bubblescope Workload).

Every rank runs the same loop in lockstep (the collectives inside each step keep them together); rank
0's timings are the run's TPOT. A step feeds the last token, runs the sharded model (two all-reduces
per layer), takes the vocabulary-parallel argmax on device and reads the token back with `.item()`,
as the eager TP=1 loop does. Switches of the eager path: `bf16_gate`, `bf16_lm_head` (copies of the
fp32 masters, weights never reloaded) and `fast_allreduce` (which all-reduce the hooks call).
"""

from __future__ import annotations

import torch
from torch.profiler import record_function

from bubblescope.errors import ConfigError
from bubblescope.workload import SwitchInfo

from ..cache import ModelCache
from ..config import LingConfig
from ..moe import MoERouter, StackedExperts
from ..switches import SWITCH_INFO, LingSwitches, require_implemented
from ..workload import IMPLEMENTED_SWITCHES, apply_weight_dtypes
from .build import build_tp_model, can_skip_mtp
from .comm import TPComm
from .decode import new_tp_cache, tp_decode_step, tp_prefill

# The switch's description lives with every other switch; TP workloads are the ones that offer it.
FAST_ALLREDUCE = next(info for info in SWITCH_INFO if info.name == "fast_allreduce")
# Switches of the eager reference path that TP keeps (all of them), plus TP's own.
EAGER_SWITCHES = IMPLEMENTED_SWITCHES
TP_SWITCHES = (*EAGER_SWITCHES, FAST_ALLREDUCE.name)


def tp_switch_infos(fast_path: bool = False) -> list[SwitchInfo]:
    """Switches of the TP workload: the eager path's or the fast path's, plus fast_allreduce."""
    from ..workload import FAST_SWITCHES, SINGLE_DEVICE_SWITCHES

    fast = tuple(name for name in FAST_SWITCHES if name not in SINGLE_DEVICE_SWITCHES)
    names = fast if fast_path else EAGER_SWITCHES
    return [info for info in SWITCH_INFO if info.name in names] + [FAST_ALLREDUCE]


class TPLingWorkload:
    """Greedy batch-1 decode of one rank's shard of a random Ling-3.0 preset.

    Args:
        config: the full model shape.
        comm: this rank's communicator (its device is where the shard is built).
        seed: weights and prompt (the same on every rank, as the weights must be).
        prompt_len: random prompt tokens prefilled by reset().
        max_steps: decode steps the cache holds before reset() is needed.
    """

    name = "ling3"

    def __init__(
        self, config: LingConfig, comm: TPComm, *, seed: int, prompt_len: int, max_steps: int
    ) -> None:
        if prompt_len < 1 or max_steps < 1:
            raise ConfigError(f"prompt_len and max_steps must be >= 1, got {prompt_len} and {max_steps}")
        self.config = config
        self.comm = comm
        self.seed = seed
        self.model = build_tp_model(config, comm, seed=seed, include_mtp=not can_skip_mtp())
        self.device = str(comm.device)
        self._routers = [m for m in self.model.model.layers.modules() if isinstance(m, MoERouter)]
        self._router_masters = [router.weight for router in self._routers]
        self._lm_head_master = self.model.lm_head.weight
        generator = torch.Generator().manual_seed(seed)
        # [1, prompt_len], drawn on the host so every rank has the same prompt
        self.prompt_ids = torch.randint(0, config.vocab_size, (1, prompt_len), generator=generator).to(
            comm.device
        )
        self.max_steps = max_steps
        self.cache: ModelCache = new_tp_cache(self.model, prompt_len + max_steps)
        self.enabled: frozenset[str] = frozenset()
        self._tokens: list[int] = []
        # A fresh workload is the baseline, whatever an earlier user of this communicator selected.
        comm.use_fast(False)
        self.reset()

    def switches(self) -> list[SwitchInfo]:
        return tp_switch_infos()

    def prepare(self, enabled: frozenset[str]) -> None:
        """Apply router / lm_head dtypes and the all-reduce choice, then re-prefill (on every rank)."""
        require_implemented(enabled, TP_SWITCHES, "ling3 at TP")
        switches = LingSwitches.from_names(set(enabled) & set(EAGER_SWITCHES))
        apply_weight_dtypes(
            switches, self._routers, self._router_masters, self.model.lm_head, self._lm_head_master
        )
        self.comm.use_fast(FAST_ALLREDUCE.name in enabled)
        self.enabled = frozenset(enabled)
        self.reset()

    @torch.no_grad()
    def reset(self) -> None:
        """Empty the cache and prefill the prompt again; the first token is read back here."""
        self.cache.reset()
        self._tokens = [int(tp_prefill(self.model, self.prompt_ids, self.cache).item())]

    @torch.no_grad()
    def step(self) -> int:
        """One greedy decode step on this rank (collectives included); returns the tokens emitted (1)."""
        if len(self._tokens) > self.max_steps:
            raise ConfigError(f"ling3 workload ran {self.max_steps} steps; call reset() or raise max_steps")
        with record_function("ling3.input"):
            token_ids = torch.tensor([[self._tokens[-1]]], device=self.comm.device)
        next_ids = tp_decode_step(self.model, token_ids, self.cache)
        with record_function("ling3.readback"):
            self._tokens.append(int(next_ids.item()))
        return 1

    def tokens(self) -> list[int]:
        return list(self._tokens)

    def describe(self) -> dict[str, object]:
        return {
            "preset": self.config.name,
            "device": self.device,
            "dtype": self.config.dtype,
            "params_this_rank": sum(p.numel() for p in self.model.parameters()),
            "prompt_len": int(self.prompt_ids.shape[1]),
            "max_steps": self.max_steps,
            "seed": self.seed,
            "switches": sorted(self.enabled),
            "tp": self.comm.describe(),
        }

    def bytes_per_token(self, enabled: frozenset[str]) -> int:
        """HBM bytes ONE rank reads per token: its shard's weights (top-k experts, local lm_head rows),
        the replicated parts (router, norms, latent projections), its KDA states and the MLA latent
        cache over the context. Ranks read in parallel, so this over bandwidth is the TP floor."""
        return rank_bytes_per_token(self, enabled)


def rank_bytes_per_token(workload: TPLingWorkload, enabled: frozenset[str]) -> int:
    """See TPLingWorkload.bytes_per_token."""
    model, config = workload.model, workload.config
    main = model.model.layers[: config.num_hidden_layers]
    total = 0
    for module in main.modules():
        direct = list(module.parameters(recurse=False))
        if isinstance(module, MoERouter):
            width = 2 if "bf16_gate" in enabled else workload._router_masters[0].element_size()
            total += (
                module.weight.numel() * width + module.expert_bias.numel() * module.expert_bias.element_size()
            )
            continue
        share = config.num_experts_per_tok / config.num_experts if isinstance(module, StackedExperts) else 1.0
        total += int(share * sum(p.numel() * p.element_size() for p in direct))
    total += sum(p.numel() * p.element_size() for p in model.model.norm.parameters())
    lm_head = workload._lm_head_master
    total += lm_head.numel() * (2 if "bf16_lm_head" in enabled else lm_head.element_size())
    embed = model.model.word_embeddings.weight
    total += embed.shape[1] * embed.element_size()
    for state in workload.cache.kda.values():
        total += 2 * (state.recurrent.numel() * state.recurrent.element_size())
        total += 2 * (state.conv.numel() * state.conv.element_size())
    context_len = max(workload.cache.length, int(workload.prompt_ids.shape[1]))
    for index in config.mla_layers:
        buffer = workload.cache.mla[index].buffer
        total += context_len * buffer.shape[-1] * buffer.element_size()
    return total


PATHS = ("auto", "eager", "fast")


def make_tp_workload(
    comm: TPComm,
    preset: str,
    *,
    seed: int = 0,
    prompt_len: int = 32,
    max_steps: int = 4096,
    path: str = "auto",
) -> TPLingWorkload:
    """This rank's `ling3` workload at TP = comm.world_size (the launcher calls it on every rank).

    Args:
        path: "fast" (Triton kernels + CUDA graph with the collectives captured; on the CPU only under
            TRITON_INTERPRET=1), "eager", or "auto" (fast on CUDA, eager on the CPU), as make_workload.

    Raises:
        ConfigError: unknown preset or path; ShardingError: the preset does not split over the ranks.
    """
    from ..config import get_preset

    if path not in PATHS:
        raise ConfigError(f"unknown path {path!r}; valid paths: {', '.join(PATHS)}")
    if path == "auto":
        path = "fast" if comm.device.type == "cuda" else "eager"
    config = get_preset(preset)
    if path == "fast":
        from .fast import TPFastWorkload

        return TPFastWorkload(config, comm, seed=seed, prompt_len=prompt_len, max_steps=max_steps)
    return TPLingWorkload(config, comm, seed=seed, prompt_len=prompt_len, max_steps=max_steps)
