"""Build the gate fixture RunRecords (synthetic, deterministic): `python tests/data/gate/build_fixtures.py`.

baseline.json          1 read/step, TPOT ~1.00 ms with 3% noise
noise_only.json        same distribution, another seed: must pass
tpot_regression.json   +10% TPOT, same reads: must fail on TPOT
sync_regression.json   same TPOT, one extra read/step at a new site: must fail on reads
small_slowdown.json    +1% TPOT (under the 3% threshold): must pass
noisy_shift.json       median +5% (beyond 3%) but 30% noise over 8 steps: within the noise, must pass
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def make_record(seed: int, scale: float, extra_read: bool, noise: float = 0.03, steps: int = 64) -> dict:
    rng = np.random.default_rng(seed)
    # [3 repeats, 64 steps] of ~1 ms steps with 3% lognormal noise and a per-repeat offset.
    samples = [
        (1_000_000 * scale * rng.lognormal(0.0, noise, steps) * (1 + rng.normal(0, 0.003)))
        .astype(int)
        .tolist()
        for _ in range(3)
    ]
    syncs = [
        {
            "site": "engine.py(88): decode_step",
            "op": "aten::item",
            "kind": "item",
            "api": "cudaStreamSynchronize",
            "count": 4,
            "per_step": 1.0,
            "blocked_ns": 0,
            "bubble_ns": 0,
            "hint": "keep the value on device",
        }
    ]
    if extra_read:
        syncs.append(
            {
                "site": "sampler.py(41): sample",
                "op": "aten::nonzero",
                "kind": "nonzero",
                "api": "cudaStreamSynchronize",
                "count": 4,
                "per_step": 1.0,
                "blocked_ns": 0,
                "bubble_ns": 0,
                "hint": "use a fixed-size mask",
            }
        )
    tpot_ms = float(np.median(np.concatenate(samples))) / 1e6
    return {
        "schema": "bubblescope.run/1",
        "created_utc": "2026-11-30T05:00:00Z",
        "environment": {
            "tool_version": "0.1.0",
            "git_sha": None,
            "python": "3.11.7",
            "torch": "2.13.0",
            "triton": None,
            "cuda": None,
            "device": "cuda",
            "gpu": "NVIDIA H200",
            "driver": None,
            "hostname": "fixture",
        },
        "workload": {"name": "fixture", "factory": "tests:fixture", "preset": "debug"},
        "preset": "debug",
        "switches": {"enabled": [], "available": []},
        "settings": {"steps": steps, "warmup": 8, "repeats": 3, "profile_steps": 4},
        "samples_ns": samples,
        "tokens_per_step": [[1] * steps for _ in range(3)],
        "tokens": [],
        "summary": {
            "tpot_ms": tpot_ms,
            "tpot_ci95_ms": [tpot_ms, tpot_ms],
            "tokens_per_s": 1e3 / tpot_ms,
            "steps": steps,
            "repeats": 3,
            "tokens": 3 * steps,
        },
        "floor": None,
        "analysis": {
            "blocking_reads_per_step": float(len(syncs)),
            "syncs": syncs,
            "idle_by_class_ns_per_step": {"sync": 0, "host": 0, "launch": 0, "dependency": 0},
            "gpu_busy_ns_per_step": 0,
            "idle_ns_per_step": 0,
            "kernels_per_step": 0,
            "gpu_measured": True,
            "note": None,
        },
        "trace": None,
        "analysis_file": None,
        "report": None,
    }


FIXTURES = {
    "baseline.json": (1, 1.00, False),
    "noise_only.json": (2, 1.00, False),
    "tpot_regression.json": (3, 1.10, False),
    "sync_regression.json": (4, 1.00, True),
    "small_slowdown.json": (5, 1.01, False),
    "noisy_shift.json": (6, 1.05, False, 0.30, 8),
}

if __name__ == "__main__":
    for name, params in FIXTURES.items():
        (HERE / name).write_text(json.dumps(make_record(*params), indent=0) + "\n", encoding="utf-8")
