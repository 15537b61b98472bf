"""Process-group setup for a TP rank, from torchrun-style environment variables.

`torchrun --nproc-per-node N` and `bubblescope run --tp N` both give each process RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR and MASTER_PORT; this module turns them into a TPComm. CUDA ranks use NCCL on
cuda:LOCAL_RANK, CPU ranks gloo. NVLink multicast is forced off before anything initialises.
"""

from __future__ import annotations

import datetime as _dt
import os
import socket

import torch
import torch.distributed as dist
from bubblescope.kernels.allreduce import apply_no_multicast_env

from bubblescope.errors import ConfigError

from ..live_graphs import release_all
from .comm import TPComm

# Long enough for a Flash shard build on a busy rank; short enough that a dead peer ends the run.
INIT_TIMEOUT_S = 1800


def free_port() -> int:
    """A TCP port free on this host right now (for MASTER_PORT)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def set_local_rank_env(rank: int, world_size: int, master_port: int) -> None:
    """Give this process the torchrun-style variables of rank `rank` in a one-host group.

    Args:
        rank: this process's rank, also its LOCAL_RANK (its GPU index on CUDA).
        world_size: ranks in the group.
        master_port: the rendezvous port on 127.0.0.1 (e.g. from `free_port()` in the parent).
    """
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(master_port),
    )


def _env_int(name: str) -> int:
    value = os.environ.get(name)
    if value is None:
        raise ConfigError(f"{name} is not set: launch with torchrun or `bubblescope run --tp N`")
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"{name}={value!r} is not an integer") from None


def launched_by_torchrun() -> bool:
    """True when this process already is one rank of a launched group (RANK and WORLD_SIZE set)."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def init_tp_from_env(device_kind: str | None = None, timeout_s: int = INIT_TIMEOUT_S) -> TPComm:
    """Join the group described by the environment and return this rank's communicator.

    Args:
        device_kind: "cuda" or "cpu"; default cuda when available.
        timeout_s: how long a collective may wait for a peer before the group errors out.

    Raises:
        ConfigError: missing variables, or fewer GPUs than local ranks.
    """
    apply_no_multicast_env()
    rank, world_size = _env_int("RANK"), _env_int("WORLD_SIZE")
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    kind = device_kind or ("cuda" if torch.cuda.is_available() else "cpu")
    if kind == "cuda":
        if local_rank >= torch.cuda.device_count():
            raise ConfigError(
                f"rank {rank} needs cuda:{local_rank} but this machine has {torch.cuda.device_count()} GPUs"
            )
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
        # Ranks share the host's cores; more intra-op threads than cores per rank makes OpenMP spin
        # against the other ranks and turns a ~0.3 ms gloo all-reduce into ~7 ms.
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))
    if not dist.is_initialized():
        dist.init_process_group(
            backend,
            rank=rank,
            world_size=world_size,
            timeout=_dt.timedelta(seconds=timeout_s),
            device_id=device if kind == "cuda" else None,
        )
    group = dist.group.WORLD
    return TPComm(rank=rank, world_size=world_size, device=device, group=group)


def shutdown(clean: bool = True) -> None:
    """Leave the group (no-op when not initialised).

    Every CUDA graph the reference model captured is reset first: a live graph that captured a
    collective makes `destroy_process_group()` wait forever (see `live_graphs`).

    Args:
        clean: False when leaving on an error: then nothing waits on the device or the peers (a
            collective the failed peer never joins would never finish); the process exit frees all.
    """
    if not clean:
        return
    if dist.is_initialized():
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()
        release_all()
        dist.destroy_process_group()


def join_within(context: object, seconds: float) -> bool:
    """Wait up to `seconds` for the ranks of a `torch.multiprocessing.start_processes(join=False)`
    context; kill every one still running then and return False.

    A hang inside a GPU kernel (a cross-GPU barrier that never completes, a collective inside a
    replayed CUDA graph) is invisible to NCCL's watchdog, so only a deadline ends it. A rank that
    fails raises as `context.join` does (ProcessRaisedException / ProcessExitedException).
    """
    import time

    deadline = time.monotonic() + seconds
    while not context.join(timeout=2):  # type: ignore[attr-defined]
        if time.monotonic() > deadline:
            for process in context.processes:  # type: ignore[attr-defined]
                process.kill()
            return False
    return True
