"""TP=2 on two GPUs (NCCL): TP=1 tokens (eager and fast path), a decode step captured in a CUDA graph
with each all-reduce, and the one-shot all-reduce equal to NCCL."""

from __future__ import annotations

import json
import sys

import pytest
import torch
import torch.multiprocessing as mp
from bubblescope.kernels.allreduce import apply_no_multicast_env
from bubblescope.reference_model.config import get_preset
from bubblescope.reference_model.generate import generate
from bubblescope.reference_model.init import build_model
from bubblescope.reference_model.tp.distributed import free_port, join_within
from bubblescope.reference_model.workload import make_workload

from tests.tp.workers import PROMPT, gpu_worker

STEPS = 16
# Generous: the ranks decode a few dozen debug-preset steps and capture three small graphs.
RANKS_DEADLINE_S = 150


@pytest.mark.gpu
def test_tp2_on_gpus_matches_tp1_and_graphs_capture_the_collectives(tmp_path):
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    print("[test] TP=1 references on cuda:0", file=sys.stderr, flush=True)
    reference = build_model(get_preset("debug"), "cuda:0", seed=0)
    want = generate(reference, PROMPT, STEPS)
    del reference
    # TP=1 eager workload (its own seeded prompt): what the TP fast path must reproduce
    workload = make_workload("debug", "cuda:0", path="eager", max_steps=16)
    want_workload = {}
    # all_on's numerics-changing switches are bf16_gate and bf16_lm_head; the rest are exact
    for label, enabled in (("off", frozenset()), ("all_on", frozenset({"bf16_gate", "bf16_lm_head"}))):
        workload.prepare(enabled)
        for _ in range(STEPS // 2):
            workload.step()
        want_workload[label] = workload.tokens()
    del workload
    apply_no_multicast_env()
    print("[test] starting 2 ranks", file=sys.stderr, flush=True)
    context = mp.start_processes(
        gpu_worker, args=(2, free_port(), str(tmp_path), STEPS), nprocs=2, start_method="spawn", join=False
    )
    try:
        # A kernel-level hang outlives NCCL's timeout: fail with the ranks' last phase (stderr) instead.
        if not join_within(context, RANKS_DEADLINE_S):
            pytest.fail(f"TP ranks still running after {RANKS_DEADLINE_S} s (see their phases on stderr)")
    except (mp.ProcessRaisedException, mp.ProcessExitedException) as exc:
        errors = [p.read_text() for p in sorted(tmp_path.glob("rank*.error.txt"))]
        pytest.fail(f"a TP rank failed: {exc}\n" + "\n".join(errors))
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    for result in results:
        assert result["tokens"] == want, f"rank {result['rank']}: TP=2 tokens differ from TP=1"
        for label, graph in result["graph"].items():
            assert graph["first"] == want[0]
            assert graph["eager"] == want[1], f"{label}: eager step after prefill is not TP=1's token"
            assert graph["replayed"] == graph["eager"], f"{label}: graph replay differs from the eager step"
        assert result["sums"]["fast"] == result["sums"]["nccl"], "one-shot all-reduce differs from NCCL"
        for label, tokens in result["fast_path"].items():
            assert tokens == want_workload[label], (
                f"fast path at TP=2 ({label}) differs from the TP=1 workload"
            )


@pytest.mark.gpu
def test_spec_at_tp2_on_kernels_and_graphs_matches_tp1(tmp_path):
    """Spec at TP=2 with the MoE kernels (TPKernelMoE) and the step captured in CUDA graphs: every
    setting emits TP=1's tokens (debug preset, fp32), and the ranks leave their group."""
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    from functools import partial

    from bubblescope.reference_model.spec.workload import SpecWorkload

    from tests.tp.workers import GPU_SPEC_SETTINGS, KERNEL_MOE_CASES, gpu_spec_worker, spec_tokens

    # TP=1 on its defaults on CUDA: MoE kernels and the step's graphs, as the ranks run them
    make_tp1 = partial(SpecWorkload, get_preset("debug"), "cuda:0")
    want = {case[0]: spec_tokens(make_tp1, case, kernel_moe=True, graphs=True) for case in KERNEL_MOE_CASES}
    apply_no_multicast_env()
    context = mp.start_processes(
        gpu_spec_worker, args=(2, free_port(), str(tmp_path)), nprocs=2, start_method="spawn", join=False
    )
    try:
        if not join_within(context, RANKS_DEADLINE_S):
            pytest.fail(
                f"TP spec ranks still running after {RANKS_DEADLINE_S} s (see their phases on stderr)"
            )
    except (mp.ProcessRaisedException, mp.ProcessExitedException) as exc:
        errors = [p.read_text() for p in sorted(tmp_path.glob("rank*.error.txt"))]
        pytest.fail(f"a TP rank failed: {exc}\n" + "\n".join(errors))
    for rank in (0, 1):
        tokens = json.loads((tmp_path / f"rank{rank}.json").read_text())["tokens"]
        for label, _enabled, _graphs in GPU_SPEC_SETTINGS:
            for spec, _accept in KERNEL_MOE_CASES:
                assert tokens[f"{label}/{spec}"] == want[spec], (
                    f"rank {rank} {label} {spec}: not TP=1's tokens"
                )
