"""DSpark against the non-speculative step, all on, in ONE process: effective TPOT of each and their ratio.

Issue 27's target: DSpark at oracle accept length 9.95, every switch on, at most 0.40 x the
non-speculative all-on step, "measured in one process". Earlier figures divided two ablations run one
after the other (0.420 x, RESULTS.md "Round 2 through the product") or timed the non-speculative step
once before building the speculative one. Here the target weights are built once: the non-speculative
fast workload builds them, the DSpark workload reuses the same module (the MoE packing is shared, so
there is no second copy), both are prepared with every switch they offer but the ones measured slower
(`--decode-off` / `--spec-off`, default `on_top.MEASURED_SLOWER`: the fastest non-speculative step is the
target's denominator, not an all-on that includes a losing switch), and their timed repeats are
interleaved — round r times decode then DSpark, round r + 1 DSpark then decode — so a slow spell of the
machine lands on both sides. Each round is one repeat of `capture.timed.run_timed` (warm-up steps, then
CUDA-event timed steps). Effective TPOT = median step time / mean tokens per step
(`stats.per_token_samples_ns`), its interval the two-level bootstrap over rounds then steps
(`stats.median_with_ci`); the ratio DSpark / decode with an interval from independent two-level
bootstraps of both (`stats.ratio_of_medians_ci`), and each round's own ratio beside it.

Also recorded: DSpark's measured accept length and the verify window's expert union (distinct routed
experts per MoE layer per verify, the bytes that union streams and its share of the verify step's
bytes: `reference_model/spec/routing.py`), with the routing-overlap knob given.

On the CPU (a dry run) the non-speculative step runs the eager path and DSpark the eager MoE, with the
switches that need no GPU (bf16_gate, bf16_lm_head); `--preset debug` takes seconds. With
TRITON_INTERPRET=1, `--path fast --kernels on` the CPU runs the GPU's code: every switch, the MoE
kernels (a minute).

Usage:
    .venv/bin/python benchmarks/bench_spec_vs_decode.py OUT_DIR                   # ling3-flash-e256, GPU
    .venv/bin/python benchmarks/bench_spec_vs_decode.py OUT_DIR --preset debug    # CPU dry run
Writes OUT_DIR/spec_vs_decode.json and .md after every round (a run cut short keeps what it has).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import torch
from bubblescope.kernels.moe.params import FusedMoEConfig
from bubblescope.reference_model.config import get_preset
from bubblescope.reference_model.on_top import MEASURED_SLOWER
from bubblescope.reference_model.spec.workload import SpecWorkload
from bubblescope.reference_model.workload import make_workload

from bubblescope.capture.timed import run_timed
from bubblescope.files.atomic import write_json_atomic, write_text_atomic
from bubblescope.stats import INTERVAL_LABEL, median_with_ci, per_token_samples_ns, ratio_of_medians_ci

TARGET_RATIO = 0.40


def usable_switches(workload: Any, kernels: bool) -> frozenset[str]:
    """Every switch the workload offers that runs here (all of them where the Triton kernels run)."""
    return frozenset(info.name for info in workload.switches() if kernels or not info.needs_gpu)


def build(args: argparse.Namespace, device: str) -> tuple[Any, SpecWorkload, dict[str, Any]]:
    """The non-speculative workload (it builds the weights) and DSpark on the same module, both prepared
    with every switch they offer here. Returns them and what was built (switches, seconds)."""
    # With --kernels on and TRITON_INTERPRET=1 the CPU runs the GPU's code paths (slowly).
    kernels = device.startswith("cuda") if args.kernels == "auto" else args.kernels == "on"
    started = time.perf_counter()
    decode = make_workload(
        args.preset,
        device,
        seed=0,
        prompt_len=args.prompt_len,
        max_steps=args.decode_steps + args.warmup + 8,
        path=args.path,
    )
    built_s = time.perf_counter() - started
    # Built before either is prepared: both keep the fp32 router / lm_head masters as their "off".
    spec = SpecWorkload(
        get_preset(args.preset),
        device,
        spec="dspark",
        block=args.block,
        accept_len=args.accept,
        seed=0,
        prompt_len=args.prompt_len,
        max_steps=args.spec_steps + args.warmup + 8,
        routing_overlap=args.routing_overlap,
        model=decode.model,
        kernel_moe=kernels,
    )
    # The eager decode path (the CPU default) has only the dtype switches, interpreter or not.
    decode_fast = getattr(decode, "decoder", None) is not None
    decode_on = usable_switches(decode, kernels and decode_fast) - set(args.decode_off)
    spec_on = usable_switches(spec, kernels) - set(args.spec_off)
    decode.prepare(decode_on)
    spec.prepare(spec_on)
    return (
        decode,
        spec,
        {
            "decode_switches": sorted(decode_on),
            "spec_switches": sorted(spec_on),
            "decode_off": sorted(set(args.decode_off)),
            "spec_off": sorted(set(args.spec_off)),
            "decode_path": type(decode).__name__,
            "weights_built_s": round(built_s, 1),
            "built_and_prepared_s": round(time.perf_counter() - started, 1),
        },
    )


def time_round(workload: Any, steps: int, warmup: int) -> tuple[list[int], list[int]]:
    """One repeat: reset, `warmup` untimed steps, `steps` timed ones; (ns per step, tokens per step)."""
    timed = run_timed(workload, steps=steps, warmup=warmup, repeats=1)
    return timed.samples_ns[0], timed.tokens_per_step[0]


def summarize(samples: dict[str, dict[str, list]], seed: int) -> dict[str, Any]:
    """Effective TPOT of each side with its interval, their ratio, and each round's own ratio."""
    per_token = {
        side: per_token_samples_ns(data["samples_ns"], data["tokens_per_step"])
        for side, data in samples.items()
    }
    out: dict[str, Any] = {"interval": INTERVAL_LABEL}
    for side, repeats in per_token.items():
        est, lo, hi = median_with_ci(repeats, seed=seed)
        out[f"{side}_tpot_ms"] = {"est": est / 1e6, "lo": lo / 1e6, "hi": hi / 1e6}
    if len(per_token["decode"]) and len(per_token["spec"]):
        est, lo, hi = ratio_of_medians_ci(
            per_token["decode"], per_token["spec"], seed=seed, hierarchical=True
        )
        out["ratio"] = {"est": est, "lo": lo, "hi": hi}
        out["ratio_interval"] = "95% CI, independent two-level bootstraps of both sides (rounds, then steps)"
        out["round_ratios"] = [
            round(float(np.median(s) / np.median(d)), 4)
            for d, s in zip(per_token["decode"], per_token["spec"], strict=False)
        ]
        out["meets_target"] = bool(hi <= TARGET_RATIO)
    return out


