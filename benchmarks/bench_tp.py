"""Tensor parallelism on N GPUs: all-reduce latency, TP=N vs TP=1 tokens, TP=N TPOT (tiny, then Flash).

Parts (each in try/except; each writes <out>/<part>.json on rank 0 as soon as it ends):
  allreduce   5 KB bf16 all-reduce in a CUDA graph: NCCL vs symmetric-memory one/two-shot
              (bench_allreduce.py's method: 84 per graph, minus the same graph without them).
  tokens      ling3-tiny greedy tokens at TP=N vs the plain TP=1 `build_model` + `generate` on GPU 0,
              in the preset's bf16 and in fp32 (bf16 summation order differs between TP=1 and TP=N,
              so a random-weight near-tie can flip a late token; fp32 must match), plus prefill logits
              max |diff|.
  tpot_tiny   ling3-tiny eager TPOT at TP=N (rank 0's step loop, ranks in lockstep): baseline, each
              switch alone, all on; and TP=1 on GPU 0 for comparison.
  flash       ling3-flash (full, ~124 GB per GPU at TP=2): shard build time, a few decode steps,
              TPOT on the fast path with every switch off / alone / all on, and speculative decoding
              (DSpark-shaped draft, oracle acceptance --spec-accept-len, eager verify) on the same shard.
  tpot_tiny and flash also capture one decode step in a CUDA graph (both all-reduces per layer and
  the argmax all-gather inside) with NCCL and with fast_allreduce: the replay must give the eager
  token, and the median replay time is one step's device time with no host in the loop.

Usage (2 H200s, ~5 minutes):
    python benchmarks/bench_tp.py --world-size 2 --out benchmarks/out/tp
    python benchmarks/bench_tp.py --parts allreduce,tokens      # a subset
Every process runs with NVLink multicast off (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
NVSHMEM_DISABLE_NVLS=1).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bubblescope.reference_model.tp.fast import TP_FAST_SWITCHES
from bubblescope.reference_model.tp.workload import TP_SWITCHES

PARTS = ("allreduce", "tokens", "tpot_tiny", "flash")
PROMPT = list(range(100, 132))
TOKEN_STEPS = 32


def ablation_configs(names: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """Baseline (all off), each switch alone, all on."""
    return {"baseline": (), **{name: (name,) for name in names}, "all_on": names}


def _free_memory() -> None:
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def part_allreduce(comm: Any, args: argparse.Namespace) -> dict[str, Any]:
    from bench_allreduce import measure_all_reduce
    from bubblescope.kernels.allreduce import ALL_REDUCE_KINDS

    return measure_all_reduce(comm, list(ALL_REDUCE_KINDS), replays=args.replays)


def _tp_tokens_and_logits(comm: Any, preset: str, dtype: Any) -> tuple[list[int], Any]:
    import torch
    from bubblescope.reference_model.config import get_preset
    from bubblescope.reference_model.tp.build import build_tp_model
    from bubblescope.reference_model.tp.decode import new_tp_cache, tp_generate

    model = build_tp_model(get_preset(preset), comm, seed=0, dtype=dtype)
    tokens = tp_generate(model, PROMPT, TOKEN_STEPS)
    with torch.no_grad():
        cache = new_tp_cache(model, len(PROMPT))
        hidden = model.forward_hidden(torch.tensor([PROMPT], device=comm.device), cache).final
        # [V] the full row (compute_logits of a TP model gathers the rank blocks in order)
        logits = model.compute_logits(hidden)[0, -1].float().cpu()
    del model, cache
    _free_memory()
    return tokens, logits


def _tp1_tokens_and_logits(preset: str, device: Any, dtype: Any) -> tuple[list[int], Any]:
    import torch
    from bubblescope.reference_model.config import get_preset
    from bubblescope.reference_model.generate import generate
    from bubblescope.reference_model.init import build_model

    model = build_model(get_preset(preset), device, seed=0, dtype=dtype)
    tokens = generate(model, PROMPT, TOKEN_STEPS)
    with torch.no_grad():
        logits = model(torch.tensor([PROMPT], device=device))[0, -1].float().cpu()
    del model
    _free_memory()
    return tokens, logits


def part_tokens(comm: Any, args: argparse.Namespace) -> dict[str, Any]:
    import torch

    result: dict[str, Any] = {"preset": args.tiny_preset, "steps": TOKEN_STEPS, "prompt_len": len(PROMPT)}
    for label, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
        tp_tokens, tp_logits = _tp_tokens_and_logits(comm, args.tiny_preset, dtype)
        comm.barrier()
        if comm.rank == 0:
            ref_tokens, ref_logits = _tp1_tokens_and_logits(args.tiny_preset, comm.device, dtype)
            first = next(
                (i for i, (a, b) in enumerate(zip(tp_tokens, ref_tokens, strict=True)) if a != b), None
            )
            top2 = ref_logits.topk(2).values
            result[label] = {
                "equal": tp_tokens == ref_tokens,
                "first_divergence": first,
                "tokens_tp": tp_tokens,
                "tokens_tp1": ref_tokens,
                "prefill_logits_max_abs_diff": float((tp_logits - ref_logits).abs().max()),
                "prefill_logits_scale": float(ref_logits.abs().max()),
                "prefill_top2_margin_tp1": float(top2[0] - top2[1]),
            }
        comm.barrier()
    return result


def _tpot(workload: Any, enabled: tuple[str, ...], steps: int) -> dict[str, Any]:
    from bubblescope.capture.timed import run_timed
    from bubblescope.records.run_record import summarize_samples

    workload.prepare(frozenset(enabled))
    timed = run_timed(workload, steps=steps, warmup=4, repeats=2)
    summary = summarize_samples(timed.samples_ns, timed.tokens_per_step)
    return {"tpot_ms": summary["tpot_ms"], "ci95_ms": summary["tpot_ci95_ms"], "tokens": timed.tokens[:8]}


def _tpot_sweep(workload: Any, configs: dict[str, tuple[str, ...]], steps: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, enabled in configs.items():
        try:
            out[name] = _tpot(workload, enabled, steps)
        except Exception as exc:  # noqa: BLE001 - keep the other configurations
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


def _graph_step(workload: Any, comm: Any, fast: bool, replays: int) -> dict[str, Any]:
    """One eager TP decode step captured in a CUDA graph (collectives inside): replay == eager step,
    and the median replay time (one step's device time with no host in the loop)."""
    import statistics

    import torch
    from bubblescope.reference_model.tp.decode import tp_decode_step
    from bubblescope.reference_model.tp.graph import capture_decode_step, time_replays_ms

    comm.use_fast(fast)
    token = workload.tokens()[-1]
    captured = capture_decode_step(workload.model, workload.cache, token)
    eager = int(
        tp_decode_step(workload.model, torch.tensor([[token]], device=comm.device), workload.cache).item()
    )
    captured.restore()
    captured.graph.replay()
    replayed = int(captured.next_ids.item())
    captured.restore()
    times_ms = time_replays_ms(captured, replays)
    return {
        "replay_equals_eager": replayed == eager,
        "step_ms_median": statistics.median(times_ms),
        "step_ms_min": min(times_ms),
        "replays": replays,
    }


def _graph_sweep(workload: Any, comm: Any, replays: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label, fast in (("nccl", False), ("fast_allreduce", True)):
        try:
            out[label] = _graph_step(workload, comm, fast, replays)
        except Exception as exc:  # noqa: BLE001 - keep the other mode
            out[label] = {"error": f"{type(exc).__name__}: {exc}"}
    comm.use_fast(False)
    return out


def _tp_path(comm: Any, preset: str, path: str, args: argparse.Namespace, steps: int) -> dict[str, Any]:
    """TPOT sweep of one path at TP = world (every rank), plus the graphed eager step (eager only)."""
    from bubblescope.reference_model.tp.workload import make_tp_workload

    start = time.perf_counter()
    workload = make_tp_workload(comm, preset, max_steps=4096, path=path)
    result: dict[str, Any] = {"build_s": time.perf_counter() - start}
    names = TP_FAST_SWITCHES if path == "fast" else TP_SWITCHES
    result["tpot"] = _tpot_sweep(workload, ablation_configs(names), steps)
    if path == "eager" and not args.cpu_smoke:
        result["graph_step"] = _graph_sweep(workload, comm, args.graph_replays)
    if path == "eager":
        # back to the baseline weights and NCCL: the spec workload keeps the module weights as masters
        workload.prepare(frozenset())
        result["spec"] = _spec_tpot(comm, preset, workload.model, args, steps)
    del workload
    _free_memory()
    return result


def _tp1_path(preset: str, device: Any, path: str, steps: int) -> dict[str, Any]:
    """The plain TP=1 reference workload on one GPU (switches without fast_allreduce)."""
    from bubblescope.reference_model.workload import make_workload

    workload = make_workload(preset, str(device), max_steps=4096, path=path)
    names = tuple(n for n in (TP_FAST_SWITCHES if path == "fast" else TP_SWITCHES) if n != "fast_allreduce")
    result = _tpot_sweep(workload, ablation_configs(names), steps)
    del workload
    _free_memory()
    return result


def _spec_tpot(comm: Any, preset: str, model: Any, args: argparse.Namespace, steps: int) -> dict[str, Any]:
    """Speculative decoding at TP (DSpark-shaped draft, oracle acceptance, eager verify) on `model`."""
    from bubblescope.reference_model.tp.spec import make_tp_spec_workload

    try:
        workload = make_tp_spec_workload(
            comm,
            preset,
            spec="dspark",
            block=args.spec_block,
            accept_len=args.spec_accept_len,
            max_steps=4 * steps + 16,
            model=model,
        )
        configs = {"baseline": (), "bf16_gate+bf16_lm_head": ("bf16_gate", "bf16_lm_head")}
        result = {
            "spec": "dspark",
            "block": args.spec_block,
            "accept_len": args.spec_accept_len,
            "tpot": _tpot_sweep(workload, configs, steps),
        }
        del workload
    except Exception as exc:  # noqa: BLE001 - keep the rest of the part
        result = {"error": f"{type(exc).__name__}: {exc}"}
    _free_memory()
    return result


def part_tpot_tiny(comm: Any, args: argparse.Namespace) -> dict[str, Any]:
    paths = ("eager",) if args.cpu_smoke else ("eager", "fast")
    result: dict[str, Any] = {"preset": args.tiny_preset, "steps": args.steps}
    for path in paths:
        try:
            result[f"tp{comm.world_size}_{path}"] = _tp_path(comm, args.tiny_preset, path, args, args.steps)
        except Exception as exc:  # noqa: BLE001 - keep the other path
            result[f"tp{comm.world_size}_{path}"] = {"error": f"{type(exc).__name__}: {exc}"}
            _free_memory()
        comm.barrier()
        if comm.rank == 0:
            try:
                result[f"tp1_{path}"] = _tp1_path(args.tiny_preset, comm.device, path, args.steps)
            except Exception as exc:  # noqa: BLE001
                result[f"tp1_{path}"] = {"error": f"{type(exc).__name__}: {exc}"}
                _free_memory()
        comm.barrier()
    return result


def part_flash(comm: Any, args: argparse.Namespace) -> dict[str, Any]:
    """ling3-flash at TP = world on the fast path (auto: eager on CPU smoke runs): build, a few steps,
    TPOT of every switch off / alone / all on, and the graphed eager step with each all-reduce."""
    import torch
    from bubblescope.reference_model.tp.workload import make_tp_workload

    path = "eager" if args.cpu_smoke else args.flash_path
    start = time.perf_counter()
    workload = make_tp_workload(comm, args.flash_preset, max_steps=512, path=path)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    result: dict[str, Any] = {
        "preset": args.flash_preset,
        "path": path,
        "build_s": time.perf_counter() - start,
        "gpu_mem_allocated_gb": torch.cuda.memory_allocated(comm.device) / 1e9
        if torch.cuda.is_available()
        else 0,
        "params_this_rank": sum(p.numel() for p in workload.model.parameters()),
    }
    for _ in range(4):
        workload.step()
    result["first_tokens"] = workload.tokens()
    names = TP_FAST_SWITCHES if path == "fast" else TP_SWITCHES
    result["tpot"] = _tpot_sweep(workload, ablation_configs(names), args.flash_steps)
    if not args.cpu_smoke:
        result["graph_step_eager"] = _graph_sweep(workload, comm, args.graph_replays)
    # back to the baseline weights and NCCL: the spec workload keeps the module weights as masters
    workload.prepare(frozenset())
    result["spec"] = _spec_tpot(comm, args.flash_preset, workload.model, args, args.flash_steps)
    del workload
    _free_memory()
    return result


PART_FUNCS: dict[str, Callable[[Any, argparse.Namespace], dict[str, Any]]] = {
    "allreduce": part_allreduce,
    "tokens": part_tokens,
    "tpot_tiny": part_tpot_tiny,
    "flash": part_flash,
}


def _rank_main(rank: int, args: argparse.Namespace, port: int) -> None:
    from bubblescope.kernels.allreduce import NO_MULTICAST_ENV, apply_no_multicast_env

    apply_no_multicast_env()
    import torch
    from bubblescope.reference_model.tp.distributed import init_tp_from_env, set_local_rank_env, shutdown

    set_local_rank_env(rank, args.world_size, port)

    from bubblescope.files.atomic import write_json_atomic

    out_dir = Path(args.out)
    comm = init_tp_from_env("cpu" if args.cpu_smoke else "cuda", timeout_s=args.timeout_s)
    meta = {
        "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "device": "cpu" if args.cpu_smoke else torch.cuda.get_device_name(comm.device),
        "world_size": args.world_size,
        "torch": torch.__version__,
        "env": NO_MULTICAST_ENV,
        "command": " ".join(sys.argv),
    }
    try:
        for part in args.parts.split(","):
            start = time.perf_counter()
            try:
                result = {"ok": True, **PART_FUNCS[part](comm, args)}
            except Exception as exc:  # noqa: BLE001 - one part failing must not lose the others
                result = {
                    "ok": False,
                    "error": f"{type(exc).__name__}: {exc}",
                    "traceback": traceback.format_exc(limit=8),
                }
                _free_memory()
            result.update(meta, part=part, rank=rank, wall_s=time.perf_counter() - start)
            if rank == 0 or not result["ok"]:
                name = f"{part}.json" if rank == 0 else f"{part}.rank{rank}.json"
                write_json_atomic(out_dir / name, result)
            if rank == 0:
                status = "ok" if result["ok"] else f"FAILED: {result['error']}"
                print(f"[{part}] {result['wall_s']:.1f} s {status}", flush=True)
            comm.barrier()
    finally:
        shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument(
        "--parts", default=",".join(PARTS), help=f"comma-separated subset of {', '.join(PARTS)}"
    )
    parser.add_argument("--tiny-preset", default="ling3-tiny")
    parser.add_argument("--flash-preset", default="ling3-flash")
    parser.add_argument("--flash-path", default="fast", choices=("fast", "eager"))
    parser.add_argument("--steps", type=int, default=32, help="timed steps per repeat (tiny)")
    parser.add_argument("--flash-steps", type=int, default=12, help="timed steps per repeat (flash)")
    parser.add_argument("--replays", type=int, default=200)
    parser.add_argument("--spec-block", type=int, default=8, help="DSpark block (verify window block + 1)")
    parser.add_argument("--spec-accept-len", type=float, default=4.68, help="oracle mean accept length")
    parser.add_argument("--graph-replays", type=int, default=50, help="replays of a graphed decode step")
    parser.add_argument(
        "--timeout-s", type=int, default=600, help="collective timeout (a dead peer ends the run)"
    )
    parser.add_argument("--out", default="benchmarks/out/tp")
    parser.add_argument(
        "--cpu-smoke",
        action="store_true",
        help="gloo ranks on CPU (logic check only; use --tiny-preset debug)",
    )
    args = parser.parse_args()
    unknown = sorted(set(args.parts.split(",")) - set(PARTS))
    if unknown:
        parser.error(f"unknown part {', '.join(unknown)}; valid: {', '.join(PARTS)}")
    # bench_allreduce sits beside this file; spawned ranks inherit sys.path.
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import torch.multiprocessing as mp
    from bubblescope.kernels.allreduce import apply_no_multicast_env
    from bubblescope.reference_model.tp.distributed import free_port

    apply_no_multicast_env()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    mp.start_processes(
        _rank_main, args=(args, free_port()), nprocs=args.world_size, start_method="spawn", join=True
    )


if __name__ == "__main__":
    main()
