"""End-to-end batch-1 decode on one GPU: TPOT per switch configuration vs the bandwidth floor.

For each preset (default ling3-tiny, then ling3-flash-e256) the weights are built ONCE and every
configuration is switched in with `prepare()` (graph recapture, no reload): all off, each switch
alone, all on, and the plain PyTorch eager path on the same weights ("stock eager"). Per
configuration: TPOT (median over repeats of the per-repeat median, CUDA-event timing from
bubblescope.capture.timed), ratio to all-off, the floor (accounting bytes per token / measured HBM
copy bandwidth) and TPOT / floor, kernels per step and GPU-busy time per step from a short profiled
window, the top kernels of the step (all-off and all-on), and whether the greedy tokens match all-off
(no speed claim without a correctness check). A `debug`-preset smoke pass runs first (seconds) so a
broken path shows before the big build. Every configuration runs in its own try/except; a time
budget skips what would not fit. Writes `decode.json` and `decode.md` into OUT_DIR.

Usage:
    .venv/bin/python benchmarks/bench_decode.py OUT_DIR            # smoke + ling3-flash-e256 + ling3-tiny
    .venv/bin/python benchmarks/bench_decode.py OUT_DIR --smoke    # the smoke pass only
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import gc
import itertools
import json
import platform
import statistics
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from bubblescope.reference_model.fast.workload import FastLingWorkload
from bubblescope.reference_model.workload import FAST_SWITCHES, LingWorkload, make_workload

from bubblescope.capture.timed import run_timed
from bubblescope.files.atomic import write_json_atomic, write_text_atomic
from bubblescope.floor.bandwidth import measure_copy_bandwidth_gbps
from bubblescope.stats import per_token_samples_ns


@dataclass(frozen=True)
class Plan:
    """Sizes of one preset's measurements."""

    preset: str
    steps: int
    warmup: int
    repeats: int
    eager_steps: int
    profile_steps: int
    prompt_len: int = 8
    # Configuration keys to run; None = all (the smoke pass runs off and all_on: every kernel variant).
    keys: tuple[str, ...] | None = None


PLANS = {
    "debug": Plan(
        "debug", steps=4, warmup=1, repeats=1, eager_steps=2, profile_steps=1, keys=("off", "all_on")
    ),
    "ling3-tiny": Plan("ling3-tiny", steps=64, warmup=8, repeats=3, eager_steps=16, profile_steps=3),
    "ling3-flash-e256": Plan(
        "ling3-flash-e256", steps=48, warmup=8, repeats=3, eager_steps=8, profile_steps=3
    ),
}
# Share of the remaining budget a preset may use when more presets follow it, and the least time
# worth starting a preset with (building ling3-flash-e256 alone takes about a minute).
PRESET_SHARE = 0.7
MIN_PRESET_S = 90.0
# Configurations whose profiled step also lists its top kernels.
BREAKDOWN_KEYS = ("off", "all_on")


# Switches added by issue 17, measured together as "all_on-new" (all on but these) too.
NEW_SWITCHES = ("fast_topk", "early_shared", "deep_experts", "fused_mla_glue")


def configurations() -> list[tuple[str, frozenset[str]]]:
    """(key, enabled): all off, each switch alone, all on."""
    alone = [(name, frozenset({name})) for name in FAST_SWITCHES]
    return [("off", frozenset()), *alone, ("all_on", frozenset(FAST_SWITCHES))]


def extra_configurations(keys: tuple[str, ...] = ()) -> list[tuple[str, frozenset[str]]]:
    """Run only when --keys names them: all on but one switch ("all_on-NAME"), all on but the
    issue-17 switches ("all_on-new"), and all on but several named switches ("all_on-A-B", any of
    `keys` of that form), each to compare with all_on in the same process."""
    every = frozenset(FAST_SWITCHES)
    but_one = [(f"all_on-{name}", every - {name}) for name in FAST_SWITCHES]
    known = {key for key, _ in but_one} | {"all_on-new"}
    but_several = [
        (key, every - set(key.split("-")[1:]))
        for key in keys
        if key.startswith("all_on-") and key not in known and set(key.split("-")[1:]) <= every
    ]
    return [*but_one, ("all_on-new", every - set(NEW_SWITCHES)), *but_several]


class EagerView:
    """The eager LingWorkload step on the fast workload's own weights and cache (no second model)."""

    def __init__(self, workload: FastLingWorkload) -> None:
        self.workload = workload
        self.device = workload.device

    def reset(self) -> None:
        LingWorkload.reset(self.workload)

    def step(self) -> int:
        return LingWorkload.step(self.workload)

    def tokens(self) -> list[int]:
        return list(self.workload._tokens)


