"""The host op table (`host_ops[]`) against raw events of a real trace, read by hand.

hta_a100_event_sync.json.gz (HTA's test data, 92 events, one ProfilerStep#100 window) holds, on thread
948300 (ts / dur in µs from the JSON):
  aten::ones 509905/2245 > aten::empty 509909/2187, aten::fill_ 512099/50 > cudaLaunchKernel 512110/36
  aten::sum 512159/39 > aten::sum 512162/34 > aten::as_strided 512172/1, cudaLaunchKernel 512182/10
  aten::gt 512205/33 > cudaLaunchKernel 512221/12
  aten::is_nonzero 512245/47 > aten::item 512247/45 > aten::_local_scalar_dense 512249/42 >
      cudaMemcpyAsync 512252/29, cudaStreamSynchronize 512282/6
  cudaLaunchKernel 512362/9, cudaEventRecord 3 + 3, cudaEventSynchronize 34, cudaDeviceSynchronize 8
So self(aten::ones) = 2245 - 2187 - 50 = 8, self(aten::fill_) = 50 - 36 = 14, aten::sum: 2 calls, total
39 + 34 = 73, self (39 - 34) + (34 - 1 - 10) = 28; self(aten::item) = 45 - 42 = 3,
self(aten::_local_scalar_dense) = 42 - 29 - 6 = 7; cudaLaunchKernel 4 calls, 36 + 10 + 12 + 9 = 67.
"""

from __future__ import annotations

from pathlib import Path

from bubblescope.analysis.traces import analyze_traces

US = 1000


def test_host_op_table_matches_the_raw_events(shared_dir: Path) -> None:
    analysis = analyze_traces(shared_dir / "data" / "real_traces" / "hta_a100_event_sync.json.gz")
    rows = {row["name"]: row for row in analysis["host_ops"]}
    expected = {
        # name: (kind, calls, self µs, total µs)
        "aten::ones": ("op", 1, 8, 2245),
        "aten::empty": ("op", 1, 2187, 2187),
        "aten::fill_": ("op", 1, 14, 50),
        "aten::sum": ("op", 2, 28, 73),
        "aten::gt": ("op", 1, 21, 33),
        "aten::is_nonzero": ("op", 1, 2, 47),
        "aten::item": ("op", 1, 3, 45),
        "aten::_local_scalar_dense": ("op", 1, 7, 42),
        "cudaLaunchKernel": ("runtime", 4, 67, 67),
        "cudaStreamSynchronize": ("runtime", 1, 6, 6),
        "cudaEventRecord": ("runtime", 2, 6, 6),
    }
    for name, (kind, calls, self_us, total_us) in expected.items():
        row = rows[name]
        assert (row["kind"], row["calls"], row["self_ns"], row["total_ns"]) == (
            kind,
            calls,
            self_us * US,
            total_us * US,
        ), name
    # The step annotation is the window, not a row; one step, so per step equals the totals.
    assert "ProfilerStep#100" not in rows
    assert rows["aten::sum"]["calls_per_step"] == 2
    assert rows["aten::sum"]["self_ns_per_step"] == 28 * US
    # Largest self time first.
    selfs = [row["self_ns"] for row in analysis["host_ops"]]
    assert selfs == sorted(selfs, reverse=True) and analysis["host_ops"][0]["name"] == "aten::empty"


def test_kernel_categories_and_utilization_of_the_same_trace(shared_dir: Path) -> None:
    analysis = analyze_traces(shared_dir / "data" / "real_traces" / "hta_a100_event_sync.json.gz")
    # Four kernels: fill (1 µs) and gt (1 µs) are elementwise, the sum reduction (11 µs) and the
    # spin kernel (36 µs) are other.
    shares = {row["category"]: (row["count"], row["total_ns"]) for row in analysis["kernel_categories"]}
    assert shares == {"elementwise": (2, 2 * US), "other": (2, 47 * US)}
    step = analysis["steps"][0]
    assert step["gpu_utilization"] == round(step["gpu_busy_ns"] / step["gpu_dur_ns"], 4)
    assert 0 < analysis["summary"]["gpu_utilization"] <= 1