def render_markdown(report: dict[str, Any]) -> str:
    result = report.get("result") or {}

    def tpot(key: str) -> str:
        value = result.get(key)
        return f"{value['est']:.3f} [{value['lo']:.3f}, {value['hi']:.3f}]" if value else "not measured"

    ratio = result.get("ratio")
    experts = (report.get("spec") or {}).get("experts") or {}
    lines = [
        f"# bench_spec_vs_decode — {report['preset']} on {report['device']} ({report['date']})",
        "",
        f"Command: `{report['command']}`",
        "",
        f"Rounds: {len(report['rounds'])} (interleaved, one timed repeat of each per round); "
        f"{INTERVAL_LABEL}.",
        "",
        f"Left off (measured slower): non-speculative {report['build'].get('decode_off')}, "
        f"DSpark {report['build'].get('spec_off')}.",
        "",
        "| step | effective TPOT ms [95% CI] | switches |",
        "| --- | --- | --- |",
        f"| non-speculative | {tpot('decode_tpot_ms')} "
        f"| {', '.join(report['build'].get('decode_switches', []))} |",
        f"| DSpark, oracle {report['accept']}, block {report['block']} | {tpot('spec_tpot_ms')} "
        f"| {', '.join(report['build'].get('spec_switches', []))} |",
        "",
        (
            f"DSpark ÷ non-speculative: **{ratio['est']:.3f} [{ratio['lo']:.3f}, {ratio['hi']:.3f}]** "
            f"(target ≤ {TARGET_RATIO}); per round: {result.get('round_ratios')}"
            if ratio
            else "DSpark ÷ non-speculative: not measured"
        ),
        f"Measured accept length: {(report.get('spec') or {}).get('accept_len')}",
        f"Expert union per MoE layer per verify: {experts}",
        "",
        *[overlap_line(row) for row in report.get("overlaps") or []],
        *[without_line(row) for row in report.get("without") or []],
        "",
        *[f"Note: {note}" for note in report["notes"]],
        "",
        "## Errors",
        "",
        *[f"- {err}" for err in report["errors"]],
    ]
    return "\n".join(lines) + "\n"


