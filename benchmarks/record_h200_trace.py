"""Record a small real torch.profiler trace on a CUDA GPU for bubblescope's analysis tests.

Usage (on the GPU machine, from the repository root):
    python benchmarks/record_h200_trace.py OUT_DIR [--steps 5]

Writes OUT_DIR/trace.json.gz (the Kineto trace, < 2 MB), OUT_DIR/manifest.json (versions, which
features ran, the source line of each read site) and, when the analysis imports, OUT_DIR/analysis.json.
Copy trace.json.gz and manifest.json to tests/data/h200_recorded/.

Each profiled step, inside `record_function("bubblescope.step")` and an NVTX range:
  eager GEMV + relu, then three host-blocking reads: `.item()`, `nonzero`, `.cpu()`;
  a CUDA graph replay (captured before profiling);
  a chain of Triton kernels launched with Programmatic Dependent Launch (launch_pdl=True,
  gdc_wait / gdc_launch_dependents);
  a second stream that waits on an event recorded after a long kernel on the main stream.
Every feature is tried in warm-up and dropped (and noted in the manifest) if it fails, so one run on a
GPU always yields a trace. Profiler settings follow ARCHITECTURE §4.
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import shutil
import sys
import traceback
from pathlib import Path

import torch

HIDDEN = 2048
TRITON_BLOCK = 1024
PDL_CHAIN = 4


def read_count(h: torch.Tensor) -> int:
    return int((h > 0).sum().item())


def read_nonzero(h: torch.Tensor) -> torch.Tensor:
    return torch.nonzero(h > 0.5)


def read_to_host(h: torch.Tensor) -> torch.Tensor:
    return h[:, :8].cpu()


READ_SITES = {"item": read_count, "nonzero": read_nonzero, "copy": read_to_host}


def make_pdl_chain():
    """A Triton kernel launched with PDL, or None when Triton/PDL is unavailable here."""
    import triton
    import triton.language as tl

    @triton.jit
    def scale_kernel(x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr, USE_PDL: tl.constexpr):
        i_b = tl.program_id(0)
        o_x = i_b * BLOCK + tl.arange(0, BLOCK)
        m_x = o_x < n
        if USE_PDL:
            # Wait for the previous kernel's writes, then let the next kernel start its prologue.
            tl.extra.cuda.gdc_wait()
        b_x = tl.load(x_ptr + o_x, mask=m_x)
        if USE_PDL:
            tl.extra.cuda.gdc_launch_dependents()
        tl.store(y_ptr + o_x, b_x * alpha, mask=m_x)

    def chain(x: torch.Tensor, y: torch.Tensor) -> None:
        n = x.numel()
        grid = (triton.cdiv(n, TRITON_BLOCK),)
        src, dst = x, y
        for _ in range(PDL_CHAIN):
            scale_kernel[grid](src, dst, n, 0.5, BLOCK=TRITON_BLOCK, USE_PDL=True, launch_pdl=True)
            src, dst = dst, src

    return chain


class Workload:
    """The tensors, graph and streams one step uses."""

    def __init__(self, device: torch.device) -> None:
        gen = torch.Generator(device=device).manual_seed(0)
        self.x = torch.randn(1, HIDDEN, device=device, generator=gen, dtype=torch.bfloat16)
        self.weight = torch.randn(HIDDEN, HIDDEN, device=device, generator=gen, dtype=torch.bfloat16) / 45
        self.big = torch.randn(4096, 4096, device=device, generator=gen, dtype=torch.bfloat16)
        self.graph_in = torch.randn(HIDDEN, device=device, generator=gen)
        self.pdl_x = torch.randn(1 << 16, device=device, generator=gen)
        self.pdl_y = torch.empty_like(self.pdl_x)
        self.side = torch.cuda.Stream(device=device)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.pdl_chain = None
        self.features: dict[str, str] = {}

    def capture_graph(self) -> None:
        # Warm the ops on a side stream first, as CUDA graph capture requires.
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                self._graph_body()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.graph_out = self._graph_body()
        self.graph = graph

    def _graph_body(self) -> torch.Tensor:
        h = self.graph_in
        for _ in range(6):
            h = torch.tanh(h * 1.01 + 0.1)
        return h

    def eager_and_reads(self) -> None:
        h = torch.relu(self.x @ self.weight)
        h = h * 2.0 - 0.1
        read_count(h)
        read_nonzero(h)
        read_to_host(h)

    def graph_replay(self) -> None:
        self.graph.replay()

    def pdl(self) -> None:
        self.pdl_chain(self.pdl_x, self.pdl_y)

    def two_streams(self) -> None:
        main = torch.cuda.current_stream()
        # A long kernel on the main stream, then the side stream waits for it through an event.
        product = self.big @ self.big
        done = torch.cuda.Event()
        done.record(main)
        self.side.wait_event(done)
        with torch.cuda.stream(self.side):
            side_out = product[:64, :64] * 3.0
            side_out = side_out + 1.0
        main.wait_stream(self.side)
        product.record_stream(self.side)

    def step(self) -> None:
        self.eager_and_reads()
        for name in ("graph_replay", "pdl", "two_streams"):
            if self.features.get(name) == "ok":
                getattr(self, name)()


def try_feature(work: Workload, name: str, setup, run) -> None:
    """Set up and run one feature once; keep it only if both work."""
    try:
        if setup is not None:
            setup()
        run()
        torch.cuda.synchronize()
        work.features[name] = "ok"
    except Exception as exc:  # one try on a GPU: record why and go on without it
        work.features[name] = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        traceback.print_exc()


def profile_steps(work: Workload, steps: int, out_json: Path) -> dict:
    from torch.profiler import ProfilerActivity, profile, record_function

    settings: dict = {
        "activities": [ProfilerActivity.CPU, ProfilerActivity.CUDA],
        "with_stack": True,
        "record_shapes": False,
    }
    try:
        settings["experimental_config"] = torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
        sync_events = True
    except Exception:
        sync_events = False
    with profile(**settings) as prof:
        for _ in range(steps):
            torch.cuda.nvtx.range_push("bubblescope.step")
            with record_function("bubblescope.step"):
                work.step()
            torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
    prof.export_chrome_trace(str(out_json))
    return {"cuda_sync_events": sync_events}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("record_h200_trace.py needs a CUDA device")
    out_dir: Path = args.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    device = torch.device("cuda", 0)
    work = Workload(device)
    try_feature(work, "eager_reads", None, work.eager_and_reads)
    try_feature(work, "graph_replay", work.capture_graph, work.graph_replay)
    try_feature(work, "pdl", lambda: setattr(work, "pdl_chain", make_pdl_chain()), work.pdl)
    try_feature(work, "two_streams", None, work.two_streams)
    for _ in range(3):  # warm-up: allocator, cuBLAS handles, Triton cache
        work.step()
    torch.cuda.synchronize()
    raw_json = out_dir / "trace.json"
    profiler = profile_steps(work, args.steps, raw_json)
    trace_gz = out_dir / "trace.json.gz"
    with open(raw_json, "rb") as src, gzip.open(trace_gz, "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    raw_json.unlink()
    manifest = {
        "steps": args.steps,
        "features": work.features,
        "profiler": profiler,
        "script": Path(__file__).name,
        "read_sites": {
            kind: f"{Path(__file__).name}({fn.__code__.co_firstlineno}): {fn.__name__}"
            for kind, fn in READ_SITES.items()
        },
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0),
        "python": platform.python_version(),
        "trace_bytes": trace_gz.stat().st_size,
    }
    try:
        import triton

        manifest["triton"] = triton.__version__
    except ImportError:
        manifest["triton"] = None
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=1))
    print(json.dumps(manifest, indent=1))
    write_analysis(trace_gz, out_dir)


def write_analysis(trace_gz: Path, out_dir: Path) -> None:
    """Analyse the fresh trace here too (a smoke check; needs pandas, not the CLI's extras)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    try:
        from bubblescope.analysis.traces import analyze_traces

        analysis = analyze_traces([trace_gz])
        (out_dir / "analysis.json").write_text(json.dumps(analysis, indent=1))
        print(json.dumps({k: analysis[k] for k in ("summary", "syncs", "warnings")}, indent=1))
    except Exception:
        traceback.print_exc()


if __name__ == "__main__":
    main()
