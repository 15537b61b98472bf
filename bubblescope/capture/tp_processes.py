"""Running one job on N ranks: spawn or join a torchrun launch, status files, one-line rank errors, the lock.

`run --tp` (launch_tp.py) and `ablate --tp` (ablate/tp.py) run different bodies on their ranks; the
process handling is the same and lives here. Ranks are processes started with torch.multiprocessing
(spawn) and torchrun-style environment variables, or, when this process already is a rank of a `torchrun`
launch, it runs its own rank. Every process runs with NVLink multicast off (kernels/allreduce/env.py).
Each rank reports its outcome through a JSON status file (`STATUS_NAME`), never through pickles.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bubblescope.errors import BubblescopeError, ConfigError
from bubblescope.files.atomic import write_json_atomic

STATUS_NAME = ".rank{rank}.status.json"


def _write_status(out_dir: Path, rank: int, status: dict[str, Any]) -> None:
    write_json_atomic(out_dir / STATUS_NAME.format(rank=rank), status)


def run_in_rank(out_dir: Path, body: Callable[[Any], list[str]]) -> None:
    """Join the group, run `body(comm)` and leave; the rank's outcome goes to its status file.

    The status file (`.rank<r>.status.json` in out_dir) carries {"ok": true, "notices": [...]} or
    {"ok": false, "error": one line}; the launcher turns the first failure into the user's error.
    This process must carry RANK / WORLD_SIZE / MASTER_* in its environment.
    """
    from bubblescope.reference_model.tp.distributed import init_tp_from_env, shutdown

    rank = int(os.environ["RANK"])
    with contextlib.suppress(FileNotFoundError):
        (out_dir / STATUS_NAME.format(rank=rank)).unlink()  # an earlier launch's outcome
    finished = False
    try:
        comm = init_tp_from_env()
        notices = body(comm)
        _write_status(out_dir, rank, {"ok": True, "notices": notices})
        # Nobody leaves before every rank's files are on disk: rank 0 merges them next.
        comm.barrier()
        finished = True
    except BubblescopeError as exc:
        _write_status(out_dir, rank, {"ok": False, "error": str(exc)})
        raise SystemExit(2) from None
    except Exception as exc:
        _write_status(out_dir, rank, {"ok": False, "error": f"{type(exc).__name__}: {exc}"})
        raise
    finally:
        shutdown(clean=finished)


def enter_spawned_rank(index: int, world_size: int, master_port: int) -> None:
    """First thing in a spawned rank: NVLink multicast off and torchrun-style environment variables."""
    from bubblescope.kernels.allreduce import apply_no_multicast_env
    from bubblescope.reference_model.tp.distributed import set_local_rank_env

    apply_no_multicast_env()
    set_local_rank_env(index, world_size, master_port)


def exit_spawned_rank() -> None:
    """Leave a spawned rank that finished: every file is on disk and the group is gone.

    Skips the interpreter's C++ static teardown, which can abort after the work is done (seen with
    the Triton interpreter loaded) and would turn a finished run into a failed one.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _rank_error(out_dir: Path, world_size: int, failure: Exception | None = None) -> str:
    """The first failed rank's one-line error, from the status files; else what the launcher saw of
    the rank that ended first (its signal or exit code, or the last line of what it raised)."""
    for rank in range(world_size):
        path = out_dir / STATUS_NAME.format(rank=rank)
        with contextlib.suppress(OSError, ValueError):
            status = json.loads(path.read_text())
            if not status.get("ok"):
                return f"rank {rank}: {status.get('error')}"
    return f"{_describe_ending(failure)} without writing its status (killed, or out of host memory?)"