def overlap_line(row: dict[str, Any]) -> str:
    """One Markdown line of a DSpark-alone run at another routing-overlap knob."""
    tpot, experts = row["spec_tpot_ms"], row["experts"]
    return (
        f"- DSpark alone, --routing-overlap {row['overlap_knob']}: {tpot['est']:.3f} ms "
        f"[{tpot['lo']:.3f}, {tpot['hi']:.3f}] per token; {experts.get('distinct_experts_mean')} distinct "
        f"experts per layer ({experts.get('distinct_experts_min')}–{experts.get('distinct_experts_max')}), "
        f"realised overlap {experts.get('overlap_realised')}, "
        f"union {experts.get('union_share_of_verify_bytes')} of the verify's bytes"
    )


def save(out_dir: Path, report: dict[str, Any]) -> None:
    write_json_atomic(out_dir / "spec_vs_decode.json", report)
    write_text_atomic(out_dir / "spec_vs_decode.md", render_markdown(report))


def run_rounds(args, report, decode, spec, out_dir: Path) -> None:
    """Interleaved rounds until `--rounds` or the budget; the summary rewritten after each round."""
    samples = {side: {"samples_ns": [], "tokens_per_step": []} for side in ("decode", "spec")}
    plans = {"decode": (decode, args.decode_steps), "spec": (spec, args.spec_steps)}
    deadline = time.monotonic() + args.budget_s
    for index in range(args.rounds):
        if index >= 2 and time.monotonic() > deadline:
            report["notes"].append(f"time budget: stopped after {index} rounds")
            break
        order = ("decode", "spec") if index % 2 == 0 else ("spec", "decode")
        entry: dict[str, Any] = {"round": index, "order": list(order)}
        for side in order:
            workload, steps = plans[side]
            step_ns, tokens = time_round(workload, steps, args.warmup)
            samples[side]["samples_ns"].append(step_ns)
            samples[side]["tokens_per_step"].append(tokens)
            entry[f"{side}_median_step_ms"] = float(np.median(step_ns)) / 1e6
            entry[f"{side}_tokens"] = int(sum(tokens))
        report["rounds"].append(entry)
        report["samples"] = samples
        report["result"] = summarize(samples, seed=args.seed)
        report["spec"] = spec.spec_summary()
        save(out_dir, report)


def run_overlaps(args, report, spec: SpecWorkload, out_dir: Path) -> None:
    """DSpark alone at each `--extra-overlaps` knob (after the rounds, not interleaved): its effective
    TPOT and the expert union it realised, to set beside the rounds' knob."""
    for overlap in args.extra_overlaps:
        spec.probe.overlap = overlap
        # prepare() rebuilds the step (graphs included) and re-seeds the knob's draws.
        spec.prepare(spec.enabled)
        timed = run_timed(spec, steps=args.spec_steps, warmup=args.warmup, repeats=2)
        est, lo, hi = median_with_ci(
            per_token_samples_ns(timed.samples_ns, timed.tokens_per_step), seed=args.seed
        )
        report["overlaps"].append(
            {
                "overlap_knob": overlap,
                "spec_tpot_ms": {"est": est / 1e6, "lo": lo / 1e6, "hi": hi / 1e6},
                "accept_len": spec.spec_summary()["accept_len"],
                "experts": spec.spec_summary()["experts"],
            }
        )
        save(out_dir, report)


