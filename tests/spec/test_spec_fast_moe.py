"""The MoE switches of the speculative verify window: `fast_topk`, `early_shared` (the fast path's) and
`expert_union` (each distinct expert of the window streamed once).

CPU: the Triton kernels run on the interpreter (tests/spec/conftest.py). The window's rows are routed
by the parallel routing launch (more rows than FusedMoEConfig.serial_route_max_rows), so these check
that launch with the packed-key routine at M = window rows, and that the whole speculative loop emits
the same tokens with the switches on as off. GPU: the same loop on CUDA, eager and graphed.
"""

from __future__ import annotations

import pytest
import torch
from bubblescope.kernels.kda_verify import triton_usable
from bubblescope.kernels.moe.naive import route_naive
from bubblescope.kernels.moe.params import FusedMoEConfig
from bubblescope.reference_model.config import get_preset
from bubblescope.reference_model.init import build_model
from bubblescope.reference_model.moe import MoE
from bubblescope.reference_model.spec.routing import RoutingProbe
from bubblescope.reference_model.spec.verify_moe import KernelMoE
from bubblescope.reference_model.spec.workload import SpecWorkload

from .helpers import max_abs_diff

NEW_SWITCHES = ("fast_topk", "early_shared", "expert_union")
# A DSpark window at block 9 (anchor + 9 drafts), the shape bench_spec times at accept length 9.95.
WINDOW_ROWS = 10


def needs_triton() -> None:
    if not torch.cuda.is_available() and not triton_usable(torch.device("cpu")):
        pytest.skip("needs CUDA or TRITON_INTERPRET=1 (set by tests/spec/conftest.py without CUDA)")


@pytest.mark.parametrize(
    ("fast_topk", "early_shared", "expert_union"),
    [(True, False, False), (True, True, True), (False, False, True)],
)
def test_verify_window_routes_like_route_naive(
    fast_topk: bool, early_shared: bool, expert_union: bool
) -> None:
    """Every row of a 10-token window: the kernels' ids equal route_naive on the kernels' own logits
    (selection order included), and the window's MoE output equals the eager module's; with the
    routing-overlap knob (unfused launches) the first row, which the knob never rewrites, too."""
    needs_triton()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = build_model(get_preset("debug"), device, seed=0)
    moe = next(layer.mlp for layer in model.main_layers if isinstance(layer.mlp, MoE))
    generator = torch.Generator().manual_seed(3)
    normed = torch.randn(1, WINDOW_ROWS, model.config.hidden_size, generator=generator).to(device)
    runner = KernelMoE(model, probe=RoutingProbe(model))
    runner.config = FusedMoEConfig(fast_topk=fast_topk, early_shared=early_shared, expert_union=expert_union)
    with runner.probe.recording():
        got = runner(moe, normed)
    workspace = runner._workspaces[(id(moe), WINDOW_ROWS)]
    want_ids, _ = route_naive(workspace.logits, moe.gate.expert_bias, runner.rule)
    assert torch.equal(workspace.ids.long(), want_ids), "window routing differs from route_naive"
    assert max_abs_diff(got, moe(normed)) < 1e-5
    # The overlap knob's path (routing launch, ids rewritten, expert launches) with the same switch.
    runner.probe.overlap = 0.5
    with runner.probe.recording():
        runner(moe, normed)
    want_ids, _ = route_naive(workspace.logits, moe.gate.expert_bias, runner.rule)
    first = runner.probe.records[-1][0][0]
    assert torch.equal(first, want_ids[0]), "the first row is never rewritten by the knob"


def spec_tokens(spec: str, block: int, steps: int, settings: list[frozenset[str]]) -> None:
    """Run the debug preset's speculative loop (MoE on the kernels, seeded oracle) for each setting;
    assert each emits the tokens of the first."""
    needs_triton()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    workload = SpecWorkload(
        get_preset("debug"),
        device,
        spec=spec,
        block=block,
        accept_len=min(3.0, block + 1.0),
        max_steps=16,
        kernel_moe=True,
        graphs=False,
    )
    reference = None
    for enabled in settings:
        workload.prepare(enabled)
        assert workload.moe_runner.config.fast_topk == ("fast_topk" in enabled)
        assert workload.moe_runner.config.early_shared == ("early_shared" in enabled)
        assert workload.moe_runner.config.expert_union == ("expert_union" in enabled)
        for _ in range(steps):
            workload.step()
        tokens = workload.tokens()
        assert len(tokens) > steps
        reference = reference or tokens
        assert tokens == reference, f"{sorted(enabled)}: tokens differ from {sorted(settings[0])}"


@pytest.mark.slow
def test_spec_tokens_equal_with_fast_moe_switches_on_and_off() -> None:
    """DSpark, block 2, two steps: the three switches on emit the tokens of all off (interpreter;
    12 s of CPU, 25 s on a busy 2-core box, hence slow)."""
    spec_tokens("dspark", 2, 2, [frozenset(), frozenset(NEW_SWITCHES)])


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["dspark", "nextn"])
def test_spec_tokens_equal_with_each_fast_moe_switch(spec: str) -> None:
    """Block 4, four steps: off, each switch alone and all on emit the same tokens (~2 min each on
    the interpreter)."""
    settings = [frozenset(), *(frozenset({name}) for name in NEW_SWITCHES), frozenset(NEW_SWITCHES)]
    spec_tokens(spec, 4, 4, settings)


@pytest.mark.gpu
@pytest.mark.parametrize("spec", ["nextn", "dspark"])
def test_gpu_spec_tokens_equal_with_fast_moe_switches(spec: str) -> None:
    """debug preset on CUDA, eager and graphed step, PDL and every KDA switch on: the new switches
    change no token (30 tokens of a seeded oracle run)."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    base = frozenset({"pdl", "staged_kda", "fused_kda_verify", "no_readback"})
    reference = None
    for graphs in (False, True):
        workload = SpecWorkload(
            get_preset("debug"), "cuda", spec=spec, block=4, accept_len=3.0, max_steps=64, graphs=graphs
        )
        for extra in ((), *((name,) for name in NEW_SWITCHES), NEW_SWITCHES):
            workload.prepare(base | set(extra))
            for _ in range(16):
                workload.step()
            workload.decoder.drain()
            tokens = workload.tokens()[:30]
            reference = reference or tokens
            assert tokens == reference, f"graphs={graphs} +{extra}: tokens differ"
