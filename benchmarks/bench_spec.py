"""Speculative decoding on one GPU: effective TPOT of NEXTN and DSpark per KDA/readback switch setting.

The target weights are built ONCE (the fast non-speculative workload builds them; the speculative
workload reuses the same module). Measured, in this order, each in its own try/except and written
to OUT_DIR/spec.json + spec.md after every configuration (so a run cut short keeps what it has):
1. non-speculative TPOT with every fast switch on (the reference of the issue's target ratio);
2. correctness: with oracle acceptance seeded identically, the emitted tokens of every switch
   setting are compared with the all-off setting (KDA commit paths must agree), and real-acceptance
   DSpark / NEXTN runs report their real accept length (random weights: near 1);
3. for spec in (nextn, dspark), oracle accept length in (1, 4, 9.95) (block 8, or 9 where the mean
   needs it), each of the 8 settings of staged_kda x fused_kda_verify x no_readback (pdl,
   bf16_gate, bf16_lm_head always on, as in the non-speculative reference): effective TPOT (median
   over steps of step time / tokens emitted, bubblescope.stats), measured accept length, the
   draft's share of the step (CUDA events around the draft / step wall), and the distinct
   experts a verify touches per MoE layer (mean over layers; upper bound min(E, 8T));
4. the routing-correlation knob at all-on, DSpark, 9.95: distinct experts and TPOT for overlaps.
The verify window's MoE switches (fast_topk, early_shared, expert_union) are on in the first, "all on"
setting only; `--extremes-only` then also measures all on without expert_union and without the three
(the earlier all-on), so each has a same-run ratio. `--profile-steps N` adds the GPU kernel time per
step of the first setting, summed by kernel name (torch.profiler over N steps).

Usage:
    .venv/bin/python benchmarks/bench_spec.py OUT_DIR                          # ling3-flash-e256
    .venv/bin/python benchmarks/bench_spec.py OUT_DIR --preset ling3-tiny --spec dspark
    .venv/bin/python benchmarks/bench_spec.py OUT_DIR --smoke                  # debug preset, seconds
"""

from __future__ import annotations

import argparse
import datetime
import functools
import gc
import itertools
import math
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch
from bubblescope.reference_model.config import get_preset
from bubblescope.reference_model.init import build_model
from bubblescope.reference_model.spec.workload import SpecWorkload
from bubblescope.reference_model.workload import FAST_SWITCHES, make_workload

from bubblescope.capture.timed import run_timed
from bubblescope.files.atomic import write_json_atomic, write_text_atomic
from bubblescope.stats import per_token_samples_ns

ACCEPT_LENGTHS = (1.0, 4.0, 9.95)
KDA_SWITCHES = ("staged_kda", "fused_kda_verify", "no_readback")
# The verify window's kernel switches (MoE: verify_moe.KernelMoE; the norms); on only in the first setting.
MOE_SWITCHES = ("fast_topk", "early_shared", "expert_union", "deep_experts", "verify_norm_kernel")
OVERLAPS = (0.0, 0.5, 0.8)
ALWAYS_ON = ("pdl", "bf16_gate", "bf16_lm_head")


def block_for(accept_len: float, default_block: int) -> int:
    """Block 8 as published; a mean above 9 emitted needs at least ceil(mean - 1) drafted tokens."""
    return max(default_block, math.ceil(accept_len - 1.0))


def switch_settings(extremes_only: bool = False) -> list[frozenset[str]]:
    """Every switch on first, then the 8 settings of the three KDA/readback switches; pdl, bf16_gate
    and bf16_lm_head always on (as in the non-speculative all-on reference). `extremes_only`: all on,
    all on but expert_union, all on but the MoE switches, then all off (for a short GPU budget)."""
    all_on = frozenset({*ALWAYS_ON, *KDA_SWITCHES, *MOE_SWITCHES})
    if extremes_only:
        return [all_on, all_on - {"expert_union"}, all_on - set(MOE_SWITCHES), frozenset(ALWAYS_ON)]
    settings = [all_on]
    for bits in itertools.product((False, True), repeat=len(KDA_SWITCHES)):
        chosen = (name for name, on in zip(KDA_SWITCHES, bits, strict=True) if on)
        settings.append(frozenset({*ALWAYS_ON, *chosen}))
    return settings