def time_pair(args, spec: SpecWorkload, label: str, alternative, default) -> dict[str, Any]:
    """DSpark prepared by `alternative()` then by `default()`, each timed `--without-repeats` repeats
    right after the other in this process: TPOT of both, the saving and the ratio default / alternative."""
    row: dict[str, Any] = {"switch": label}
    per_token = {}
    for side, prepare in (("without", alternative), ("all_on", default)):
        prepare()
        timed = run_timed(spec, steps=args.spec_steps, warmup=args.warmup, repeats=args.without_repeats)
        per_token[side] = per_token_samples_ns(timed.samples_ns, timed.tokens_per_step)
        est, lo, hi = median_with_ci(per_token[side], seed=args.seed)
        row[f"{side}_tpot_ms"] = {"est": est / 1e6, "lo": lo / 1e6, "hi": hi / 1e6}
    est, lo, hi = ratio_of_medians_ci(
        per_token["without"], per_token["all_on"], seed=args.seed, hierarchical=True
    )
    row["all_on_over_without"] = {"est": est, "lo": lo, "hi": hi}
    row["saving_ms"] = row["without_tpot_ms"]["est"] - row["all_on_tpot_ms"]["est"]
    return row


def run_without(args, report, spec: SpecWorkload, out_dir: Path) -> None:
    """After the rounds: DSpark with each `--spec-without` switch off, then with every switch again (what
    the switch saves in the step), and with each `--moe-alt` MoE tile variant, then the defaults again."""
    every = frozenset(spec.enabled)
    for switch in args.spec_without:
        if switch not in every:
            report["notes"].append(f"--spec-without {switch}: not on in the DSpark step, skipped")
            continue
        row = time_pair(
            args, spec, switch, lambda s=switch: spec.prepare(every - {s}), lambda: spec.prepare(every)
        )
        report["without"].append(row)
        save(out_dir, report)
    for text in args.moe_alt:
        overrides = parse_moe_overrides(text)

        def alternative(o=overrides):
            spec.moe_overrides = o
            spec.prepare(every)

        def default():
            spec.moe_overrides = {}
            spec.prepare(every)

        # "without" = the variant, "all_on" = the defaults: saving > 0 means the defaults are faster.
        report["without"].append(time_pair(args, spec, text, alternative, default) | {"moe_alt": True})
        save(out_dir, report)


def parse_moe_overrides(text: str) -> dict[str, object]:
    """`union_num_warps=4,union_block_i=64` -> FusedMoEConfig fields with their declared types."""
    types = {field.name: field.type for field in dataclasses.fields(FusedMoEConfig)}
    overrides: dict[str, object] = {}
    for item in text.split(","):
        key, _, value = item.partition("=")
        key = key.strip()
        if key not in types:
            raise SystemExit(f"--moe-alt: {key!r} is not a FusedMoEConfig field")
        kind = str(types[key])
        if kind == "bool":
            overrides[key] = value.strip().lower() in ("1", "true", "yes", "on")
        else:
            overrides[key] = int(value) if kind == "int" else value.strip()
    return overrides


