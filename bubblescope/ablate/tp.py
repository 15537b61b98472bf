"""`bubblescope ablate --tp N`: one ablation measured by N tensor-parallel ranks in lockstep.

Each rank builds only its shard once and runs `run_ablation` over the same configurations in the
same order, with only prepare() between them; the collectives inside every decode step keep the
ranks in lockstep, and rank 0's timed steps are the TPOT. Rank 0's store is the ablation
(`<out>/runs/<key>.json`, `<out>/ablation.json`); rank r > 0 keeps its records and traces in
`<out>/rank<r>/runs/`. After each configuration every rank waits for the others (a barrier), then
rank 0 adds the `tp` block `run --tp` writes to its record, with every rank's trace in `traces`.

Resume: rank 0 alone decides what is pending — configurations without a valid record, or whose
record lacks its `tp` block (interrupted between measuring and merging) — and broadcasts that list
as JSON bytes (never a pickle), so every rank measures exactly the same configurations.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bubblescope.ablate.plan import AblationPlan, PlannedConfig, plan_ablation
from bubblescope.ablate.reanalyze_record import reanalyze_record
from bubblescope.ablate.store import AblationStore
from bubblescope.ablate.toggles import split_names, study_toggles
from bubblescope.capture import launch_tp, tp_merge, tp_processes
from bubblescope.capture.measure import RunSettings
from bubblescope.capture.setup import ReferenceOptions
from bubblescope.errors import BubblescopeError, RecordError
from bubblescope.records.run_record import RunRecord, load_record, save_record


@dataclass(frozen=True)
class TPAblateRequest:
    """Everything a rank of the ablation needs (plain data: crosses the process boundary as fields)."""

    world_size: int
    preset: str
    toggles: str | None
    all_on: bool
    order: str | None
    max_exact: int
    permutations: int
    settings: dict[str, int]
    seed: int
    out_dir: str
    path: str = "auto"
    spec: str | None = None
    block: int = 8
    accept_len: float | None = None
    routing_overlap: float = 0.0


def rank_folder(root: Path, rank: int) -> Path:
    """Where rank `rank` keeps its ablation store: the ablation itself for rank 0."""
    return root if rank == 0 else root / f"rank{rank}"


def check_ablate_request(request: TPAblateRequest) -> None:
    """Refuse, before any process starts, what every rank would refuse (one-line errors)."""
    launch_tp.check_request(
        launch_tp.TPRunRequest(
            world_size=request.world_size,
            preset=request.preset,
            toggle=request.toggles,
            all_on=request.all_on,
            settings=request.settings,
            seed=request.seed,
            out_dir=request.out_dir,
            **asdict(ReferenceOptions.of(request)),
        )
    )
    if not request.all_on:
        order = split_names(request.order) or None
        plan_ablation(
            split_names(request.toggles),
            order,
            max_exact=request.max_exact,
            permutations=request.permutations,
        )


def broadcast_json(comm: Any, payload: Any) -> Any:
    """Rank 0's JSON-able `payload` on every rank: UTF-8 bytes in a tensor, two broadcasts, no pickle."""
    import torch
    import torch.distributed as dist

    data = json.dumps(payload).encode() if comm.rank == 0 else b""
    size = torch.tensor([len(data)], dtype=torch.int64, device=comm.device)
    dist.broadcast(size, src=0, group=comm.group)
    if comm.rank == 0:
        buffer = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(comm.device)
    else:
        buffer = torch.empty(int(size.item()), dtype=torch.uint8, device=comm.device)
    dist.broadcast(buffer, src=0, group=comm.group)
    return json.loads(bytes(buffer.cpu().tolist()).decode())


def _pending_on_rank0(
    store: AblationStore, plan: AblationPlan, identity: dict[str, Any], world_size: int
) -> dict[str, Any]:
    """{"pending": [keys], "done": n, "notices": [...]}, or {"error": one line} when rank 0 refuses."""
    try:
        done, notices = store.load_done(plan, identity)
    except BubblescopeError as exc:
        return {"error": str(exc)}
    merged = {key for key, record in done.items() if (record.get("tp") or {}).get("world_size") == world_size}
    for key in sorted(set(done) - merged):
        notices.append(f"re-measuring {key}: its record has no tp block for {world_size} ranks")
    pending = [config.key for config in plan.configs if config.key not in merged]
    return {"pending": pending, "done": len(merged), "notices": notices}