def key_of(enabled: frozenset[str]) -> str:
    return "+".join(name for name in (*KDA_SWITCHES, *MOE_SWITCHES) if name in enabled) or "off"


def effective_tpot_ms(workload: Any, steps: int, warmup: int, repeats: int) -> tuple[float, list[int]]:
    """Effective TPOT (median step time / mean tokens per step, as records report it), and the
    first repeat's tokens."""
    timed = run_timed(workload, steps=steps, warmup=warmup, repeats=repeats)
    per_token = per_token_samples_ns(timed.samples_ns, timed.tokens_per_step)
    flat = [float(x) for repeat in per_token for x in repeat]
    return statistics.median(flat) / 1e6, list(timed.tokens)


def draft_share(workload: SpecWorkload, steps: int) -> float | None:
    """GPU time inside the draft / wall time of `steps` steps (CUDA only)."""
    if not str(workload.device).startswith("cuda"):
        return None
    workload.reset()
    workload.decoder.draft_events.clear()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        workload.step()
    torch.cuda.synchronize()
    wall_ms = (time.perf_counter() - start) * 1e3
    return workload.decoder.draft_gpu_ms() / wall_ms


def profile_kernels(workload: SpecWorkload, steps: int) -> list[dict[str, Any]]:
    """GPU kernel time per step by kernel name over `steps` steps (torch.profiler, CUDA activity),
    largest first; the total row first."""
    from torch.profiler import ProfilerActivity, profile

    workload.reset()
    for _ in range(3):
        workload.step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            workload.step()
        torch.cuda.synchronize()
    totals: dict[str, list[float]] = {}
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            entry = totals.setdefault(event.name[:90], [0.0, 0])
            entry[0] += event.device_time
            entry[1] += 1
    rows = [
        {"kernel": name, "us_per_step": round(us / steps, 1), "calls_per_step": round(calls / steps, 1)}
        for name, (us, calls) in totals.items()
    ]
    rows.sort(key=lambda row: -row["us_per_step"])
    total = {"kernel": "TOTAL", "us_per_step": round(sum(r["us_per_step"] for r in rows), 1)}
    return [total, *rows[:30]]


def render_markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# bench_spec — {report['preset']} on {report['device']} ({report['date']})",
        "",
        f"Command: `{report['command']}`",
        f"Non-speculative all-on TPOT: {report.get('baseline_tpot_ms')} ms",
        "",
        "| spec | accept target | block | switches | eff. TPOT ms | accept len | draft share "
        "| distinct experts/layer | vs non-spec |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    base = report.get("baseline_tpot_ms")
    for row in report["rows"]:
        ratio = f"{row['tpot_ms'] / base:.3f}" if base and row.get("tpot_ms") else "-"
        share = f"{row['draft_share']:.2f}" if row.get("draft_share") is not None else "-"
        lines.append(
            f"| {row['spec']} | {row['accept_target']} | {row['block']} | {row['switches']} | "
            f"{row.get('tpot_ms', 'error')} | {row.get('accept_len')} | {share} | "
            f"{row.get('distinct_experts_mean')} / {row.get('experts_upper_bound')} | {ratio} |"
        )
    lines += ["", "## Correctness", ""]
    lines += [f"- {item}" for item in report["checks"]]
    lines += ["", "## KDA verify kernel, one layer (us)", ""]
    lines += [f"- {row}" for row in report.get("verify_kernels", [])]
    lines += ["", "## Routing overlap knob (DSpark, all on)", ""]
    for row in report["overlap"]:
        lines.append(f"- overlap {row['overlap']}: {row}")
    lines += ["", "## GPU kernel time per step, first setting", ""]
    lines += [f"- {row}" for row in report.get("kernel_profile", [])]
    lines += ["", "## Errors", ""] + [f"- {err}" for err in report["errors"]]
    return "\n".join(lines) + "\n"