def tpot_ms(workload: Any, steps: int, warmup: int, repeats: int) -> tuple[dict[str, Any], list[int]]:
    """TPOT summary (median of per-repeat medians, ms) and the first repeat's tokens."""
    timed = run_timed(workload, steps=steps, warmup=warmup, repeats=repeats)
    per_repeat = [
        float(statistics.median(values)) / 1e6
        for values in per_token_samples_ns(timed.samples_ns, timed.tokens_per_step)
    ]
    host_ms = [statistics.median(ns) / 1e6 for ns in timed.host_samples_ns]
    summary = {
        "tpot_ms": statistics.median(per_repeat),
        "repeat_tpot_ms": per_repeat,
        "host_step_ms": statistics.median(host_ms),
        "steps": steps,
        "repeats": repeats,
    }
    return summary, timed.tokens


def profile_step(workload: Any, steps: int, top: int) -> dict[str, Any]:
    """Kernels per step, GPU-busy ms per step and the `top` kernels by time, from a profiled window."""
    from torch.profiler import ProfilerActivity, profile

    workload.step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            workload.step()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace.json"
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text()).get("traceEvents", [])
    kernels = [e for e in events if e.get("cat") == "kernel"]
    counts: Counter[str] = Counter()
    busy_us: Counter[str] = Counter()
    for event in kernels:
        name = str(event.get("name", "?"))[:80]
        counts[name] += 1
        busy_us[name] += float(event.get("dur", 0.0))
    # Blocking reads of the loop (the window's closing cudaDeviceSynchronize is not one of them).
    blocking = ("cudaStreamSynchronize", "cudaEventSynchronize")
    syncs = sum(1 for e in events if e.get("cat") == "cuda_runtime" and e.get("name") in blocking)
    result = {
        "kernels_per_step": len(kernels) / steps,
        "gpu_busy_ms_per_step": sum(busy_us.values()) / steps / 1e3,
        "sync_calls_per_step": syncs / steps,
    }
    ranked = busy_us.most_common(top)
    result["top_kernels"] = [
        {"name": name, "per_step": counts[name] / steps, "us_per_step": total / steps}
        for name, total in ranked
    ]
    return result


def matching_prefix(tokens: list[int], reference: list[int]) -> int:
    """How many leading tokens agree."""
    count = 0
    for a, b in zip(tokens, reference, strict=False):
        if a != b:
            break
        count += 1
    return count


def measure_config(
    workload: FastLingWorkload,
    key: str,
    enabled: frozenset[str],
    plan: Plan,
    bandwidth_gbps: float,
    reference_tokens: list[int] | None,
) -> dict[str, Any]:
    """One configuration: prepare, time, floor, profile, token check."""
    started = time.perf_counter()
    workload.prepare(enabled)
    summary, tokens = tpot_ms(workload, plan.steps, plan.warmup, plan.repeats)
    bytes_per_token = int(workload.bytes_per_token(enabled))
    floor_ms = bytes_per_token / (bandwidth_gbps * 1e9) * 1e3
    row: dict[str, Any] = {
        "key": key,
        "enabled": sorted(enabled),
        **summary,
        "bytes_per_token": bytes_per_token,
        "floor_ms": floor_ms,
        "tpot_over_floor": summary["tpot_ms"] / floor_ms,
        "tokens": tokens[:16],
    }
    if reference_tokens is not None:
        row["tokens_match_off"] = matching_prefix(tokens, reference_tokens)
        row["tokens_compared"] = min(len(tokens), len(reference_tokens))
    top = 12 if key in BREAKDOWN_KEYS else 0
    row.update(profile_step(workload, plan.profile_steps, top))
    row["seconds"] = time.perf_counter() - started
    return row


def measure_eager(
    workload: FastLingWorkload, plan: Plan, bandwidth_gbps: float, reference: list[int]
) -> dict[str, Any]:
    """The plain PyTorch path ("stock eager") on the same weights."""
    started = time.perf_counter()
    workload.prepare(frozenset())
    view = EagerView(workload)
    summary, tokens = tpot_ms(view, plan.eager_steps, min(plan.warmup, 2), max(1, plan.repeats - 1))
    bytes_per_token = int(workload.bytes_per_token(frozenset()))
    floor_ms = bytes_per_token / (bandwidth_gbps * 1e9) * 1e3
    row = {
        "key": "eager",
        "enabled": [],
        **summary,
        "bytes_per_token": bytes_per_token,
        "floor_ms": floor_ms,
        "tpot_over_floor": summary["tpot_ms"] / floor_ms,
        "tokens": tokens[:16],
        "tokens_match_off": matching_prefix(tokens, reference),
        "tokens_compared": min(len(tokens), len(reference)),
    }
    row.update(profile_step(view, 1, 0))
    row["seconds"] = time.perf_counter() - started
    workload.prepare(frozenset())
    return row


