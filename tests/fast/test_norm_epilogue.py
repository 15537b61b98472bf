"""`norm_epilogue` on vs off on the fast path (CPU: Triton interpreter, trimmed debug preset).

Stated tolerance: on the interpreter the switch is bit for bit at this preset's hidden size of 64 (one
epilogue chunk: the epilogue runs add_rmsnorm's math in the same order, and numpy reduces sum(r^2) the
same way in both), so first-step logits are asserted EQUAL and the greedy tokens the same. Rows wider
than one chunk (512) sum r^2 in another order (tests/kernels/test_norm_epilogue.py bounds that), and so
do the GPU's warps (an fp32 rounding of rstd): tests/fast/test_norm_epilogue_gpu.py states the GPU's.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
from bubblescope.reference_model.fast.workload import FastLingWorkload

from .helpers import TRIMMED

STEPS = 4
SWITCH = "norm_epilogue"


@contextmanager
def counted_launches() -> Iterator[collections.Counter[str]]:
    """Triton launches by kernel name while the block runs (interpreter: every launch goes through
    InterpretedFunction.run)."""
    from triton.runtime.interpreter import InterpretedFunction

    counts: collections.Counter[str] = collections.Counter()
    original = InterpretedFunction.run

    def run(self, *args, **kwargs):
        counts[self.fn.__name__] += 1
        return original(self, *args, **kwargs)

    InterpretedFunction.run = run
    try:
        yield counts
    finally:
        InterpretedFunction.run = original


@pytest.fixture(scope="module")
def trimmed() -> FastLingWorkload:
    return FastLingWorkload(TRIMMED, "cpu", seed=0, prompt_len=8, max_steps=STEPS)


def decode(workload: FastLingWorkload, enabled: frozenset[str]) -> tuple[torch.Tensor, list[int], dict]:
    """(first step's logits, tokens of STEPS steps, Triton launches of the first step by kernel)."""
    workload.prepare(enabled)
    with counted_launches() as counts:
        workload.step()
    logits = workload.decoder.forward.logits.clone()
    for _ in range(STEPS - 1):
        workload.step()
    return logits, workload.tokens(), dict(counts)


def expected_norms_moved() -> int:
    """Norms that go into a producer's epilogue per step: after every attention block and every MLP
    (dense FFN or MoE): all but the first layer's input norm (the embedding row is no launch's output)."""
    return 2 * TRIMMED.num_hidden_layers


@pytest.mark.interpreter
@pytest.mark.parametrize(
    "base",
    [frozenset(), frozenset({"fused_moe", "fast_topk", "early_shared", "deep_experts"})],
    ids=["unfused_moe", "fused_moe_deep_experts"],
)
def test_norm_epilogue_keeps_logits_tokens_and_drops_launches(trimmed: FastLingWorkload, base) -> None:
    off_logits, off_tokens, off_launches = decode(trimmed, base)
    on_logits, on_tokens, on_launches = decode(trimmed, base | {SWITCH})
    assert len(set(off_tokens)) > STEPS // 2, off_tokens  # not a stuck model
    assert on_tokens == off_tokens
    assert torch.equal(on_logits, off_logits), float((on_logits - off_logits).abs().max())
    moved = expected_norms_moved()
    assert off_launches["add_rmsnorm_kernel"] == moved + 1
    assert on_launches["add_rmsnorm_kernel"] == 1
    assert (
        on_launches["gemv_norm_epilogue_kernel"] == TRIMMED.num_hidden_layers + TRIMMED.first_k_dense_replace
    )
    assert sum(on_launches.values()) == sum(off_launches.values()) - moved, (on_launches, off_launches)


@pytest.mark.interpreter
def test_norm_epilogue_bf16_is_bit_for_bit(trimmed: FastLingWorkload) -> None:
    # bf16 residual and normed rows: the roundings the GPU runs (the epilogue stores them as add_rmsnorm).
    workload = FastLingWorkload(TRIMMED.with_(dtype="bfloat16"), "cpu", seed=1, prompt_len=5, max_steps=2)
    off, on = (decode_first(workload, enabled) for enabled in (frozenset(), frozenset({SWITCH})))
    assert torch.equal(on, off), float((on - off).abs().max())


def decode_first(workload: FastLingWorkload, enabled: frozenset[str]) -> torch.Tensor:
    workload.prepare(enabled)
    workload.step()
    return workload.decoder.forward.logits.clone()
