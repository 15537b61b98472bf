"""MoE of a verify / draft window on the Triton MoE kernels (kernels/moe): no host read, M <= 16 rows.

The eager MoE either reads per-expert counts to the host (above `gather_max_rows`) or gathers one
copy of every selected expert per (token, slot); neither is what a serving engine runs in a verify.
The MoE kernels take M <= 16 token rows and stream each (token, slot) expert tile from the stacked
weights (the fast path's packing, shared with it: packing re-points the module's parameters, no copy
is kept). Routing happens inside the kernels, so the distinct-expert count is read from the
workspace's ids; with the routing-overlap knob on, the unfused launches run so the correlated ids
can be written between routing and experts. `config` carries the fast path's MoE switches into the
window: `fast_topk` routes each row with the packed-key routine (the window's rows are routed by their
own grid-(M) launch, fused or with the overlap knob), `early_shared` computes the shared expert's
gate/up before the experts launch waits for routing, `expert_union` streams each distinct expert of the
window once for all the rows that chose it (kernels/moe/union_kernel.py).
"""

from __future__ import annotations

import torch
from bubblescope.kernels._pdl import resolve_pdl
from bubblescope.kernels.moe import MoEWeights, MoEWorkspace, RoutingRule, moe_fused
from bubblescope.kernels.moe.launch import (
    launch_router_and_routing,
    launch_swiglu_experts,
    launch_union_experts,
    union_applies,
)
from bubblescope.kernels.moe.params import FusedMoEConfig

from bubblescope.errors import ConfigError

from ..fast.packing import MoEPack, pack_moe
from ..model import LingForCausalLM
from ..moe import MoE
from .routing import RoutingProbe

MAX_ROWS = 16


class KernelMoE:
    """Callable `(moe, normed [1, T, D]) -> [1, T, D]` running one MoE block on the MoE kernels.

    Args:
        model: the target (its config gives the routing rule).
        use_pdl: PDL for the kernels where the device supports it.
        probe: records the routed ids of verify windows and applies its overlap knob.
    """

    def __init__(
        self, model: LingForCausalLM, use_pdl: bool = False, probe: RoutingProbe | None = None
    ) -> None:
        config = model.config
        self.rule = RoutingRule(
            top_k=config.num_experts_per_tok,
            n_group=config.n_group,
            topk_group=config.topk_group,
            scale=config.routed_scaling_factor,
            renormalize=True,
        )
        self.use_pdl = use_pdl
        self.bf16_gate = False
        # Tiles and the fast_topk / early_shared switches (SpecWorkload.prepare sets it per setting).
        self.config = FusedMoEConfig()
        self.probe = probe
        self._packs: dict[int, MoEPack] = {}
        self._workspaces: dict[tuple[int, int], MoEWorkspace] = {}

    def pack_all(self, model: LingForCausalLM) -> None:
        """Pack every MoE of the model now, while its routers still hold the fp32 masters."""
        for module in model.modules():
            if isinstance(module, MoE):
                self._weights_of(module)

    def _weights_of(self, moe: MoE) -> MoEWeights:
        """Stacked weights; the router is the fp32 master or its bf16 copy (`bf16_gate`)."""
        key = id(moe)
        if key not in self._packs:
            self._packs[key] = pack_moe(moe)
        return self._packs[key].with_router(self.bf16_gate)

    def _workspace(self, moe: MoE, rows: int, weights: MoEWeights) -> MoEWorkspace:
        key = (id(moe), rows)
        if key not in self._workspaces:
            self._workspaces[key] = MoEWorkspace.allocate(rows, weights, self.rule)
        return self._workspaces[key]

    def __call__(self, moe: MoE, normed: torch.Tensor) -> torch.Tensor:
        rows = normed.shape[0] * normed.shape[1]
        if rows > MAX_ROWS:
            raise ConfigError(f"verify window of {rows} tokens exceeds the MoE kernels' {MAX_ROWS} rows")
        # [T, D]
        flat = normed.reshape(rows, -1).contiguous()
        weights = self._weights_of(moe)
        workspace = self._workspace(moe, rows, weights)
        recording = self.probe is not None and self.probe.active
        if recording and self.probe.overlap > 0:
            out = self._unfused_with_overlap(flat, weights, workspace)
        else:
            out = moe_fused(
                flat, weights, self.rule, use_pdl=self.use_pdl, workspace=workspace, config=self.config
            )
        if recording:
            self.probe.record(workspace.ids.to(torch.long))
        return out.to(normed.dtype).view(normed.shape)

    def _unfused_with_overlap(
        self, flat: torch.Tensor, weights: MoEWeights, ws: MoEWorkspace
    ) -> torch.Tensor:
        pdl = resolve_pdl(self.use_pdl, flat.device)
        launch_router_and_routing(flat, weights, self.rule, ws, pdl, self.config.fast_topk, self.config)
        ws.ids.copy_(self.probe.correlate(ws.ids.to(torch.long)).to(ws.ids.dtype))
        if union_applies(flat, weights, self.config):
            # The union launch accumulates with atomics: it needs a zeroed output.
            out = torch.zeros(flat.shape, dtype=torch.float32, device=flat.device)
            launch_union_experts(flat, weights, self.rule, ws, self.config, out, pdl)
            return out
        out = torch.empty(flat.shape, dtype=torch.float32, device=flat.device)
        launch_swiglu_experts(flat, weights, self.rule, ws, out, pdl)
        return out