def save(out_dir: Path, report: dict[str, Any]) -> None:
    write_json_atomic(out_dir / "spec.json", report)
    write_text_atomic(out_dir / "spec.md", render_markdown(report))


def measure_baseline(args: argparse.Namespace, report: dict[str, Any], device: str) -> None:
    """Non-speculative all-on TPOT on the fast path (its model is freed before the spec runs)."""
    path = "fast" if device.startswith("cuda") else "eager"
    workload = make_workload(
        args.preset, device, seed=0, prompt_len=args.prompt_len, max_steps=4096, path=path
    )
    # The eager path (CPU smoke) only has the dtype switches.
    enabled = frozenset(FAST_SWITCHES) if path == "fast" else frozenset({"bf16_gate", "bf16_lm_head"})
    workload.prepare(enabled)
    report["baseline_tpot_ms"], _ = effective_tpot_ms(workload, args.steps, args.warmup, args.repeats)
    report["baseline_switches"] = sorted(enabled)
    del workload
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def run_spec_grid(args, report, model, device, out_dir: Path) -> None:
    config = get_preset(args.preset)
    deadline = time.monotonic() + args.budget_s
    for spec, accept in itertools.product(args.spec, args.accept):
        block = block_for(accept, args.block)
        workload = SpecWorkload(
            config,
            device,
            spec=spec,
            block=block,
            accept_len=accept,
            prompt_len=args.prompt_len,
            max_steps=(args.steps + args.warmup + 4) * args.repeats + 64,
            model=model,
        )
        reference_tokens, first = None, None
        for enabled in args.settings or switch_settings(args.extremes_only):
            row = {"spec": spec, "accept_target": accept, "block": block, "switches": key_of(enabled)}
            if time.monotonic() > deadline:
                report["errors"].append(f"time budget: skipped {row}")
                continue
            try:
                workload.prepare(enabled)
                row["tpot_ms"], tokens = effective_tpot_ms(workload, args.steps, args.warmup, args.repeats)
                summary = workload.spec_summary()
                row["accept_len"] = round(summary["accept_len"], 3)
                experts = summary["experts"] or {}
                row["distinct_experts_mean"] = experts.get("distinct_experts_mean")
                row["experts_upper_bound"] = experts.get("upper_bound")
                row["draft_share"] = draft_share(workload, args.share_steps)
                if reference_tokens is None:
                    reference_tokens, first = tokens, enabled
                else:
                    same = tokens[: len(reference_tokens)] == reference_tokens[: len(tokens)]
                    report["checks"].append(
                        f"{spec} {accept} {key_of(enabled)}: tokens match {key_of(first)}: {same}"
                    )
            except Exception as exc:  # noqa: BLE001 - one failing configuration must not stop the grid
                row["error"] = f"{type(exc).__name__}: {exc}"
                report["errors"].append(f"{row}\n{traceback.format_exc(limit=3)}")
            report["rows"].append(row)
            save(out_dir, report)
        if first is not None and args.profile_steps and str(device).startswith("cuda"):
            try:
                workload.prepare(first)
                report.setdefault("kernel_profile", []).extend(
                    {"spec": spec, "accept": accept, "switches": key_of(first), **row}
                    for row in profile_kernels(workload, args.profile_steps)
                )
            except Exception as exc:  # noqa: BLE001 - a breakdown, not a measurement of the grid
                report["errors"].append(f"profile {spec} {accept}: {type(exc).__name__}: {exc}")
            save(out_dir, report)
        if first is not None and time.monotonic() <= deadline:
            check_determinism(workload, first, reference_tokens, args, report, f"{spec} {accept}")
            save(out_dir, report)
        del workload
        gc.collect()


