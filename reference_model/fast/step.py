"""The whole batch-1 decode forward of the fast path: embedding -> layers -> final norm -> greedy token.

`FastForward.__call__` issues every kernel of one token and reads no host value, so it can be
captured as one CUDA graph (on the CPU interpreter it simply runs eagerly). Its inputs are
`DecodeMetadata` (input token, position, rows to attend, rope row); its outputs are written into
`meta.next_token` and `logits`.
"""

from __future__ import annotations

import math

import torch
from bubblescope.kernels.lm_head import lm_head_greedy
from bubblescope.kernels.moe import MoEWorkspace
from bubblescope.kernels.rmsnorm import NormEpilogue, add_rmsnorm

from .blocks import StepOptions, dense_block, interpreter_gemv_config, kda_block, mla_block, moe_block
from .metadata import DecodeMetadata
from .packing import KDAPack, LayerPack, ModelPack, MoEPack


def step_options(
    pack: ModelPack,
    *,
    pdl: bool,
    fused_moe: bool,
    bf16_gate: bool,
    bf16_lm_head: bool,
    kda_v_splits: int = 1,
    fast_topk: bool = False,
    early_shared: bool = False,
    deep_experts: bool = False,
    routing_in_experts: bool = False,
    tma_experts: bool = False,
    fused_mla_glue: bool = False,
    norm_epilogue: bool = False,
    kda_norm_in_oproj: bool = False,
) -> StepOptions:
    """StepOptions of a model for the given kernel-level switches (kda_v_splits: a tuning choice, not
    a switch: it changes which programs do the work, not the math)."""
    config = pack.config
    return StepOptions(
        use_pdl=pdl,
        fused_moe=fused_moe,
        bf16_gate=bf16_gate,
        bf16_lm_head=bf16_lm_head,
        eps=config.rms_norm_eps,
        mla_scale=1.0 / math.sqrt(config.qk_head_dim),
        kda_v_splits=kda_v_splits,
        fast_topk=fast_topk,
        early_shared=early_shared,
        deep_experts=deep_experts,
        routing_in_experts=routing_in_experts,
        tma_experts=tma_experts,
        fused_mla_glue=fused_mla_glue,
        norm_epilogue=norm_epilogue,
        kda_norm_in_oproj=kda_norm_in_oproj,
    )


class FastForward:
    """One decode token through the packed model with the chosen options.

    Args:
        pack: packed weights and cache views.
        meta: the decode metadata buffers (read: raw/positions/seq_lens/cos/sin; written: next_token).
        opts: kernel-level switches.

    Attributes:
        logits: `[1, V]` fp32 logits of the last step (static buffer).
        residual: `[1, D]` residual stream buffer, updated in place through the layers.
    """

    def __init__(self, pack: ModelPack, meta: DecodeMetadata, opts: StepOptions) -> None:
        self.pack = pack
        self.meta = meta
        self.opts = opts
        embed = pack.embed
        self.dtype = embed.dtype
        self.lm_head = pack.lm_head(opts.bf16_lm_head)
        self.logits = torch.zeros(1, self.lm_head.shape[0], dtype=torch.float32, device=embed.device)
        self.residual = torch.zeros(1, embed.shape[1], dtype=embed.dtype, device=embed.device)
        # Per MoE layer: routing buffers and the fused router's ticket counter (must persist across replays).
        self.workspaces: dict[int, MoEWorkspace] = {}
        for layer in pack.layers:
            if isinstance(layer.mlp, MoEPack):
                weights = layer.mlp.with_router(opts.bf16_gate)
                self.workspaces[layer.index] = MoEWorkspace.allocate(1, weights, pack.rule)
        # norm_epilogue: one ticket counter per norm site (2 a layer: after attention, after the MLP),
        # allocated once here so every CUDA-graph replay finds them re-armed at 0.
        self.norm_counters = torch.zeros(2 * len(pack.layers), dtype=torch.int32, device=embed.device)

    def _norm(self, contribution: torch.Tensor, weight: torch.Tensor, first: bool = False) -> torch.Tensor:
        """residual += contribution (first: residual = contribution); returns RMSNorm(residual) `[1, D]`."""
        normed = torch.empty(self.residual.shape, dtype=self.dtype, device=self.residual.device)
        add_rmsnorm(
            contribution,
            None if first else self.residual,
            weight,
            self.opts.eps,
            use_pdl=self.opts.use_pdl,
            out=normed,
            residual_out=self.residual,
        )
        return normed

    def _epilogue(self, weight: torch.Tensor, site: int) -> NormEpilogue | None:
        """The add + RMSNorm with `weight` for the producing launch's epilogue (`norm_epilogue`), or None
        (the caller runs `_norm`). `site`: this norm's own ticket counter."""
        if not self.opts.norm_epilogue:
            return None
        normed = torch.empty(self.residual.shape, dtype=self.dtype, device=self.residual.device)
        counter = self.norm_counters[site : site + 1]
        return NormEpilogue(self.residual, weight, normed, counter, self.opts.eps)

    def _layer(self, layer: LayerPack, normed: torch.Tensor, next_norm: torch.Tensor) -> torch.Tensor:
        """One decoder layer from its input-normed hidden to the next layer's input-normed hidden."""
        post_attention = self._epilogue(layer.post_attention_norm, 2 * layer.index)
        if isinstance(layer.attention, KDAPack):
            attn = kda_block(layer.attention, normed, self.opts, post_attention)
        else:
            attn = mla_block(layer.attention, normed, self.meta, self.opts, post_attention)
        normed = attn if post_attention is not None else self._norm(attn, layer.post_attention_norm)
        after_mlp = self._epilogue(next_norm, 2 * layer.index + 1)
        if isinstance(layer.mlp, MoEPack):
            workspace = self.workspaces[layer.index]
            mlp = moe_block(layer.mlp, normed, self.pack.rule, workspace, self.opts, after_mlp)
        else:
            mlp = dense_block(layer.mlp, normed, self.opts, after_mlp)
        return mlp if after_mlp is not None else self._norm(mlp, next_norm)

    def __call__(self) -> None:
        """Run one token: reads meta.raw / positions / seq_lens / cos / sin, writes next_token and logits."""
        layers = self.pack.layers
        # [1, D] embedding row of the input token, gathered on device.
        hidden = torch.index_select(self.pack.embed, 0, self.meta.input_ids)
        normed = self._norm(hidden, layers[0].input_norm, first=True)
        for position, layer in enumerate(layers):
            last = position + 1 == len(layers)
            next_norm = self.pack.final_norm if last else layers[position + 1].input_norm
            normed = self._layer(layer, normed, next_norm)
        lm_head_greedy(
            normed,
            self.lm_head,
            use_pdl=self.opts.use_pdl,
            logits=self.logits,
            tokens=self.meta.next_token,
            config=interpreter_gemv_config(*self.lm_head.shape),
        )
