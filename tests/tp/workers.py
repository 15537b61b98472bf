"""Rank entry points the TP tests spawn (importable by name, so spawned children can find them).

Each rank writes its result as JSON to `out_dir/rank<r>.json`: no queues, nothing pickled back.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

PROMPT = list(range(3, 19))


FAST_STEPS = 2


def exit_without_teardown() -> None:
    """End a rank that finished its work (results on disk, group destroyed) with exit code 0.

    With Triton loaded, about one exit in four aborts in C++ static destruction ("terminate called
    without an active exception", no Python frame) after everything is done; the launcher's ranks
    leave the same way (capture/tp_processes.py).
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# (spec kind, oracle accept length or None = the draft's own acceptance), block 4, SPEC_STEPS steps
SPEC_CASES = (("dspark", 4.0), ("dspark", None), ("nextn", None))
SPEC_STEPS = 4
# On the MoE kernels (interpreted on the CPU, ~10x slower): the oracle case and NEXTN, whose draft
# runs the MTP layer's MoE through the runner too.
KERNEL_MOE_CASES = (("dspark", 4.0), ("nextn", None))


def spec_tokens(
    make: object,
    case: tuple[str, float | None],
    kernel_moe: bool = False,
    enabled: frozenset[str] = frozenset(),
    graphs: bool | None = None,
) -> list[int]:
    """Tokens of a spec workload made by `make(spec=, block=, accept_len=, max_steps=)`, prepared with
    `enabled`, after SPEC_STEPS; checks the path under test really ran: kernel MoE (or the eager module
    and its all-reduce hook) and, when `graphs` is given, whether the step's CUDA graphs were captured."""
    spec, accept_len = case
    workload = make(spec=spec, block=4, accept_len=accept_len, max_steps=8)  # type: ignore[operator]
    assert workload.describe()["kernel_moe"] is kernel_moe
    if enabled:
        workload.prepare(enabled)
    for _ in range(SPEC_STEPS):
        workload.step()
    if graphs is not None:
        captured = workload.decoder.graphs is not None and workload.decoder.graphs.captures > 0
        assert captured == graphs, f"{spec}: graphs captured {captured}, expected {graphs}"
    return workload.tokens()


def tokens_worker(rank: int, world_size: int, port: int, out_dir: str, steps: int, fast: bool) -> None:
    """Join a gloo group, build this rank's debug shard, decode greedily, write tokens + prefill logits;
    with `fast`, also FAST_STEPS steps of the fast path (Triton interpreter) at TP."""
    # before anything imports triton: the fast path needs the interpreter; the eager path is faster without
    os.environ["TRITON_INTERPRET"] = "1" if fast else "0"
    import torch

    torch.set_num_threads(1)
    os.environ.update(
        RANK=str(rank), WORLD_SIZE=str(world_size), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)
    )
    from bubblescope.reference_model.config import get_preset
    from bubblescope.reference_model.generate import generate
    from bubblescope.reference_model.tp.build import build_tp_model
    from bubblescope.reference_model.tp.decode import new_tp_cache, tp_generate
    from bubblescope.reference_model.tp.distributed import init_tp_from_env, shutdown
    from bubblescope.reference_model.tp.lm_head import local_logits

    comm = init_tp_from_env("cpu")
    try:
        model = build_tp_model(get_preset("debug"), comm, seed=0)
        tokens = tp_generate(model, PROMPT, steps)
        # the one-GPU loop, unchanged, on the TP model (compute_logits gathers the full row)
        plain_tokens = generate(model, PROMPT, steps)
        cache = new_tp_cache(model, len(PROMPT))
        with torch.no_grad():
            hidden = model.forward_hidden(torch.tensor([PROMPT]), cache).final
            # [V / TP] this rank's slice of the last position's logits; [V] the gathered full row
            local = local_logits(model, hidden)[0, -1]
            full = model.compute_logits(hidden)[0, -1]
        result = {
            "rank": rank,
            "tokens": tokens,
            "plain_generate_tokens": plain_tokens,
            "vocab_start": int(model.vocab_start),
            "local_logits": local.tolist(),
            "full_logits": full.tolist(),
            "kda_heads": model.config.num_attention_heads,
            "env": {
                key: os.environ.get(key) for key in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST")
            },
        }
        if fast:
            from bubblescope.reference_model.tp.workload import make_tp_workload

            workload = make_tp_workload(comm, "debug", max_steps=8, path="fast")
            for _ in range(FAST_STEPS):
                workload.step()
            result["fast_tokens"] = workload.tokens()
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(result))
    finally:
        shutdown()
    exit_without_teardown()