def check_determinism(
    workload: SpecWorkload, enabled: frozenset[str], reference: list[int], args, report, label: str
) -> None:
    """The first setting once more: if its tokens differ from its own first run, the step is not
    deterministic (e.g. atomics in a kernel), and the cross-setting token checks cannot be exact."""
    try:
        workload.prepare(enabled)
        again = run_timed(workload, steps=args.steps, warmup=args.warmup, repeats=1).tokens
        same = again[: len(reference)] == reference[: len(again)]
        first_diff = next((i for i, (a, b) in enumerate(zip(again, reference, strict=False)) if a != b), None)
        report["checks"].append(
            f"{label} {key_of(enabled)} run again: tokens match its first run: {same}"
            + ("" if same else f" (first difference at token {first_diff}: the step is not deterministic)")
        )
    except Exception as exc:  # noqa: BLE001 - a check, not a measurement
        report["errors"].append(f"determinism check {label}: {type(exc).__name__}: {exc}")


def run_real_and_overlap(args, report, model, device, out_dir: Path) -> None:
    config = get_preset(args.preset)
    all_on = frozenset({*ALWAYS_ON, *KDA_SWITCHES, *MOE_SWITCHES})
    for spec in args.spec:
        try:
            workload = SpecWorkload(
                config,
                device,
                spec=spec,
                block=args.block,
                prompt_len=args.prompt_len,
                max_steps=args.steps + 32,
                model=model,
            )
            workload.prepare(all_on)
            for _ in range(args.steps):
                workload.step()
            report["checks"].append(
                f"{spec} real acceptance (random weights): accept_len {workload.spec_summary()['accept_len']}"
            )
        except Exception as exc:  # noqa: BLE001
            report["errors"].append(f"real acceptance {spec}: {type(exc).__name__}: {exc}")
    for overlap in OVERLAPS:
        try:
            block = block_for(9.95, args.block)
            workload = SpecWorkload(
                config,
                device,
                spec="dspark",
                block=block,
                accept_len=9.95,
                prompt_len=args.prompt_len,
                max_steps=(args.steps + args.warmup + 4) * args.repeats + 64,
                routing_overlap=overlap,
                model=model,
            )
            workload.prepare(all_on)
            tpot_ms, _ = effective_tpot_ms(workload, args.steps, args.warmup, args.repeats)
            report["overlap"].append(
                {"overlap": overlap, "tpot_ms": tpot_ms, "experts": workload.spec_summary()["experts"]}
            )
        except Exception as exc:  # noqa: BLE001
            report["errors"].append(f"overlap {overlap}: {type(exc).__name__}: {exc}")
        save(out_dir, report)


