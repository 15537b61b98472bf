"""`bubblescope run --tp N`: start N ranks, measure in lockstep, merge into one RunRecord.

Each rank builds only its shard of the reference Ling workload on its own device (cuda:LOCAL_RANK with
NCCL; CPU ranks use gloo and the debug preset) and runs the same `measure_config` sequence — prepare,
timed repeats, profiled window — so the collectives inside every step keep the ranks in lockstep.
Rank 0's timed steps are the run's TPOT. Each rank writes `rank<r>.json` and its own trace
`trace.rank<r>.json.gz`; the merged `record.json` is rank 0's record plus a `tp` block listing every
rank's record and trace, and `analysis.json` analyses all traces together (one entry per rank).

Starting, joining and watching the ranks is tp_processes.py (shared with `ablate --tp`); merging their
records is tp_merge.py. This file holds what is particular to `run --tp`: the request, the preset, and
the body each rank runs.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bubblescope.capture.measure import RunSettings
from bubblescope.capture.setup import ReferenceOptions
from bubblescope.capture.tp_merge import merge_rank_records
from bubblescope.capture.tp_processes import (
    enter_spawned_rank,
    exit_spawned_rank,
    launcher_lock,
    rank_notices,
    run_in_rank,
    run_on_ranks,
    spawn_processes,
)
from bubblescope.errors import ConfigError
from bubblescope.records.run_record import RunRecord

# Presets tried, largest first, when --preset is not given on CUDA.
TP_PRESET_ORDER = ("ling3-flash", "ling3-flash-e256", "ling3-tiny")


@dataclass(frozen=True)
class TPRunRequest:
    """Everything a rank needs (plain data: it crosses the process boundary as JSON-able fields)."""

    world_size: int
    preset: str
    toggle: str | None
    all_on: bool
    settings: dict[str, int]
    seed: int
    out_dir: str
    html: bool = True
    path: str = "auto"
    spec: str | None = None
    block: int = 8
    accept_len: float | None = None
    routing_overlap: float = 0.0


def choose_tp_preset(world_size: int) -> str:
    """The largest preset whose shard fits each GPU at this world size (debug on CPU)."""
    import torch

    if not torch.cuda.is_available():
        return "debug"
    from bubblescope.reference_model.config import get_preset
    from bubblescope.reference_model.init import estimate_model_bytes, required_bytes

    free_bytes = min(torch.cuda.mem_get_info(i)[0] for i in range(world_size))
    for name in TP_PRESET_ORDER:
        if required_bytes(estimate_model_bytes(get_preset(name)) // world_size) <= free_bytes:
            return name
    return "ling3-tiny"


def check_request(request: TPRunRequest) -> None:
    """Refuse what every rank would refuse, before any process starts (one-line errors)."""
    import torch

    from bubblescope.reference_model.config import get_preset
    from bubblescope.reference_model.tp.plan import check_divisible
    from bubblescope.reference_model.tp.workload import tp_switch_infos
    from bubblescope.workload import parse_toggles

    if request.world_size < 2:
        raise ConfigError(f"--tp must be >= 2 to start ranks, got {request.world_size}")
    if torch.cuda.is_available() and torch.cuda.device_count() < request.world_size:
        raise ConfigError(
            f"--tp {request.world_size} needs {request.world_size} GPUs; this machine has "
            f"{torch.cuda.device_count()}"
        )
    check_divisible(get_preset(request.preset), request.world_size)
    if request.toggle and request.all_on:
        raise ConfigError("use either --toggles or --all, not both")
    from bubblescope.capture.setup import check_usable

    RunSettings(**request.settings)
    on_cuda = torch.cuda.is_available()
    # The same rules as one GPU (spec kind, path, options that need --spec), then what TP adds.
    ReferenceOptions.of(request).check(None)
    if request.spec is not None:
        if request.path == "fast":
            raise ConfigError("--spec runs on its own verify path at --tp too; drop --path fast")
        # the spec workload's own switches are checked inside the ranks (one-line error as well)
        return
    infos = tp_switch_infos(fast_path=request.path == "fast" or (request.path == "auto" and on_cuda))
    check_usable(parse_toggles(request.toggle, infos), infos, on_cuda)


def _resolve_enabled(request: TPRunRequest, workload: Any) -> tuple[frozenset[str], list[str]]:
    from bubblescope.capture.setup import check_usable, usable_switches, workload_on_cuda
    from bubblescope.workload import parse_toggles

    infos, on_cuda = workload.switches(), workload_on_cuda(workload)
    if request.all_on:
        usable = usable_switches(infos, on_cuda)
        skipped = [info.name for info in infos if info.name not in usable]
        notes = [f"--all on CPU leaves out switches that need a GPU: {', '.join(skipped)}"] if skipped else []
        return frozenset(usable), notes
    enabled = parse_toggles(request.toggle, infos)
    check_usable(enabled, infos, on_cuda)
    return enabled, []


def make_rank_workload(comm: Any, request: Any, settings: RunSettings) -> Any:
    """The reference workload of this rank: greedy (eager or fast path) or speculative.

    Args:
        request: a TPRunRequest or anything with its preset / seed and the ReferenceOptions fields.
    """
    from bubblescope.reference_model.tp.workload import make_tp_workload

    steps = settings.warmup + settings.steps
    if request.spec is not None:
        from bubblescope.reference_model.tp.spec import make_tp_spec_workload

        return make_tp_spec_workload(
            comm,
            request.preset,
            spec=request.spec,
            block=request.block,
            accept_len=request.accept_len,
            routing_overlap=request.routing_overlap,
            seed=request.seed,
            max_steps=max(256, steps),
        )
    return make_tp_workload(
        comm, request.preset, seed=request.seed, max_steps=max(4096, steps), path=request.path
    )


def run_rank(request: TPRunRequest) -> None:
    """One rank of `run --tp` (the process carries RANK / WORLD_SIZE / MASTER_* in its environment)."""
    from bubblescope.capture.floor import resolve_floor_bandwidth
    from bubblescope.capture.measure import measure_config

    out_dir = Path(request.out_dir)
    rank = int(os.environ["RANK"])

    def body(comm: Any) -> list[str]:
        settings = RunSettings(**request.settings)
        workload = make_rank_workload(comm, request, settings)
        enabled, notices = _resolve_enabled(request, workload)
        _record, run_notices = measure_config(
            workload,
            enabled,
            settings=settings,
            record_path=out_dir / f"rank{rank}.json",
            workload_info=rank_workload_info(workload, request),
            bandwidth=resolve_floor_bandwidth(),
        )
        if request.html and rank == 0:
            from bubblescope.report.run_page import write_run_report

            _record, notice = write_run_report(out_dir / f"rank{rank}.json")
            run_notices += [notice] if notice else []
        return notices + run_notices

    run_in_rank(out_dir, body)


def rank_workload_info(workload: Any, request: Any) -> dict[str, Any]:
    """The `workload` block every rank's records carry (same on every rank: name, factory, preset, and
    the options an ablation resume must match)."""
    return {
        "name": workload.name,
        "factory": "bubblescope.reference_model.tp."
        + ("spec:make_tp_spec_workload" if request.spec else "workload:make_tp_workload"),
        "preset": request.preset,
        "options": ReferenceOptions.of(request).identity(request.seed),
    }


def _spawned_rank(index: int, request_fields: dict[str, Any], master_port: int) -> None:
    enter_spawned_rank(index, request_fields["world_size"], master_port)
    run_rank(TPRunRequest(**request_fields))
    exit_spawned_rank()


def spawn_ranks(request: TPRunRequest) -> None:
    """Start world_size processes running `run_rank` and wait for all; a failure ends all of them."""
    spawn_processes(_spawned_rank, asdict(request), request.world_size, Path(request.out_dir))


def run_tensor_parallel(request: TPRunRequest) -> tuple[RunRecord, list[str]] | None:
    """Run the reference workload at TP = request.world_size and return rank 0's merged record.

    Spawns the ranks, or, inside a torchrun launch, runs this process's rank; then ranks other than 0
    return None (rank 0 merges). Raises BubblescopeError (one line) when a rank fails.
    """
    check_request(request)
    out_dir = Path(request.out_dir)
    fields = asdict(request)
    if not run_on_ranks(request.world_size, out_dir, lambda: run_rank(request), _spawned_rank, fields):
        return None
    notices = rank_notices(out_dir, request.world_size)
    import torch

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    merged, merge_notices = merge_rank_records(out_dir, request.world_size, backend)
    return merged, notices + merge_notices


def run_tp_from_cli(
    world_size: int,
    *,
    workload: str | None,
    preset: str | None,
    toggle: str | None,
    all_on: bool,
    settings: RunSettings,
    seed: int,
    out: Path | None,
    spec: str | None = None,
    block: int = 8,
    accept_len: float | None = None,
    routing_overlap: float = 0.0,
    path: str = "auto",
) -> tuple[RunRecord, list[str], Path] | None:
    """`bubblescope run --tp N`: (merged record, notices, output folder), or None on a non-zero
    torchrun rank (rank 0 prints)."""
    import datetime as _dt

    if workload is not None:
        raise ConfigError("--tp runs the reference Ling workload; --workload cannot be combined with it")
    if world_size < 1:
        raise ConfigError(f"--tp must be >= 1, got {world_size}")
    from bubblescope.reference_model.tp.distributed import launched_by_torchrun

    if out is None and launched_by_torchrun():
        raise ConfigError("under torchrun pass --out, so every rank writes into the same folder")
    chosen = preset or choose_tp_preset(world_size)
    if out is None:
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        switches = "all" if all_on else (toggle or "baseline").replace(",", "+")
        out = Path("reports") / "runs" / f"{stamp}-{chosen}-tp{world_size}-{switches}"
    request = TPRunRequest(
        world_size=world_size,
        preset=chosen,
        toggle=toggle,
        all_on=all_on,
        settings=asdict(settings),
        seed=seed,
        out_dir=str(out),
        path=path,
        spec=spec,
        block=block,
        accept_len=accept_len,
        routing_overlap=routing_overlap,
    )
    # A bad request is refused before the lock creates the folder.
    check_request(request)
    with launcher_lock(out, "run"):
        result = run_tensor_parallel(request)
    if result is None:
        return None
    record, notices = result
    return record, notices, out
