"""Check that a speed change leaves the analysis unchanged: dump `analyze_traces` JSON per trace, then
compare two dumps byte for byte.

Usage:
    # the old code (e.g. `git archive <sha> bubblescope | tar -x -C /tmp/old`), then the new:
    PYTHONPATH=/tmp/old .venv/bin/python benchmarks/compare_outputs.py dump /tmp/out_old
    .venv/bin/python benchmarks/compare_outputs.py dump /tmp/out_new
    .venv/bin/python benchmarks/compare_outputs.py compare /tmp/out_old /tmp/out_new

Traces: every `*.json.gz` of `--real` (default /work/traces/real, the corpus' 16 public files), the
larger public files listed in `LARGE` under `<real>/src` when present, and the trace files of
tests/data. A trace that fails to load is dumped as its one-line error, so errors are compared too.
Paths inside the output are written relative to the checkout, so two checkouts compare equal.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LARGE = (
    "tl_inference_xdit_sd_3.5_profile_trace_rank_0.json.gz",
    "tl_inference_xdit_flux.1_aiter_sage_profile_trace_rank_0.json.gz",
    "hta_df_index_resolver_df_index_resolver.json.gz",
    "tl_h100_google_owlv2-large-patch14-ensemble__1016001.json.gz",
    "hta_trace_diff_control_control.json.gz",
    "hta_negative_queue_length_values_check_rank0.json.gz",
    "tl_inference_sglang_prefilldecode_sglang_Qwen3-8B_prefilldecode.json.gz",
    "hta_nccl_parser_config_nccl_data.json.gz",
    "tl_torch_compile_triton_trace.json.gz",
    "hta_cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
)
_TEST_PATTERNS = (
    "*/trace.json",
    "*/*.trace.json.gz",
    "*/*/trace.json.gz",
    "*/trace.json.gz",
    "report/*/trace.json",
)


def trace_paths(real: Path) -> list[Path]:
    """The traces to analyse, in a fixed order."""
    paths = sorted(real.glob("*.json.gz"))
    paths += [real / "src" / name for name in LARGE if (real / "src" / name).is_file()]
    for pattern in _TEST_PATTERNS:
        paths += sorted((REPO / "tests" / "data").glob(pattern))
    return paths


def dump(out: Path, real: Path) -> None:
    """Write one `<hash>_<name>.json` per trace into `out`."""
    from bubblescope.analysis.traces import analyze_traces
    from bubblescope.errors import BubblescopeError

    out.mkdir(parents=True, exist_ok=True)
    for path in trace_paths(real):
        shown = str(path).replace(str(REPO), "<REPO>")
        try:
            result = analyze_traces([path])
        except BubblescopeError as exc:
            result = {"error": str(exc)}
        text = json.dumps(result, sort_keys=True, default=str).replace(str(REPO), "<REPO>")
        key = hashlib.md5(shown.encode()).hexdigest()[:8]
        (out / f"{key}_{path.name}.json").write_text(text)
        print(shown, len(text), flush=True)


def compare(old: Path, new: Path, added: tuple[str, ...] = ()) -> int:
    """Number of files that differ or are missing on one side (each named on stdout). Top-level keys
    in `added` (new fields of the new code) are dropped from the new side first."""
    names = sorted({p.name for p in old.iterdir()} | {p.name for p in new.iterdir()})
    bad = 0
    for name in names:
        a, b = old / name, new / name
        if not (a.is_file() and b.is_file()) or a.read_bytes() != _without(b.read_bytes(), added):
            print(f"DIFFERS: {name}")
            bad += 1
    print(f"{len(names) - bad} of {len(names)} identical")
    return bad


def _without(text: bytes, keys: tuple[str, ...]) -> bytes:
    """The dumped JSON with top-level `keys` removed, written as `dump` writes it."""
    if not keys:
        return text
    doc = json.loads(text)
    for key in keys:
        doc.pop(key, None)
    return json.dumps(doc, sort_keys=True, default=str).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    dump_parser = sub.add_parser("dump")
    dump_parser.add_argument("out")
    dump_parser.add_argument("--real", default="/work/traces/real")
    compare_parser = sub.add_parser("compare")
    compare_parser.add_argument("old")
    compare_parser.add_argument("new")
    compare_parser.add_argument("--added", nargs="*", default=[], help="top-level keys only the new code has")
    args = parser.parse_args()
    if args.command == "dump":
        dump(Path(args.out), Path(args.real))
    else:
        sys.exit(1 if compare(Path(args.old), Path(args.new), tuple(args.added)) else 0)


if __name__ == "__main__":
    main()