def measure_verify_kernels(report: dict[str, Any], device: str) -> None:
    """One KDA layer's verify at Flash shapes (H=32, K=V=128, bf16 activations, fp32 state), CUDA
    graph of 20 calls timed with events: fused vs unfused, PDL on and off, and three output modes:
    "staged" (every position kept, staged_kda on), "last" (last position only, to a fresh buffer)
    and "in_place" (last position written over the persistent state, as staged_kda off runs it)."""
    if not device.startswith("cuda"):
        return
    from bubblescope.kernels.kda_verify import kda_verify

    heads, key_dim, width = 32, 128, 32 * 128
    modes = ("staged", "last", "in_place")
    for seq_len, fused, mode, pdl in itertools.product(
        (1, 5, 9, 10, 16), (True, False), modes, (True, False)
    ):
        inputs = (
            torch.randn(1, seq_len, 3, width, device=device, dtype=torch.bfloat16),
            torch.randn(1, seq_len, width, device=device, dtype=torch.bfloat16),
            torch.randn(1, seq_len, heads, device=device, dtype=torch.bfloat16),
            torch.randn(3, width, 4, device=device, dtype=torch.bfloat16) * 0.5,
            torch.rand(heads, device=device) + 0.5,
            torch.randn(width, device=device),
            torch.randn(1, heads, key_dim, key_dim, device=device) * 0.1,
            torch.randn(1, 3, width, 3, device=device, dtype=torch.bfloat16),
        )
        outputs: dict[str, Any] = {"keep_all": mode == "staged"}
        if mode == "in_place":
            outputs["states_out"] = inputs[6].view(1, 1, heads, key_dim, key_dim)
            outputs["windows_out"] = torch.empty_like(inputs[7]).unsqueeze(1)
        call = functools.partial(kda_verify, *inputs, fused=fused, use_pdl=pdl, **outputs)

        call()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(20):
                call()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        samples = []
        for _ in range(5):
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e3 / 20)
        report["verify_kernels"].append(
            {
                "T": seq_len,
                "fused": fused,
                "mode": mode,
                "pdl": pdl,
                "us_per_layer": round(statistics.median(samples), 2),
            }
        )
        del graph


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--preset", default="ling3-flash-e256")
    parser.add_argument("--spec", nargs="+", default=["nextn", "dspark"], choices=["nextn", "dspark"])
    parser.add_argument("--accept", nargs="+", type=float, default=list(ACCEPT_LENGTHS))
    parser.add_argument("--block", type=int, default=8)
    parser.add_argument("--skip-baseline", action="store_true", help="no non-speculative reference run")
    parser.add_argument("--skip-extras", action="store_true", help="no real-acceptance / overlap runs")
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--share-steps", type=int, default=6)
    parser.add_argument("--prompt-len", type=int, default=16)
    parser.add_argument(
        "--budget-s", type=float, default=480.0, help="stop starting new configurations after this"
    )
    parser.add_argument("--smoke", action="store_true", help="debug preset, tiny sizes")
    parser.add_argument("--kernels-only", action="store_true", help="only the KDA verify kernel table")
    parser.add_argument("--skip-kernels", action="store_true", help="no KDA verify kernel table")
    parser.add_argument(
        "--settings",
        nargs="+",
        type=lambda text: frozenset({*ALWAYS_ON, *(name for name in text.split("+") if name != "base")}),
        help="switch settings to time instead of the grid: '+'-joined names on top of pdl, bf16_gate, "
        "bf16_lm_head ('base': none more)",
    )
    parser.add_argument(
        "--profile-steps", type=int, default=0, help="kernel time per step of the first setting over N steps"
    )
    parser.add_argument(
        "--extremes-only",
        action="store_true",
        help="per accept length only all-on, then all-off (short budgets)",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.preset, args.steps, args.warmup, args.repeats, args.share_steps = "debug", 3, 1, 1, 2
    device = "cuda" if torch.cuda.is_available() else "cpu"
    report: dict[str, Any] = {
        "schema": "bubblescope.bench_spec/1",
        "preset": args.preset,
        "device": torch.cuda.get_device_name() if device == "cuda" else platform.processor() or "cpu",
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        "torch": torch.__version__,
        "rows": [],
        "verify_kernels": [],
        "checks": [],
        "overlap": [],
        "errors": [],
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    try:
        if not args.skip_kernels:
            measure_verify_kernels(report, device)
    except Exception as exc:  # noqa: BLE001
        report["errors"].append(
            f"verify kernels: {type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"
        )
    save(args.out_dir, report)
    if args.kernels_only:
        print(render_markdown(report))
        return 1 if report["errors"] else 0
    try:
        if not args.skip_baseline:
            measure_baseline(args, report, device)
    except Exception as exc:  # noqa: BLE001 - the speculative grid is still worth running
        report["errors"].append(f"baseline: {type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}")
    save(args.out_dir, report)
    try:
        # Same seed as the baseline; built with the MTP layer (NEXTN drafts with it).
        model = build_model(get_preset(args.preset), device, seed=0)
    except Exception as exc:  # noqa: BLE001 - keep what was measured, say why the rest is missing
        report["errors"].append(f"building the speculative target: {type(exc).__name__}: {exc}")
        save(args.out_dir, report)
        return 1
    run_spec_grid(args, report, model, device, args.out_dir)
    if not args.skip_extras:
        run_real_and_overlap(args, report, model, device, args.out_dir)
    save(args.out_dir, report)
    print(render_markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
