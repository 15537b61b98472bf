"""Which switch setting makes a TP fast-path decode hang, fail, or change tokens: one fresh group per setting.

A hang inside a GPU kernel (a cross-GPU barrier that never completes) takes its process group with it and
outlives NCCL's timeout, so each setting runs in its own freshly spawned ranks with a deadline: a setting
that does not finish is killed and reported as a hang, and the next one starts clean. Settings: all off,
each switch alone, all on, and all on minus each switch -- enough to name the switch (or pair) at fault.

Each rank builds the preset's shard on the fast path, `prepare(setting)`, decodes `--steps` tokens and
writes its tokens to OUT/<setting>.rank<r>.json; rank 0's tokens are compared with the all-off setting's
(bf16 presets may differ after a near-tie; on `debug` in the GPU tests they match exactly).

Usage (two GPUs, ~15 s per setting):
    python3 benchmarks/tp_switch_bisect.py OUT --world-size 2 --preset debug
    python3 benchmarks/tp_switch_bisect.py OUT --cpu-smoke          # gloo + Triton interpreter, CPU switches
"""

from __future__ import annotations

import argparse
import datetime as _dt
import faulthandler
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

GPU_ONLY = ("fast_allreduce", "pdl")


def settings_to_try(names: list[str]) -> dict[str, list[str]]:
    """{label: switches}: all off, each alone, all on, all on minus each."""
    out: dict[str, list[str]] = {"off": []}
    out.update({name: [name] for name in names})
    out["all_on"] = list(names)
    out.update({f"all_on-{name}": [n for n in names if n != name] for name in names})
    return out


def _rank(rank: int, args: argparse.Namespace, port: int, label: str, enabled: list[str]) -> None:
    if args.cpu_smoke:
        os.environ["TRITON_INTERPRET"] = "1"
    from bubblescope.reference_model.tp.distributed import init_tp_from_env, shutdown
    from bubblescope.reference_model.tp.workload import make_tp_workload

    from bubblescope.capture.tp_processes import enter_spawned_rank, exit_spawned_rank

    enter_spawned_rank(rank, args.world_size, port)
    # A hung rank prints where its Python stands (a collective's wait, a sync, a rendezvous) before the
    # deadline kills it: that line names the phase the cross-GPU wait is in.
    faulthandler.dump_traceback_later(max(args.deadline_s - 8, 5), exit=False)
    out = Path(args.out) / f"{label}.rank{rank}.json"
    comm = init_tp_from_env("cpu" if args.cpu_smoke else "cuda", timeout_s=args.deadline_s)
    try:
        workload = make_tp_workload(comm, args.preset, max_steps=args.steps + 1, path="fast")
        workload.prepare(frozenset(enabled))
        for _ in range(args.steps):
            workload.step()
        result = {"ok": True, "tokens": workload.tokens()}
    except Exception as exc:  # noqa: BLE001 - the report says which setting failed and how
        result = {
            "ok": False,
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(limit=6),
        }
    out.write_text(json.dumps(result))
    if not result["ok"]:
        # Leave at once: the peer waits in a collective and the deadline (or its timeout) ends it.
        sys.stderr.flush()
        os._exit(1)
    shutdown()
    exit_spawned_rank()


def run_setting(args: argparse.Namespace, label: str, enabled: list[str]) -> dict[str, Any]:
    import torch.multiprocessing as mp
    from bubblescope.reference_model.tp.distributed import free_port, join_within

    start = time.monotonic()
    context = mp.start_processes(
        _rank,
        args=(args, free_port(), label, enabled),
        nprocs=args.world_size,
        start_method="spawn",
        join=False,
    )
    try:
        status = "ok" if join_within(context, args.deadline_s) else "hang"
    except (mp.ProcessRaisedException, mp.ProcessExitedException):
        status = "error"
    ranks = []
    for rank in range(args.world_size):
        path = Path(args.out) / f"{label}.rank{rank}.json"
        ranks.append(json.loads(path.read_text()) if path.exists() else None)
    errors = [r["error"] for r in ranks if r and not r.get("ok")]
    return {
        "label": label,
        "enabled": enabled,
        "status": "error" if errors else status,
        "seconds": round(time.monotonic() - start, 1),
        "tokens": (ranks[0] or {}).get("tokens"),
        "errors": errors,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--preset", default="debug")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--deadline-s", type=int, default=90, help="per setting; longer counts as a hang")
    parser.add_argument(
        "--only",
        default=None,
        help="comma-separated labels to run, in this order (default: all); 'a+b' runs just switches a and b",
    )
    parser.add_argument("--cpu-smoke", action="store_true", help="gloo ranks on CPU, switches that run there")
    args = parser.parse_args()
    if args.cpu_smoke:
        args.preset = "debug"
    from bubblescope.kernels.allreduce import apply_no_multicast_env
    from bubblescope.reference_model.tp.fast import TP_FAST_SWITCHES

    from bubblescope.files.atomic import write_json_atomic

    apply_no_multicast_env()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    names = [n for n in TP_FAST_SWITCHES if not (args.cpu_smoke and n in GPU_ONLY)]
    tried = settings_to_try(names)
    if args.only:
        # The given order, so the most telling settings run first when the deadline budget is short.
        labels = args.only.split(",")
        unknown = [x for x in labels if x not in tried and not all(n in names for n in x.split("+"))]
        if unknown:
            known = f"{', '.join(tried)} or a+b of {names}"
            parser.error(f"unknown setting(s) {', '.join(unknown)}; known: {known}")
        tried = {x: tried.get(x, x.split("+")) for x in labels}
    report: dict[str, Any] = {
        "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "preset": args.preset,
        "world_size": args.world_size,
        "command": " ".join(sys.argv),
        "settings": [],
    }
    reference = None
    for label, enabled in tried.items():
        row = run_setting(args, label, enabled)
        if label == "off":
            reference = row["tokens"]
        row["tokens_match_off"] = (
            None if reference is None or row["tokens"] is None else row["tokens"] == reference
        )
        report["settings"].append(row)
        write_json_atomic(Path(args.out) / "bisect.json", report)
        print(
            f"{label:<28} {row['status']:<6} {row['seconds']:>6.1f} s  match off: {row['tokens_match_off']}"
            + (f"  {row['errors'][0]}" if row["errors"] else ""),
            flush=True,
        )
    # Settings that ran before "off" (--only order) are compared once its tokens exist.
    if reference is not None:
        for row in report["settings"]:
            row["tokens_match_off"] = None if row["tokens"] is None else row["tokens"] == reference
        write_json_atomic(Path(args.out) / "bisect.json", report)
        differ = [row["label"] for row in report["settings"] if row["tokens_match_off"] is False]
        print(f"tokens differ from off: {', '.join(differ) or 'none'}", flush=True)


if __name__ == "__main__":
    main()