def _phase(rank: int, name: str) -> None:
    """Progress on stderr (shown live with `pytest -s`): where a rank stands when a run hangs."""
    print(f"[rank {rank}] {name}", file=sys.stderr, flush=True)


def gpu_worker(rank: int, world_size: int, port: int, out_dir: str, steps: int) -> None:
    """NCCL rank on cuda:<rank>: greedy tokens, a graphed step per all-reduce kind, kind equivalence."""
    import torch
    from bubblescope.reference_model.config import get_preset
    from bubblescope.reference_model.tp.build import build_tp_model
    from bubblescope.reference_model.tp.decode import new_tp_cache, tp_decode_step, tp_generate, tp_prefill
    from bubblescope.reference_model.tp.distributed import init_tp_from_env, set_local_rank_env, shutdown
    from bubblescope.reference_model.tp.graph import capture_decode_step

    set_local_rank_env(rank, world_size, port)
    # A rank that fails leaves its peer inside a collective: a short timeout ends the peer soon, and
    # the error file tells the test which rank failed and why (a spawned child's traceback is
    # otherwise only printed once every rank has exited).
    comm = init_tp_from_env("cuda", timeout_s=90)
    try:
        model = build_tp_model(get_preset("debug"), comm, seed=0)
        _phase(rank, "built; generating")
        result: dict = {"rank": rank, "tokens": tp_generate(model, PROMPT, steps), "graph": {}, "sums": {}}
        prompt = torch.tensor([PROMPT], device=comm.device)
        for label, fast in (("nccl", False), ("fast", True)):
            _phase(rank, f"graph capture with {label}")
            comm.use_fast(fast)
            cache = new_tp_cache(model, len(PROMPT) + 4)
            first = int(tp_prefill(model, prompt, cache).item())
            captured = capture_decode_step(model, cache, first)
            eager = int(tp_decode_step(model, torch.tensor([[first]], device=comm.device), cache).item())
            captured.restore()
            captured.graph.replay()
            result["graph"][label] = {
                "first": first,
                "eager": eager,
                "replayed": int(captured.next_ids.item()),
            }
        from bubblescope.reference_model.tp.fast import TP_FAST_SWITCHES
        from bubblescope.reference_model.tp.workload import make_tp_workload

        del model
        _phase(rank, "fast path")
        fast_path = make_tp_workload(comm, "debug", max_steps=16, path="fast")
        result["fast_path"] = {}
        for label, enabled in (("off", frozenset()), ("all_on", frozenset(TP_FAST_SWITCHES))):
            _phase(rank, f"fast path {label}")
            fast_path.prepare(enabled)
            for _ in range(steps // 2):
                fast_path.step()
            result["fast_path"][label] = fast_path.tokens()
        # integer-valued bf16 rows: every kind's sum is exact, so kinds must agree bit for bit
        data = torch.arange(2560, device=comm.device).remainder(7 + rank).to(torch.bfloat16)
        for label, fast in (("nccl", False), ("fast", True)):
            comm.use_fast(fast)
            result["sums"][label] = comm.all_reduce(data.clone()).float().sum().item()
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(result))
    except Exception:
        import traceback

        _phase(rank, f"failed:\n{traceback.format_exc()}")
        Path(out_dir, f"rank{rank}.error.txt").write_text(traceback.format_exc())
        sys.stderr.flush()
        os._exit(1)
    finally:
        shutdown()
    exit_without_teardown()