def _describe_ending(failure: Exception | None) -> str:
    """'rank 1 was killed by SIGKILL', 'rank 0 exited with code 1', 'rank 1 raised ValueError: ...'."""
    index = getattr(failure, "error_index", None)
    who = f"rank {index}" if index is not None else "a rank"
    signal_name = getattr(failure, "signal_name", None)
    if signal_name:
        return f"{who} was killed by {signal_name}"
    exit_code = getattr(failure, "exit_code", None)
    if exit_code is not None:
        return f"{who} exited with code {exit_code}"
    lines = [line for line in str(getattr(failure, "msg", "") or "").splitlines() if line.strip()]
    if lines:
        return f"{who} raised {lines[-1].strip()}"
    return f"{who} died"


def clear_status_files(out_dir: Path, world_size: int) -> None:
    """Remove status files of an earlier launch into the same folder (a resumed ablation), so a rank
    that dies silently is not mistaken for one that finished."""
    for rank in range(world_size):
        with contextlib.suppress(FileNotFoundError):
            (out_dir / STATUS_NAME.format(rank=rank)).unlink()


def rank_notices(out_dir: Path, world_size: int) -> list[str]:
    """Every rank's notices from the status files, without repeats, rank order."""
    notices: list[str] = []
    for rank in range(world_size):
        with contextlib.suppress(OSError, ValueError):
            status = json.loads((out_dir / STATUS_NAME.format(rank=rank)).read_text())
            notices += [n for n in status.get("notices", []) if n not in notices]
    return notices


def spawn_processes(
    entry: Callable[..., None], fields: dict[str, Any], world_size: int, out_dir: Path
) -> None:
    """Start world_size spawned processes `entry(index, fields, master_port)` and wait for all.

    A failure ends all of them and becomes the first failed rank's one-line BubblescopeError.
    `fields` is plain data (JSON-able); `entry` must be a module-level function.
    """
    import torch.multiprocessing as mp

    from bubblescope.kernels.allreduce import apply_no_multicast_env
    from bubblescope.reference_model.tp.distributed import free_port

    clear_status_files(out_dir, world_size)
    # Children inherit this; set before any CUDA or NCCL initialisation in them.
    apply_no_multicast_env()
    try:
        mp.start_processes(
            entry, args=(fields, free_port()), nprocs=world_size, start_method="spawn", join=True
        )
    except (mp.ProcessRaisedException, mp.ProcessExitedException) as failure:
        raise BubblescopeError(_rank_error(out_dir, world_size, failure)) from None


def run_on_ranks(
    world_size: int,
    out_dir: Path,
    this_rank: Callable[[], None],
    entry: Callable[..., None],
    fields: dict[str, Any],
) -> bool:
    """Run a TP job on `world_size` ranks: inside a torchrun launch this process's own rank
    (`this_rank()`), else spawned processes `entry(index, fields, master_port)`.

    Returns:
        True where the caller goes on to merge and report (the spawning process, or torchrun's rank
        0); False on the other torchrun ranks.
    """
    from bubblescope.reference_model.tp.distributed import launched_by_torchrun

    out_dir.mkdir(parents=True, exist_ok=True)
    if not launched_by_torchrun():
        spawn_processes(entry, fields, world_size, out_dir)
        return True
    if int(os.environ["WORLD_SIZE"]) != world_size:
        raise ConfigError(f"--tp {world_size} but torchrun started {os.environ['WORLD_SIZE']} ranks")
    this_rank()
    return int(os.environ["RANK"]) == 0


def launcher_lock(out_dir: Path, command: str) -> contextlib.AbstractContextManager[None]:
    """The `--out` writer lock (`files.out_lock`) of a TP job, held by its launcher only: the process
    that spawns the ranks, or rank 0 of a torchrun launch (torchrun started every rank as a command, and
    the others would find rank 0's lock and stop). Spawned ranks never take it: they run under the
    launcher's lock, which they do not inherit (the descriptor is close-on-exec)."""
    from bubblescope.files.out_lock import out_lock
    from bubblescope.reference_model.tp.distributed import launched_by_torchrun

    if launched_by_torchrun() and os.environ.get("RANK", "0") != "0":
        return contextlib.nullcontext()
    return out_lock(out_dir, command)
