"""Speculative decoding at TP = N: the spec workload over a sharded target, from outside.

Everything the verify and draft paths call on the target is TP-aware already: attention output
projections (`o_proj`, `dense`) and `mlp` modules all-reduce through their hooks, and
`compute_logits` returns the gathered full row, so verify's argmax and the drafts' logits see the
whole vocabulary. Three things differ from one GPU:
- the draft model is replicated on every rank at the full target shape (built from `full_config`,
  not the rank's local config);
- the MoE kernels (`KernelMoE`, on CUDA by default as on one GPU) call the expert shard directly and
  so bypass the `mlp` hook: `TPKernelMoE` all-reduces their partial output itself;
- the step's CUDA graphs capture in thread-local mode, so NCCL's watchdog thread may keep polling.
Every rank runs the same loop with the same seeds, so drafts, oracle draws and accepted counts agree
without communication.
"""

from __future__ import annotations

from typing import Any

from bubblescope.workload import SwitchInfo

from ..config import get_preset
from ..model import LingForCausalLM
from ..spec.verify_moe import KernelMoE
from ..spec.workload import SpecWorkload
from .build import build_tp_model
from .comm import TPComm
from .workload import FAST_ALLREDUCE


class TPKernelMoE(KernelMoE):
    """KernelMoE on this rank's expert shard (I / TP rows), then the all-reduce of the partial sum.

    Args: as KernelMoE, plus `comm`.
    """

    def __init__(self, model: LingForCausalLM, comm: TPComm, **kwargs: Any) -> None:
        super().__init__(model, **kwargs)
        self.comm = comm

    def __call__(self, moe: Any, normed: Any) -> Any:
        # Reduced in the activation dtype, as the eager module's hook does.
        return self.comm.all_reduce(super().__call__(moe, normed))


class TPSpecWorkload(SpecWorkload):
    """SpecWorkload whose target is a TP shard; the draft is built at the full target shape.

    Adds the `fast_allreduce` switch (the target's all-reduces through the one-shot symmetric-memory
    kernel instead of NCCL, as on the greedy TP paths) and a `tp` block in describe().

    Args: as SpecWorkload, plus `comm` (this rank's communicator).
    """

    capture_error_mode = "thread_local"

    def __init__(self, *args: Any, comm: TPComm, **kwargs: Any) -> None:
        # Set before SpecWorkload.__init__, whose first prepare() selects the all-reduce.
        self.comm = comm
        super().__init__(*args, **kwargs)

    def _make_moe_runner(self) -> KernelMoE:
        return TPKernelMoE(self.model, self.comm, probe=self.probe)

    def switches(self) -> list[SwitchInfo]:
        return [*super().switches(), FAST_ALLREDUCE]

    def prepare(self, enabled: frozenset[str]) -> None:
        """Select the all-reduce, then the spec switches as on one GPU (prefill runs on the new one)."""
        enabled = frozenset(enabled)
        self.comm.use_fast(FAST_ALLREDUCE.name in enabled)
        super().prepare(enabled - {FAST_ALLREDUCE.name})
        self.enabled = enabled

    def describe(self) -> dict[str, object]:
        return {
            **super().describe(),
            "tp": self.comm.describe(),
        }

    def _make_draft(self, capacity: int, seed: int, draft_weights: str | None) -> Any:
        local = self.model.config
        # DSparkConfig.from_target reads the target config: the replicated draft needs the full one.
        self.model.config = getattr(self.model, "full_config", local)
        try:
            return super()._make_draft(capacity, seed, draft_weights)
        finally:
            self.model.config = local


def make_tp_spec_workload(
    comm: TPComm,
    preset: str = "debug",
    *,
    spec: str = "dspark",
    block: int = 8,
    accept_len: float | None = None,
    seed: int = 0,
    prompt_len: int = 16,
    max_steps: int = 256,
    routing_overlap: float = 0.0,
    model: LingForCausalLM | None = None,
    kernel_moe: bool | None = None,
    graphs: bool | None = None,
) -> TPSpecWorkload:
    """This rank's speculative-decoding workload at TP = comm.world_size.

    Args: as `spec.workload.make_spec_workload`; the target is `build_tp_model(preset, comm, seed)`,
        or `model` when given (a TP model of that preset, e.g. shared with a greedy workload).
        kernel_moe, graphs: as SpecWorkload (None: MoE kernels and CUDA graphs on CUDA, eager on CPU).
    """
    config = get_preset(preset)
    model = model if model is not None else build_tp_model(config, comm, seed=seed)
    return TPSpecWorkload(
        config,
        str(comm.device),
        spec=spec,
        block=block,
        accept_len=accept_len,
        seed=seed,
        prompt_len=prompt_len,
        max_steps=max_steps,
        routing_overlap=routing_overlap,
        model=model,
        kernel_moe=kernel_moe,
        graphs=graphs,
        comm=comm,
    )
