"""The fast decode path (Triton kernels, one CUDA graph per step) at TP = N, applied from outside.

`fast.packing` packs whatever shard the model holds (local heads, I / TP expert rows, V / TP lm_head
rows) because TP set each block's local config and head count. What TP adds to the step is exactly:
an all-reduce of each block's partial output before the residual add + norm (two per layer), and a
vocabulary-parallel argmax over the local logits the lm_head kernel writes. The decoder subclass
builds this step, keys its graph on the all-reduce choice too, and captures with thread-local error
mode so NCCL's watchdog thread may keep polling while the step is captured.
"""

from __future__ import annotations

import torch

from bubblescope.workload import SwitchInfo

from ..cache import ModelCache
from ..config import LingConfig
from ..fast.blocks import StepOptions, dense_block, kda_block, mla_block, moe_block
from ..fast.decoder import FastDecoder
from ..fast.metadata import DecodeMetadata
from ..fast.packing import KDAPack, LayerPack, ModelPack, MoEPack
from ..fast.step import FastForward
from ..fast.workload import FastDecoderSteps
from ..model import LingForCausalLM
from ..switches import LingSwitches, require_implemented
from ..workload import FAST_SWITCHES, SINGLE_DEVICE_SWITCHES
from .comm import TPComm
from .decode import tp_prefill
from .lm_head import vocab_parallel_argmax
from .workload import FAST_ALLREDUCE, TPLingWorkload, tp_switch_infos


class TPFastForward(FastForward):
    """FastForward with the two all-reduces per layer and the cross-rank argmax.

    Args: as FastForward, plus `comm` and `vocab_start` (global id of this rank's first lm_head row).
    """

    def __init__(
        self, pack: ModelPack, meta: DecodeMetadata, opts: StepOptions, comm: TPComm, vocab_start: int
    ) -> None:
        super().__init__(pack, meta, opts)
        self.comm = comm
        self.vocab_start = vocab_start

    def _layer(self, layer: LayerPack, normed: torch.Tensor, next_norm: torch.Tensor) -> torch.Tensor:
        if isinstance(layer.attention, KDAPack):
            attn = kda_block(layer.attention, normed, self.opts)
        else:
            attn = mla_block(layer.attention, normed, self.meta, self.opts)
        normed = self._norm(self.comm.all_reduce(attn), layer.post_attention_norm)
        if isinstance(layer.mlp, MoEPack):
            mlp = moe_block(layer.mlp, normed, self.pack.rule, self.workspaces[layer.index], self.opts)
        else:
            mlp = dense_block(layer.mlp, normed, self.opts)
        return self._norm(self.comm.all_reduce(mlp), next_norm)

    def __call__(self) -> None:
        """One token; the lm_head kernel's local argmax is replaced by the argmax across ranks."""
        super().__call__()
        # self.logits [1, V / TP] holds this rank's slice (written by the lm_head kernel).
        token = vocab_parallel_argmax(self.logits, self.vocab_start, self.comm)
        self.meta.next_token.copy_(token.view(self.meta.next_token.shape))


class TPFastDecoder(FastDecoder):
    """FastDecoder whose step is TPFastForward; the graph is rebuilt when the all-reduce changes too.

    The inherited warm-up runs every rank in lockstep (kernels compile, symmetric buffers are made).
    """

    # NCCL's watchdog thread keeps polling while the step is captured.
    capture_error_mode = "thread_local"

    def __init__(self, model: LingForCausalLM, cache: ModelCache, comm: TPComm) -> None:
        self.comm = comm
        self.vocab_start = int(getattr(model, "vocab_start", 0))
        super().__init__(model, cache)

    def step_key(self, switches: LingSwitches) -> tuple:
        """FastDecoder's key plus the all-reduce choice: switching it recaptures the graph."""
        return (*super().step_key(switches), self.comm.fast)

    def make_forward(self, opts: StepOptions) -> TPFastForward:
        return TPFastForward(self.pack, self.meta, opts, self.comm, self.vocab_start)


TP_FAST_SWITCHES = (*(n for n in FAST_SWITCHES if n not in SINGLE_DEVICE_SWITCHES), FAST_ALLREDUCE.name)


class TPFastWorkload(FastDecoderSteps, TPLingWorkload):
    """One rank of the fast decode path at TP = N: eager TP prefill, then TPFastDecoder steps.

    Args: as TPLingWorkload.

    Raises:
        ConfigError: CPU without TRITON_INTERPRET=1, or a config the fast step cannot run.
    """

    decoder: TPFastDecoder | None = None

    def __init__(
        self, config: LingConfig, comm: TPComm, *, seed: int, prompt_len: int, max_steps: int
    ) -> None:
        super().__init__(config, comm, seed=seed, prompt_len=prompt_len, max_steps=max_steps)
        self.decoder = TPFastDecoder(self.model, self.cache, comm)
        self.prepare(frozenset())

    def switches(self) -> list[SwitchInfo]:
        return tp_switch_infos(fast_path=True)

    def prepare(self, enabled: frozenset[str]) -> None:
        """Select the all-reduce, rebuild the step (recapture) for the kernel switches, re-prefill."""
        require_implemented(enabled, TP_FAST_SWITCHES, "ling3 fast at TP")
        assert self.decoder is not None
        self.comm.use_fast(FAST_ALLREDUCE.name in enabled)
        self.decoder.configure(LingSwitches.from_names(set(enabled) - {FAST_ALLREDUCE.name}))
        self.enabled = frozenset(enabled)
        self.reset()

    @torch.no_grad()
    def reset(self) -> None:
        """Empty the cache, prefill eagerly at TP (one read of the first token), seed the decoder."""
        if self.decoder is None:
            return super().reset()
        self.cache.reset()
        first = int(tp_prefill(self.model, self.prompt_ids, self.cache).item())
        self._tokens = [first]
        self.decoder.start(first, self.cache.length)