def spec_worker(rank: int, world_size: int, port: int, out_dir: str, kernel_moe: bool = False) -> None:
    """Speculative decoding at TP: tokens of every SPEC_CASES entry (eager MoE), or with `kernel_moe`
    of KERNEL_MOE_CASES on the MoE kernels (Triton interpreter), where TPKernelMoE all-reduces."""
    # the eager spec path picks its PyTorch backends without the interpreter (much faster on the CPU)
    os.environ["TRITON_INTERPRET"] = "1" if kernel_moe else "0"
    import torch

    torch.set_num_threads(1)
    os.environ.update(
        RANK=str(rank), WORLD_SIZE=str(world_size), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)
    )
    from functools import partial

    from bubblescope.reference_model.config import get_preset
    from bubblescope.reference_model.spec.workload import SpecWorkload
    from bubblescope.reference_model.tp.distributed import init_tp_from_env, shutdown
    from bubblescope.reference_model.tp.spec import make_tp_spec_workload

    comm = init_tp_from_env("cpu")
    cases = KERNEL_MOE_CASES if kernel_moe else SPEC_CASES
    try:
        make_spec = partial(make_tp_spec_workload, comm, "debug", kernel_moe=kernel_moe)
        result: dict = {
            "rank": rank,
            "spec_tokens": [spec_tokens(make_spec, case, kernel_moe) for case in cases],
        }
        if rank == 0:
            # TP=1: the plain one-GPU spec workload, here too (pytest's process runs Triton interpreted)
            make_plain = partial(SpecWorkload, get_preset("debug"), "cpu", kernel_moe=kernel_moe)
            result["tp1_spec_tokens"] = [spec_tokens(make_plain, case, kernel_moe) for case in cases]
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(result))
    finally:
        shutdown()
    exit_without_teardown()


def sleep_worker(rank: int, seconds: float) -> None:
    """A rank that only sleeps (stands for one stuck in a kernel)."""
    import time

    time.sleep(seconds)


# Spec at TP on GPUs: (label, switches, CUDA graphs) per case of KERNEL_MOE_CASES.
GPU_SPEC_SETTINGS = (
    ("off_eager", frozenset(), False),
    ("off_graphs", frozenset(), True),
    (
        "all_on_graphs",
        frozenset({"staged_kda", "fused_kda_verify", "no_readback", "pdl", "fast_allreduce"}),
        True,
    ),
)


def gpu_spec_worker(rank: int, world_size: int, port: int, out_dir: str) -> None:
    """Speculative decoding at TP on cuda:<rank>: MoE kernels + TPKernelMoE, with and without the
    step's CUDA graphs (thread-local capture of NCCL or one-shot all-reduces), tokens per setting."""
    from functools import partial

    from bubblescope.reference_model.tp.distributed import init_tp_from_env, set_local_rank_env, shutdown
    from bubblescope.reference_model.tp.spec import make_tp_spec_workload

    set_local_rank_env(rank, world_size, port)
    comm = init_tp_from_env("cuda", timeout_s=90)
    result: dict = {"rank": rank, "tokens": {}}
    try:
        for label, enabled, graphs in GPU_SPEC_SETTINGS:
            _phase(rank, f"spec {label}")
            make = partial(make_tp_spec_workload, comm, "debug", kernel_moe=True, graphs=graphs)
            for case in KERNEL_MOE_CASES:
                tokens = spec_tokens(make, case, kernel_moe=True, enabled=enabled, graphs=graphs)
                result["tokens"][f"{label}/{case[0]}"] = tokens
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(result))
    except Exception:
        import traceback

        Path(out_dir, f"rank{rank}.error.txt").write_text(traceback.format_exc())
        sys.stderr.flush()
        os._exit(1)
    finally:
        shutdown()
    exit_without_teardown()