def merge_config_record(root: Path, key: str, record0: RunRecord, world_size: int, backend: str) -> list[str]:
    """Rank 0's record of configuration `key` plus `tp` and `traces` (paths relative to runs/).

    Every rank's record of `key` must be on disk (the caller waited at a barrier). Returns notices.
    """
    runs = root / "runs"
    ranks = [tp_merge.rank_summary(0, record0, f"{key}.json")]
    for rank in range(1, world_size):
        prefix = f"../rank{rank}/runs/"
        record = load_record(rank_folder(root, rank) / "runs" / f"{key}.json")
        ranks.append(tp_merge.rank_summary(rank, record, f"{prefix}{key}.json", prefix))
    merged = dict(record0)
    merged["traces"] = [r["trace"] for r in ranks if r["trace"]]
    notices: list[str] = []
    if merged["traces"]:
        name, warning = tp_merge.analyze_all(runs, merged["traces"], f"{key}.tp.analysis.json")
        merged["analysis_file"] = name or merged.get("analysis_file")
        notices += [warning] if warning else []
    merged["tp"] = tp_merge.tp_block(record0, ranks, backend)
    save_record(merged, runs / f"{key}.json")
    return notices


def reanalyze_tp_record(record0: RunRecord, record_path: Path) -> RunRecord:
    """Re-analyse every rank's record of one configuration from its own trace, then rebuild rank 0's
    `tp` block and the all-ranks analysis (`ablate --reanalyze` of a TP ablation)."""
    root, key, tp = record_path.parent.parent, record_path.stem, record0["tp"]
    world_size = tp.get("world_size")
    if not isinstance(world_size, int) or world_size < 2:
        raise RecordError(f"{record_path}: its tp block has no valid world_size")
    for rank in range(1, world_size):
        path = rank_folder(root, rank) / "runs" / f"{key}.json"
        reanalyze_record(load_record(path), path)
    # Rank 0's own analysis, then the all-ranks one the merged record points to.
    record0 = {**record0, "analysis_file": f"{key}.analysis.json"}
    record0 = reanalyze_record(record0, record_path)
    merge_config_record(root, key, record0, world_size, str(tp.get("backend")))
    return load_record(record_path)


def _ablate_body(comm: Any, request: TPAblateRequest) -> list[str]:
    """One rank's whole ablation; returns its notices."""
    from bubblescope.ablate.runner import ablation_identity, run_ablation
    from bubblescope.capture.floor import resolve_floor_bandwidth

    root, rank = Path(request.out_dir), comm.rank
    settings = RunSettings(**request.settings)
    workload = launch_tp.make_rank_workload(comm, request, settings)
    names, notices = study_toggles(request.toggles, request.all_on, workload)
    order = split_names(request.order) or None
    plan = plan_ablation(names, order, max_exact=request.max_exact, permutations=request.permutations)
    info = launch_tp.rank_workload_info(workload, request)
    store = AblationStore(rank_folder(root, rank))
    decided = None
    if rank == 0:
        decided = _pending_on_rank0(store, plan, ablation_identity(info, settings), comm.world_size)
    decided = broadcast_json(comm, decided)
    if "error" in decided:
        raise BubblescopeError(decided["error"] if rank == 0 else f"rank 0 refused: {decided['error']}")
    pending: list[str] = decided["pending"]
    if rank == 0:
        notices += decided["notices"]
        if decided["done"]:
            notices.append(
                f"resumed {root}: {decided['done']} configurations on disk, {len(pending)} measured"
            )
    measured = 0

    def after_config(config: PlannedConfig, record: RunRecord, resumed: bool) -> None:
        nonlocal measured
        if resumed:
            return
        comm.barrier()  # every rank's record and trace of this configuration is on disk
        if rank == 0:
            notices.extend(merge_config_record(root, config.key, record, comm.world_size, comm.backend))
            measured += 1
            print(
                f"measured {config.key} on {comm.world_size} ranks ({measured}/{len(pending)})",
                file=sys.stderr,
            )

    _, _, run_notices = run_ablation(
        workload,
        plan,
        store,
        settings=settings,
        workload_info=info,
        bandwidth=resolve_floor_bandwidth(),
        on_config=after_config,
        only_keys=pending,
    )
    return notices + [n for n in run_notices if n not in notices]


def ablate_rank(request: TPAblateRequest) -> None:
    """One rank of the TP ablation (the process carries RANK / WORLD_SIZE / MASTER_* in its environment)."""
    tp_processes.run_in_rank(Path(request.out_dir), lambda comm: _ablate_body(comm, request))


def _spawned_ablate_rank(index: int, request_fields: dict[str, Any], master_port: int) -> None:
    tp_processes.enter_spawned_rank(index, request_fields["world_size"], master_port)
    ablate_rank(TPAblateRequest(**request_fields))
    tp_processes.exit_spawned_rank()


def run_tp_ablation(request: TPAblateRequest) -> list[str] | None:
    """Measure the ablation at TP = request.world_size; rank 0's store in out_dir holds the result.

    Spawns the ranks, or inside a torchrun launch runs this process's rank (ranks other than 0 then
    return None). Returns every rank's notices. Raises BubblescopeError (one line) when a rank fails.
    """
    check_ablate_request(request)
    out_dir = Path(request.out_dir)
    fields = asdict(request)
    if not tp_processes.run_on_ranks(
        request.world_size, out_dir, lambda: ablate_rank(request), _spawned_ablate_rank, fields
    ):
        return None
    return tp_processes.rank_notices(out_dir, request.world_size)
