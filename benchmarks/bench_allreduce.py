"""All-reduce latency of one batch-1 hidden row (5 KB bf16 for Flash), NCCL vs peer-memory one/two-shot.

What is timed: a CUDA graph holding K = 84 (one token's worth at Flash) repetitions of
    y = x * 1.0          (stands in for the GEMV that produces each partial sum: a fresh tensor)
    y = all_reduce(y)
replayed many times; the same graph without the all-reduces is timed too, and
    latency per all-reduce = (median replay time with - median replay time without) / K.
Each kind is checked first: the sum must equal world * x on every rank, bit-identical across ranks.

Usage (two GPUs, ~1 minute):
    python benchmarks/bench_allreduce.py --world-size 2 --out benchmarks/out/allreduce
Writes <out>/allreduce.json: per kind, median/p10/p90 µs per all-reduce in a graph, eager median,
correctness. NVLink multicast stays off in every process (NCCL_NVLS_ENABLE=0 etc.).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import statistics
import sys
import traceback
from pathlib import Path
from typing import Any

CALLS_PER_GRAPH = 84
HIDDEN = 2560


def _check_sum(comm: Any, kind: str, numel: int, dtype: Any) -> dict[str, Any]:
    """The all-reduce of rank-dependent data equals the exact sum, identically on every rank."""
    import torch

    generator = torch.Generator(device=comm.device).manual_seed(1234 + comm.rank)
    # small integers: every partial sum is exact in bf16, so the expected sum is exact too
    local = torch.randint(-8, 8, (numel,), generator=generator, device=comm.device).to(dtype)
    want = sum(
        torch.randint(
            -8,
            8,
            (numel,),
            generator=torch.Generator(device=comm.device).manual_seed(1234 + r),
            device=comm.device,
        ).to(torch.float32)
        for r in range(comm.world_size)
    )
    got = comm.all_reduce(local.clone())
    exact = bool(torch.equal(got.float(), want))
    # [W, numel]: identical bits on every rank
    everyone = comm.all_gather(got)
    identical = bool((everyone == everyone[0]).all())
    return {"exact_sum": exact, "identical_across_ranks": identical}


def _time_graph(comm: Any, dtype: Any, numel: int, with_all_reduce: bool, replays: int) -> list[float]:
    """Per-replay µs of a graph of CALLS_PER_GRAPH (copy [+ all-reduce]) pairs."""
    import torch

    source = torch.ones(numel, device=comm.device, dtype=dtype)

    def body() -> torch.Tensor:
        out = source
        for _ in range(CALLS_PER_GRAPH):
            partial = source * 1.0
            out = comm.all_reduce(partial) if with_all_reduce else partial
        return out

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        # eager warm-up: NCCL communicators and symmetric buffers are made here, outside capture
        for _ in range(3):
            body()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    # thread_local: NCCL's watchdog thread may query events while this thread captures
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        body()
    for _ in range(10):
        graph.replay()
    torch.cuda.synchronize()
    comm.barrier()
    times_us = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times_us.append(start.elapsed_time(end) * 1e3)
    return times_us


def _time_eager(comm: Any, dtype: Any, numel: int, calls: int) -> float:
    import torch

    tensor = torch.ones(numel, device=comm.device, dtype=dtype)
    for _ in range(10):
        comm.all_reduce(tensor.clone())
    torch.cuda.synchronize()
    samples = []
    for _ in range(calls):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        comm.all_reduce(tensor.clone())
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3)
    return statistics.median(samples)


def _quantiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median": statistics.median(ordered),
        "p10": ordered[len(ordered) // 10],
        "p90": ordered[(9 * len(ordered)) // 10],
    }


def measure_all_reduce(
    comm: Any, kinds: list[str], *, numel: int = HIDDEN, replays: int = 200
) -> dict[str, Any]:
    """Latency of each all-reduce kind on `comm` (every rank calls this; rank 0's numbers are kept)."""
    import torch

    dtype = torch.bfloat16
    results: dict[str, Any] = {
        "numel": numel,
        "bytes": numel * 2,
        "dtype": "bfloat16",
        "calls_per_graph": CALLS_PER_GRAPH,
        "kinds": {},
    }
    baseline = _quantiles(_time_graph(comm, dtype, numel, with_all_reduce=False, replays=replays))
    results["graph_without_all_reduce_us"] = baseline
    for kind in kinds:
        entry: dict[str, Any] = {}
        try:
            comm.fast_kind = kind if kind != "nccl" else comm.fast_kind
            comm.use_fast(kind != "nccl")
            entry.update(_check_sum(comm, kind, numel, dtype))
            with_ar = _quantiles(_time_graph(comm, dtype, numel, with_all_reduce=True, replays=replays))
            entry["graph_replay_us"] = with_ar
            entry["graph_us_per_all_reduce"] = (with_ar["median"] - baseline["median"]) / CALLS_PER_GRAPH
            entry["eager_us_median"] = _time_eager(comm, dtype, numel, calls=100)
        except Exception as exc:  # noqa: BLE001 - one kind failing must not lose the others
            entry["error"] = f"{type(exc).__name__}: {exc}"
            entry["traceback"] = traceback.format_exc(limit=6)
        results["kinds"][kind] = entry
        comm.barrier()
    comm.use_fast(False)
    return results


def _rank_main(rank: int, world_size: int, port: int, out_dir: str, replays: int) -> None:
    from bubblescope.kernels.allreduce import ALL_REDUCE_KINDS, NO_MULTICAST_ENV, apply_no_multicast_env

    apply_no_multicast_env()
    import torch
    from bubblescope.reference_model.tp.distributed import init_tp_from_env, set_local_rank_env, shutdown

    set_local_rank_env(rank, world_size, port)

    from bubblescope.files.atomic import write_json_atomic

    comm = init_tp_from_env("cuda", timeout_s=300)
    try:
        result = measure_all_reduce(comm, list(ALL_REDUCE_KINDS), replays=replays)
        if rank == 0:
            result.update(
                {
                    "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                    "device": torch.cuda.get_device_name(0),
                    "world_size": world_size,
                    "torch": torch.__version__,
                    "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                    "env": NO_MULTICAST_ENV,
                    "command": " ".join(sys.argv),
                }
            )
            write_json_atomic(Path(out_dir) / "allreduce.json", result)
            print(summary_lines(result), flush=True)
    finally:
        shutdown()


def summary_lines(result: dict[str, Any]) -> str:
    lines = [f"all-reduce of {result['bytes']} B bf16, {result['calls_per_graph']} per CUDA graph:"]
    for kind, entry in result["kinds"].items():
        if "error" in entry:
            lines.append(f"  {kind:14s} FAILED {entry['error']}")
        else:
            lines.append(
                f"  {kind:14s} {entry['graph_us_per_all_reduce']:7.2f} us/call in graph, "
                f"eager {entry['eager_us_median']:7.2f} us, exact={entry['exact_sum']}, "
                f"identical={entry['identical_across_ranks']}"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--replays", type=int, default=200)
    parser.add_argument("--out", default="benchmarks/out/allreduce")
    args = parser.parse_args()
    import torch.multiprocessing as mp
    from bubblescope.kernels.allreduce import apply_no_multicast_env
    from bubblescope.reference_model.tp.distributed import free_port

    apply_no_multicast_env()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    mp.start_processes(
        _rank_main,
        args=(args.world_size, free_port(), args.out, args.replays),
        nprocs=args.world_size,
        start_method="spawn",
        join=True,
    )


if __name__ == "__main__":
    main()