def without_line(row: dict[str, Any]) -> str:
    """One Markdown line of a `--spec-without` or `--moe-alt` pair."""
    off, on, ratio = row["without_tpot_ms"], row["all_on_tpot_ms"], row["all_on_over_without"]

    def interval(value: dict[str, float]) -> str:
        return f"{value['est']:.3f} [{value['lo']:.3f}, {value['hi']:.3f}]"

    if row.get("moe_alt"):
        return (
            f"- DSpark with MoE {row['switch']}: {interval(off)} ms per token, with the defaults "
            f"{interval(on)} (re-measured after): the defaults save {row['saving_ms']:.3f} ms per token, "
            f"ratio {interval(ratio)}"
        )
    return (
        f"- DSpark without {row['switch']}: {interval(off)} ms per token, with it {interval(on)} "
        f"(re-measured after): saves {row['saving_ms']:.3f} ms per token, ratio {interval(ratio)}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--preset", default="ling3-flash-e256")
    parser.add_argument("--accept", type=float, default=9.95, help="DSpark oracle mean tokens per verify")
    parser.add_argument("--block", type=int, default=9, help="drafted tokens per verify")
    parser.add_argument("--routing-overlap", type=float, default=0.0, help="verify routing correlation knob")
    parser.add_argument("--rounds", type=int, default=6, help="interleaved rounds (one repeat of each)")
    parser.add_argument("--decode-steps", type=int, default=48, help="timed non-speculative steps per round")
    parser.add_argument("--spec-steps", type=int, default=16, help="timed verifies per round")
    parser.add_argument("--warmup", type=int, default=4, help="untimed steps before each timed round")
    parser.add_argument("--prompt-len", type=int, default=16)
    parser.add_argument("--path", default="auto", choices=["auto", "fast", "eager"], help="non-spec path")
    parser.add_argument(
        "--kernels",
        default="auto",
        choices=["auto", "on", "off"],
        help="every switch and DSpark's MoE on the Triton kernels (auto: on CUDA only)",
    )
    # The fastest configuration, not every switch: on_top's MEASURED_SLOWER names the switches measured
    # slower in the step, so a switch another round adds is on here unless that list says otherwise.
    parser.add_argument(
        "--decode-off",
        nargs="*",
        default=list(MEASURED_SLOWER),
        help="switches left off the non-speculative step (default: on_top.MEASURED_SLOWER)",
    )
    parser.add_argument(
        "--spec-off",
        nargs="*",
        default=list(MEASURED_SLOWER),
        help="switches left off the DSpark step (default: on_top.MEASURED_SLOWER where DSpark offers them)",
    )
    parser.add_argument(
        "--extra-overlaps",
        nargs="*",
        type=float,
        default=[],
        help="after the rounds, DSpark alone at these --routing-overlap knobs (TPOT, expert union)",
    )
    parser.add_argument(
        "--spec-without",
        nargs="*",
        default=[],
        help="after the rounds, DSpark with each of these switches off, then all on again (its saving)",
    )
    parser.add_argument(
        "--moe-alt",
        nargs="*",
        default=[],
        help="after the rounds, DSpark with these FusedMoEConfig fields (union_num_warps=4,union_block_i=64),"
        " then with the defaults again",
    )
    parser.add_argument("--without-repeats", type=int, default=3, help="timed repeats per pair side")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    parser.add_argument(
        "--budget-s", type=float, default=60.0, help="start no round after this (at least 2 rounds run)"
    )
    args = parser.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    report: dict[str, Any] = {
        "schema": "bubblescope.bench_spec_vs_decode/1",
        "preset": args.preset,
        "accept": args.accept,
        "block": args.block,
        "routing_overlap": args.routing_overlap,
        "device": torch.cuda.get_device_name() if device == "cuda" else platform.processor() or "cpu",
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        "torch": torch.__version__,
        "target_ratio": TARGET_RATIO,
        "build": {},
        "rounds": [],
        "overlaps": [],
        "without": [],
        "notes": [],
        "errors": [],
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    try:
        decode, spec, report["build"] = build(args, device)
        save(args.out_dir, report)
        run_rounds(args, report, decode, spec, args.out_dir)
        run_overlaps(args, report, spec, args.out_dir)
        run_without(args, report, spec, args.out_dir)
    except Exception as exc:  # noqa: BLE001 - keep what was measured and say why the rest is missing
        report["errors"].append(f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}")
    save(args.out_dir, report)
    print(render_markdown(report))
    return 1 if report["errors"] or not report["rounds"] else 0


if __name__ == "__main__":
    sys.exit(main())
