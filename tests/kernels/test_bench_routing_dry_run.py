"""benchmarks/bench_routing.py --dry-run: the issue-27 "route sites" cases build and check at a tiny shape,
so the one device call that times them at e256 shapes does not fail on a broken case."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]


def test_route_sites_dry_run_checks_the_in_experts_layer(tmp_path: Path) -> None:
    # Without CUDA the dry run needs the interpreter (tests/kernels/conftest.py sets it for this folder).
    env = dict(os.environ)
    if not torch.cuda.is_available():
        env["TRITON_INTERPRET"] = "1"
    command = [sys.executable, str(ROOT / "benchmarks" / "bench_routing.py"), "--out", str(tmp_path)]
    done = subprocess.run(
        [*command, "--dry-run", "--only", "routing_site=experts"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    payload = json.loads((tmp_path / "routing.json").read_text())
    assert payload["dry_run"] is True
    assert [row["case"] for row in payload["results"]] == ["route sites tiny layer, routing_site=experts"]
    assert payload["results"][0]["correct"] is True
