"""`bubblescope run --tp N`: start N ranks, measure in lockstep, merge into one RunRecord.

Each rank builds only its shard of the reference Ling workload on its own device (cuda:LOCAL_RANK with
NCCL; CPU ranks use gloo and the debug preset) and runs the same `measure_config` sequence — prepare,
timed repeats, profiled window — so the collectives inside every step keep the ranks in lockstep.
Rank 0's timed steps are the run's TPOT. Each rank writes `rank<r>.json` and its own trace
`trace.rank<r>.json.gz`; the merged `record.json` is rank 0's record plus a `tp` block listing every
rank's record and trace, and `analysis.json` analyses all traces together (one entry per rank).

Ranks are processes started with torch.multiprocessing (spawn) and torchrun-style environment
variables, or, when this process already is a rank of a `torchrun` launch, it runs its own rank here.
Every process runs with NVLink multicast off (kernels/allreduce/env.py). Results come back through
JSON files, never through pickles.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bubblescope.capture.measure import RunSettings
from bubblescope.capture.setup import ReferenceOptions
from bubblescope.errors import BubblescopeError, ConfigError
from bubblescope.files.atomic import write_json_atomic
from bubblescope.records.run_record import RunRecord, load_record, save_record

STATUS_NAME = ".rank{rank}.status.json"
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


def _spawned_rank(index: int, request_fields: dict[str, Any], master_port: int) -> None:
    enter_spawned_rank(index, request_fields["world_size"], master_port)
    run_rank(TPRunRequest(**request_fields))
    exit_spawned_rank()


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


def spawn_ranks(request: TPRunRequest) -> None:
    """Start world_size processes running `run_rank` and wait for all; a failure ends all of them."""
    spawn_processes(_spawned_rank, asdict(request), request.world_size, Path(request.out_dir))


def rank_summary(rank: int, record: RunRecord, record_name: str, prefix: str = "") -> dict[str, Any]:
    """One entry of `tp.ranks`: where the rank's files are, and its per-step numbers.

    Args:
        record_name: the rank's record, relative to the folder of the merged (rank 0) record.
        prefix: the rank's folder relative to the merged record's (e.g. "../rank1/runs/"), put before
            the trace and analysis file names the rank's record gives relative to its own folder.
    """
    analysis = record.get("analysis") or {}
    trace, analysis_file = record.get("trace"), record.get("analysis_file")
    return {
        "rank": rank,
        "record": record_name,
        "trace": prefix + trace if trace else None,
        "analysis_file": prefix + analysis_file if analysis_file else None,
        "device": (record.get("workload", {}).get("describe") or {}).get("device"),
        "tpot_ms": record["summary"]["tpot_ms"],
        "gpu_busy_ns_per_step": analysis.get("gpu_busy_ns_per_step"),
        "idle_ns_per_step": analysis.get("idle_ns_per_step"),
        "blocking_reads_per_step": analysis.get("blocking_reads_per_step"),
    }


def slowest_rank(ranks: list[dict[str, Any]]) -> int:
    """The rank with the most GPU work per step when measured (the one the others wait for in each
    all-reduce), else the one with the largest TPOT on its own timeline."""
    if all(isinstance(r["gpu_busy_ns_per_step"], int) and r["gpu_busy_ns_per_step"] > 0 for r in ranks):
        return max(ranks, key=lambda r: r["gpu_busy_ns_per_step"])["rank"]
    return max(ranks, key=lambda r: r["tpot_ms"])["rank"]


def tp_block(record0: RunRecord, ranks: list[dict[str, Any]], backend: str) -> dict[str, Any]:
    """The `tp` block of a merged record (schema: docs/SCHEMAS.md, tensor-parallel runs)."""
    describe = record0.get("workload", {}).get("describe") or {}
    return {
        "world_size": len(ranks),
        "backend": backend,
        "allreduce": (describe.get("tp") or {}).get("allreduce"),
        "timing_rank": 0,
        "ranks": ranks,
        "slowest_rank": slowest_rank(ranks),
    }


def analyze_all(
    out_dir: Path, traces: list[str], name: str = "analysis.json"
) -> tuple[str | None, str | None]:
    """`out_dir/name`: one analysis over every rank's trace together (paths relative to out_dir);
    returns (file name or None, warning or None)."""
    from bubblescope.capture.profiled import STEP_MARKER

    try:
        from bubblescope.analysis.traces import analyze_traces

        full = analyze_traces([str(out_dir / name) for name in traces], step_marker=STEP_MARKER)
    except (ImportError, BubblescopeError) as exc:
        return None, f"per-rank analysis of all traces skipped: {exc}"
    except Exception as exc:  # noqa: BLE001 - the measurement is done; keep it and say what failed
        return None, f"per-rank analysis failed ({type(exc).__name__}: {exc})"
    write_json_atomic(out_dir / name, full)
    return name, None


def _move_read_calls(old_trace: Path, new_trace: Path) -> None:
    """The read tap's calls follow their trace's new name (`profiling.run_sites.read_calls_path`)."""
    from bubblescope.profiling.run_sites import read_calls_path

    old_calls = read_calls_path(old_trace)
    if old_calls.is_file():
        os.replace(old_calls, read_calls_path(new_trace))


def merge_rank_records(out_dir: Path, world_size: int, backend: str) -> tuple[RunRecord, list[str]]:
    """Name each rank's trace `trace.rank<r>.json.gz`, analyse them together, write `record.json`.

    Returns:
        (the merged record: rank 0's, plus `tp` and `traces`; notices).
    """
    notices: list[str] = []
    records = [load_record(out_dir / f"rank{rank}.json") for rank in range(world_size)]
    traces: list[str] = []
    for rank, record in enumerate(records):
        if record.get("trace"):
            name = f"trace.rank{rank}.json.gz"
            os.replace(out_dir / record["trace"], out_dir / name)
            _move_read_calls(out_dir / record["trace"], out_dir / name)
            record["trace"] = name
            save_record(record, out_dir / f"rank{rank}.json")
            traces.append(name)
    ranks = [rank_summary(rank, record, f"rank{rank}.json") for rank, record in enumerate(records)]
    merged = dict(records[0])
    if traces:
        merged["analysis_file"], warning = analyze_all(out_dir, traces)
        notices += [warning] if warning else []
    merged["traces"] = traces
    merged["tp"] = tp_block(records[0], ranks, backend)
    save_record(merged, out_dir / "record.json")
    return merged, notices


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