def run_preset(
    plan: Plan, bandwidth_gbps: float, deadline: float, log, kda_v_splits: tuple[int, ...] = ()
) -> dict[str, Any]:
    """Build once, then every configuration and the eager path, each in its own try/except.

    kda_v_splits: extra KDA decode splits to measure each configuration with (key suffix `@kda_nvN`);
    the decoder's default split is measured under the plain key.
    """
    result: dict[str, Any] = {"preset": plan.preset, "plan": plan.__dict__, "rows": [], "errors": []}
    started = time.perf_counter()
    max_steps = plan.warmup + plan.steps + plan.profile_steps + 8
    workload = make_workload(
        plan.preset, device="cuda", seed=0, prompt_len=plan.prompt_len, max_steps=max_steps, path="fast"
    )
    result["build_s"] = time.perf_counter() - started
    log(f"{plan.preset}: built in {result['build_s']:.1f} s")
    reference: list[int] | None = None
    seconds_per_config = 0.0
    default_splits = workload.decoder.kda_v_splits
    result["kda_v_splits_default"] = default_splits
    variants = [(default_splits, "")] + [(n, f"@kda_nv{n}") for n in kda_v_splits if n != default_splits]
    chosen = configurations() + (extra_configurations(plan.keys) if plan.keys is not None else [])
    for (key, enabled), (splits, suffix) in itertools.product(chosen, variants):
        if plan.keys is not None and key not in plan.keys:
            continue
        workload.decoder.kda_v_splits = splits
        key = key + suffix
        if time.perf_counter() + seconds_per_config > deadline:
            result["errors"].append({"key": key, "error": "skipped: time budget"})
            log(f"{plan.preset} {key}: skipped (time budget)")
            continue
        try:
            row = measure_config(workload, key, enabled, plan, bandwidth_gbps, reference)
        except Exception as exc:  # noqa: BLE001 - one broken configuration must not stop the others
            result["errors"].append(
                {"key": key, "error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
            )
            log(f"{plan.preset} {key}: FAILED {type(exc).__name__}: {exc}")
            continue
        row["kda_v_splits"] = splits
        reference = row["tokens"] if reference is None and key == "off" else reference
        seconds_per_config = max(seconds_per_config, row["seconds"])
        result["rows"].append(row)
        log(
            f"{plan.preset} {key}: TPOT {row['tpot_ms']:.3f} ms, floor x{row['tpot_over_floor']:.2f}, "
            f"{row['kernels_per_step']:.0f} kernels/step, {row['seconds']:.0f} s"
        )
    workload.decoder.kda_v_splits = default_splits
    if time.perf_counter() < deadline and plan.eager_steps > 0:
        try:
            row = measure_eager(workload, plan, bandwidth_gbps, reference or [])
            result["rows"].append(row)
            log(f"{plan.preset} eager: TPOT {row['tpot_ms']:.3f} ms")
        except Exception as exc:  # noqa: BLE001
            result["errors"].append(
                {"key": "eager", "error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
            )
            log(f"{plan.preset} eager: FAILED {type(exc).__name__}: {exc}")
    add_ratios(result["rows"])
    del workload
    gc.collect()
    torch.cuda.empty_cache()
    return result


def add_ratios(rows: list[dict[str, Any]]) -> None:
    """vs_off, and where TPOT goes: kernel time over the floor vs device idle (launch gaps, host)."""
    off = next((row for row in rows if row["key"] == "off"), None)
    for row in rows:
        row["vs_off"] = row["tpot_ms"] / off["tpot_ms"] if off else None
        busy_ms = row.get("gpu_busy_ms_per_step")
        if busy_ms:
            row["kernels_over_floor_ms"] = busy_ms - row["floor_ms"]
            row["idle_ms_per_step"] = max(0.0, row["tpot_ms"] - busy_ms)


def markdown(report: dict[str, Any]) -> str:
    """Tables for RESULTS.md: one row per configuration, then the top kernels of off and all-on."""
    env = report["environment"]
    lines = [
        f"### End-to-end decode ({env['date']}, {env['gpu']}, torch {env['torch']}, triton {env['triton']})",
        "",
        f"Command: `{report['command']}`. Copy bandwidth {report['bandwidth_gbps']:.0f} GB/s (measured).",
        "TPOT = median of per-repeat medians (CUDA events); floor = accounting bytes/token / copy bandwidth.",
        "",
        "Gap to the floor = (GPU busy - floor: kernels below the copy ceiling) + (TPOT - busy: device idle,"
        " i.e. launch gaps and host time).",
        "",
        "| preset | config | TPOT ms | vs off | floor ms | TPOT / floor | kernels/step | GPU busy ms/step "
        "| idle ms/step | host ms/step | syncs/step | tokens = off |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for preset in report["presets"]:
        for row in preset["rows"]:
            ratio = f"{row['vs_off']:.2f}" if row.get("vs_off") else "-"
            match = (
                f"{row['tokens_match_off']}/{row['tokens_compared']}" if "tokens_match_off" in row else "ref"
            )
            lines.append(
                f"| {preset['preset']} | {row['key']} | {row['tpot_ms']:.3f} | {ratio} | "
                f"{row['floor_ms']:.3f} | {row['tpot_over_floor']:.2f} | "
                f"{row.get('kernels_per_step', 0):.0f} | {row.get('gpu_busy_ms_per_step', 0):.3f} | "
                f"{row.get('idle_ms_per_step', 0):.3f} | {row['host_step_ms']:.3f} | "
                f"{row.get('sync_calls_per_step', 0):.1f} | {match} |"
            )
        for error in preset["errors"]:
            lines.append(f"| {preset['preset']} | {error['key']} | {error['error'][:80]} |" + " |" * 9)
    for preset in report["presets"]:
        for row in preset["rows"]:
            if row.get("top_kernels"):
                lines += [
                    "",
                    f"Top kernels per step, {preset['preset']} {row['key']}:",
                    "",
                    "| kernel | per step | us/step |",
                    "| --- | ---: | ---: |",
                ]
                lines += [
                    f"| `{k['name']}` | {k['per_step']:.0f} | {k['us_per_step']:.1f} |"
                    for k in row["top_kernels"]
                ]
    return "\n".join(lines) + "\n"


def environment() -> dict[str, Any]:
    import triton

    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder for decode.json and decode.md")
    parser.add_argument("--smoke", action="store_true", help="only the debug-preset smoke pass (seconds)")
    parser.add_argument("--presets", default="ling3-flash-e256,ling3-tiny", help="comma-separated presets")
    parser.add_argument(
        "--budget-s", type=float, default=400.0, help="stop starting configurations after this"
    )
    parser.add_argument(
        "--keys", default="", help="comma-separated configuration keys (off, all_on, a switch)"
    )
    parser.add_argument(
        "--kda-v-splits", default="", help="comma-separated KDA decode splits to measure besides the default"
    )
    parser.add_argument("--no-eager", action="store_true", help="skip the eager-path row")
    args = parser.parse_args(argv)
    keys = tuple(k.strip() for k in args.keys.split(",") if k.strip()) or None
    splits = tuple(int(n) for n in args.kda_v_splits.split(",") if n.strip())
    if not torch.cuda.is_available():
        print("bench_decode: needs a CUDA device", file=sys.stderr)
        return 2
    began = time.perf_counter()
    deadline = began + args.budget_s

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - began:6.1f} s] {message}", flush=True)

    bandwidth_gbps = measure_copy_bandwidth_gbps()
    log(f"copy bandwidth {bandwidth_gbps:.0f} GB/s")
    presets = ["debug"] + ([] if args.smoke else [p.strip() for p in args.presets.split(",") if p.strip()])
    report: dict[str, Any] = {
        "schema": "bubblescope.bench_decode/1",
        "command": " ".join(["benchmarks/bench_decode.py", *sys.argv[1:]]),
        "environment": environment(),
        "bandwidth_gbps": bandwidth_gbps,
        "presets": [],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    for position, name in enumerate(presets):
        # The headline preset may not starve the ones after it: each gets a share of what is left.
        left_s = deadline - time.perf_counter()
        later = len(presets) - position - 1
        preset_deadline = time.perf_counter() + (left_s * PRESET_SHARE if later else left_s)
        if left_s < MIN_PRESET_S and name != "debug":
            report["presets"].append(
                {"preset": name, "rows": [], "errors": [{"key": "build", "error": "skipped: time budget"}]}
            )
            log(f"{name}: skipped (time budget)")
            continue
        try:
            plan = PLANS[name]
            if keys is not None and name != "debug":
                plan = dataclasses.replace(plan, keys=keys)
            if args.no_eager:
                plan = dataclasses.replace(plan, eager_steps=0)
            report["presets"].append(run_preset(plan, bandwidth_gbps, preset_deadline, log, splits))
        except Exception as exc:  # noqa: BLE001 - e.g. out of memory building e256: keep the rest
            report["presets"].append(
                {
                    "preset": name,
                    "rows": [],
                    "errors": [
                        {
                            "key": "build",
                            "error": f"{type(exc).__name__}: {exc}",
                            "trace": traceback.format_exc(),
                        }
                    ],
                }
            )
            log(f"{name}: FAILED {type(exc).__name__}: {exc}")
        write_json_atomic(args.out / "decode.json", report)
        write_text_atomic(args.out / "decode.md", markdown(report))
    log(f"wrote {args.out / 'decode.json'} and decode.md")
    print(markdown(report))
    failed = [e for p in report["presets"] for e in p["errors"] if not e["error"].startswith("skipped")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
