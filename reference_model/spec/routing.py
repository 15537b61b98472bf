"""Expert-union realism for verify: count the distinct experts a verify touches, and a knob for it.

A verify of T tokens reads the union of the experts its tokens route to (notes §2.3: up to
8T + 1 per MoE layer). Random weights route consecutive tokens independently, so the measured union
is an upper bound; trained models reuse experts across neighbouring tokens. The `overlap` knob makes
that explicit: during a verify, token n (n >= 1) keeps each of its k routing slots with probability
1 - overlap and otherwise takes the expert in the same slot of token n-1 (after n-1's own
substitution), keeping the slot's weight. The expected fraction of a token's experts shared with the
previous token is then about `overlap` (a little more when an own pick happens to coincide); the
realised fraction is measured and reported next to the union. overlap = 0 leaves routing untouched.
Draws happen on the device; counts are taken when the run is over, never on the critical path.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from bubblescope.errors import ConfigError

from ..model import LingForCausalLM
from ..moe import MoERouter


class RoutingProbe:
    """Forward hooks on the main layers' MoE routers, active only inside `recording()`.

    Args:
        model: the target.
        overlap: probability that a verify token copies the previous token's expert in a slot (0..1).
        generator: device generator for the overlap draws (None: default).
    """

    def __init__(
        self, model: LingForCausalLM, overlap: float = 0.0, generator: torch.Generator | None = None
    ) -> None:
        if not 0.0 <= overlap <= 1.0:
            raise ConfigError(f"routing overlap must be in [0, 1], got {overlap}")
        self.overlap = overlap
        self.num_experts = model.config.num_experts
        self.generator = generator
        self.active = False
        # one entry per verify: [moe_layers, T, k] expert ids (device)
        self.records: list[torch.Tensor] = []
        self._current: list[torch.Tensor] = []
        self._handles = []
        for layer in model.main_layers:
            router = getattr(layer.mlp, "gate", None)
            if isinstance(router, MoERouter):
                self._handles.append(router.register_forward_hook(self._hook))

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    @contextlib.contextmanager
    def recording(self) -> Iterator[None]:
        """Record (and correlate, with overlap > 0) the routing of the forward run inside."""
        self.active, self._current = True, []
        try:
            yield
        finally:
            self.active = False
            if self._current:
                self.records.append(torch.stack(self._current))

    def correlate(self, expert_ids: torch.Tensor) -> torch.Tensor:
        """[T, k] routed ids -> ids with the overlap knob applied (module docstring); device only."""
        if self.overlap <= 0.0 or expert_ids.shape[0] < 2:
            return expert_ids
        rows = [expert_ids[0]]
        draws = torch.rand(expert_ids.shape, device=expert_ids.device, generator=self.generator)
        for token in range(1, expert_ids.shape[0]):
            rows.append(torch.where(draws[token] < self.overlap, rows[-1], expert_ids[token]))
        return torch.stack(rows)

    def _hook(self, module: MoERouter, inputs: tuple, output: tuple[torch.Tensor, torch.Tensor]):
        if not self.active:
            return None
        expert_ids, weights = output
        expert_ids = self.correlate(expert_ids)
        self.record(expert_ids)
        return expert_ids, weights

    def record(self, expert_ids: torch.Tensor) -> None:
        """Keep one MoE layer's [T, k] ids of the verify being recorded (device tensor, no read)."""
        self._current.append(expert_ids.clone())

    def summary(self) -> dict[str, object]:
        """Distinct experts per verify per MoE layer (mean over verifies), and the realised overlap.

        Returns:
            {"verifies", "tokens_per_verify", "moe_layers", "distinct_experts_per_layer": [...] (mean over
             verifies), "distinct_experts_mean", "distinct_experts_min", "distinct_experts_max" (over every
             verify and layer), "distinct_experts_sum_by_verify" {mean, min, max} (a verify's distinct
             experts summed over its layers: what it streams), "upper_bound" (min(E, k*T)),
             "overlap_knob", "overlap_realised"}; empty counts before any verify.
        """
        if not self.records:
            return {"verifies": 0, "overlap_knob": self.overlap}
        stacked = torch.stack(self.records).cpu()  # [verifies, layers, T, k]
        verifies, layers, tokens, top_k = stacked.shape
        distinct = torch.zeros(verifies, layers)
        for v in range(verifies):
            for layer in range(layers):
                distinct[v, layer] = stacked[v, layer].unique().numel()
        shared = (stacked[:, :, 1:, :, None] == stacked[:, :, :-1, None, :]).any(-1).float().mean().item()
        per_layer = distinct.mean(0).tolist()
        by_verify = distinct.sum(1)
        return {
            "verifies": verifies,
            "tokens_per_verify": tokens,
            "moe_layers": layers,
            "distinct_experts_per_layer": [round(x, 2) for x in per_layer],
            "distinct_experts_mean": round(sum(per_layer) / len(per_layer), 2),
            "distinct_experts_min": int(distinct.min().item()),
            "distinct_experts_max": int(distinct.max().item()),
            "distinct_experts_sum_by_verify": {
                "mean": round(by_verify.mean().item(), 2),
                "min": int(by_verify.min().item()),
                "max": int(by_verify.max().item()),
            },
            "upper_bound": min(self.num_experts, tokens * top_k),
            "overlap_knob": self.overlap,
            "overlap_realised": round(shared, 3) if tokens > 1 else None,
        }
