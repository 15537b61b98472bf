"""How far the gate can be trusted: false alarms on A/A pairs, detection of planted slowdowns, TPOT spread.

For each pair, two RunRecords are measured back to back in one process (weights built once, only
`prepare()` between them, the same path `bubblescope ablate` takes) and gated against each other:
  * A/A: baseline vs baseline → any failure is a false alarm.
  * +sync: baseline vs `planted_sync` (one extra `.item()` per step).
  * +sleep 3% / +sleep 10%: baseline vs a host stall of that fraction of the baseline's median step.
Rates are reported at several `--max-regression` thresholds, for the TPOT check alone and for the
whole verdict (the reads check catches the planted sync exactly, whatever the noise).
Run-to-run spread: coefficient of variation and range of the baseline records' TPOT medians.

Usage (CPU, ~1-3 minutes on 2 shared cores):
    python benchmarks/bench_gate_trust.py --pairs 24
    python benchmarks/bench_gate_trust.py --workload bubblescope.reference_model.workload:make_workload \
        --preset debug --pairs 20 --steps 24 --repeats 3
On a GPU the same command measures there (the toy and the reference pick CUDA when present).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from planted import with_plants

from bubblescope.capture.measure import RunSettings, measure_config
from bubblescope.capture.setup import build_workload
from bubblescope.capture.timed import run_timed
from bubblescope.files.atomic import write_json_atomic
from bubblescope.gate import evaluate_gate, load_gate_input

THRESHOLDS = (0.0, 0.01, 0.03, 0.05)
# The gate's default two-level bootstrap, and steps-only resampling for comparison.
RESAMPLING = {"repeats+steps": True, "steps": False}
SLEEP_FRACTIONS = (0.03, 0.10)


def _calibrated_step_ns(workload: Any, steps: int) -> float:
    """Median baseline step, measured once, so the planted sleeps are fixed fractions of it."""
    workload.prepare(frozenset())
    timed = run_timed(workload, steps=steps, warmup=16, repeats=1)
    return float(statistics.median(timed.samples_ns[0]))


def _measure(workload: Any, enabled: frozenset[str], settings: RunSettings, path: Path, info: dict) -> Path:
    measure_config(
        workload, enabled, settings=settings, record_path=path, workload_info=info, bandwidth=None, html=False
    )
    return path


def run_bench(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    built = build_workload(args.workload, args.preset, seed=0, max_steps=args.warmup + args.steps)
    # A workload without the planted switches (the reference decoder) gets them from a wrapper.
    workload = with_plants(built.workload)
    info = {"name": getattr(workload, "name", "workload"), "factory": built.factory, "preset": built.preset}
    settings = RunSettings(steps=args.steps, warmup=args.warmup, repeats=args.repeats, profile_steps=2)
    names = {s.name for s in workload.switches()}
    step_ns = _calibrated_step_ns(workload, 4 * args.steps)
    scenarios: dict[str, tuple[frozenset[str], int]] = {"A/A": (frozenset(), 0)}
    if "planted_sync" in names:
        scenarios["+sync"] = (frozenset({"planted_sync"}), 0)
    if "planted_sleep" in names and callable(getattr(workload, "set_planted_sleep_ns", None)):
        for fraction in SLEEP_FRACTIONS:
            scenarios[f"+sleep {fraction:.0%}"] = (frozenset({"planted_sleep"}), int(fraction * step_ns))
    verdicts: dict[str, list[dict[str, Any]]] = {name: [] for name in scenarios}
    baseline_tpots_ms: list[float] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench_gate_") as tmp:
        root = Path(tmp)
        for pair in range(args.pairs):
            # Scenarios interleaved within each pair so slow drift of the machine hits all alike.
            for name, (enabled, sleep_ns) in scenarios.items():
                base = _measure(
                    workload, frozenset(), settings, root / f"{pair}-{len(verdicts[name])}-a.json", info
                )
                if sleep_ns:
                    workload.set_planted_sleep_ns(sleep_ns)
                other = _measure(
                    workload, enabled, settings, root / f"{pair}-{len(verdicts[name])}-b.json", info
                )
                base_in, other_in = load_gate_input(base), load_gate_input(other)
                baseline_tpots_ms.append(base_in.meta["tpot_ms"])
                verdicts[name].append(
                    {
                        f"{method}@{t:.2f}": evaluate_gate(
                            base_in, other_in, max_regression=t, seed=pair, hierarchical=hierarchical
                        )
                        for method, hierarchical in RESAMPLING.items()
                        for t in THRESHOLDS
                    }
                )
            elapsed = time.perf_counter() - started
            print(f"pair {pair + 1}/{args.pairs} done ({elapsed:.0f} s)", file=sys.stderr)
            # Written after every pair: a run cut short (device time, a timeout) keeps what it has.
            partial = _summarise(args, built, step_ns, verdicts, baseline_tpots_ms, elapsed)
            write_json_atomic(out, partial)
            if args.budget_s and elapsed * (pair + 2) / (pair + 1) > args.budget_s:
                print(f"stopping after {pair + 1} pairs: --budget-s {args.budget_s:.0f}", file=sys.stderr)
                break
    return partial


def _rate(rows: list[dict[str, Any]], threshold: str, check: str | None) -> float:
    def failed(verdict: dict[str, Any]) -> bool:
        if check is None:
            return verdict["verdict"] == "fail"
        return any(c["name"] == check and c["status"] == "fail" for c in verdict["checks"])

    return sum(failed(row[threshold]) for row in rows) / len(rows)


def _summarise(
    args: argparse.Namespace,
    built: Any,
    step_ns: float,
    verdicts: dict[str, list[dict[str, Any]]],
    tpots_ms: list[float],
    wall_s: float,
) -> dict[str, Any]:
    import torch

    rates = {
        name: {
            method: {
                f"{t:.0%}": {
                    "tpot_check": _rate(rows, f"{method}@{t:.2f}", "tpot"),
                    "verdict": _rate(rows, f"{method}@{t:.2f}", None),
                }
                for t in THRESHOLDS
            }
            for method in RESAMPLING
        }
        for name, rows in verdicts.items()
    }
    ratios = {
        name: statistics.median(r["steps@0.00"]["checks"][1]["ratio"]["est"] for r in rows)
        for name, rows in verdicts.items()
    }
    mean_ms = statistics.fmean(tpots_ms)
    return {
        "bench": "gate_trust",
        "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "device": str(getattr(built.workload, "device", "cpu")),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "cpu_threads": torch.get_num_threads(),
        "workload": built.factory,
        "preset": built.preset,
        "pairs": len(tpots_ms) // max(1, len(verdicts)),
        "planted": "built in" if hasattr(built.workload, "set_planted_sleep_ns") else "benchmarks/planted.py",
        "settings": {"steps": args.steps, "warmup": args.warmup, "repeats": args.repeats},
        "baseline_step_ms": step_ns / 1e6,
        "rates": rates,
        "median_ratio": ratios,
        "tpot_spread": {
            "records": len(tpots_ms),
            "mean_ms": mean_ms,
            "cv": statistics.pstdev(tpots_ms) / mean_ms,
            "min_ms": min(tpots_ms),
            "max_ms": max(tpots_ms),
        },
        "wall_s": wall_s,
        "command": " ".join(sys.argv),
    }


def _print_table(result: dict[str, Any]) -> None:
    print(
        f"{result['workload']} preset={result['preset']} device={result['device']} pairs={result['pairs']} "
        f"step={result['baseline_step_ms']:.4f} ms"
    )
    header = "scenario     resampling     median ratio  " + "  ".join(
        f"fail@{t:.0%} tpot/all" for t in THRESHOLDS
    )
    print(header)
    for name, per_method in result["rates"].items():
        for method, per_threshold in per_method.items():
            cells = "  ".join(
                f"{v['tpot_check']:>6.0%} / {v['verdict']:<4.0%}" for v in per_threshold.values()
            )
            print(f"{name:<12} {method:<14} {result['median_ratio'][name]:>12.4f}  {cells}")
    spread = result["tpot_spread"]
    print(
        f"baseline TPOT over {spread['records']} records: mean {spread['mean_ms']:.4f} ms, "
        f"CV {spread['cv']:.2%}, "
        f"range {spread['min_ms']:.4f}-{spread['max_ms']:.4f} ms; wall {result['wall_s']:.0f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workload", default="bubblescope.examples.toy_workload:make_workload")
    parser.add_argument("--preset", default=None)
    parser.add_argument("--pairs", type=int, default=24)
    parser.add_argument("--steps", type=int, default=128)
    parser.add_argument("--warmup", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (1: less noise on shared cores)"
    )
    parser.add_argument(
        "--budget-s", type=float, default=0, help="stop after the pair that would overrun this (0: no limit)"
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="JSON result (default reports/bench/gate_trust-<ts>.json)"
    )
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or Path("reports") / "bench" / f"gate_trust-{stamp}.json"
    result = run_bench(args, out)
    _print_table(result)
    print(f"written to {out}")


if __name__ == "__main__":
    main()
