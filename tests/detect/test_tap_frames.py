"""A read made through `bubblescope profile`'s read tap is the user's read, not the tool's.

The tap wraps `Tensor.item` & co. in `bubblescope/capture/user_reads.py: tapped`, so in a profiled trace
that frame sits between the user's line and `aten::item`, as in the committed H200 sample
reports/samples/profile-gpt-fast-compiled-h200 (gpt_fast_loop.py(60): main > user_reads.py(166): tapped >
<built-in method item> > aten::item > cudaStreamSynchronize). The tool's own synchronizes come from other
capture code (profiled.py's window drain) and stay dropped.
"""

from __future__ import annotations

from pathlib import Path

from bubblescope.analysis.traces import analyze_traces
from tests.trace.builder import US, TraceBuilder
from tests.trace.scenarios import ITEM_OPS


def test_a_read_through_the_tap_is_the_users(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 100 * US)
    user = b.frame("/home/user/gpt_fast_loop.py(60): main", 0, 300 * US)
    tap = b.frame("/repo/bubblescope/capture/user_reads.py(166): tapped", 18 * US, 52 * US, parent=user)
    b.frame("<built-in method item of Tensor object at 0x7f>", 19 * US, 51 * US, parent=tap)
    b.kernel("kA", (5 * US, 10 * US), (12 * US, 40 * US))
    b.blocking_read(ITEM_OPS, (20 * US, 50 * US), (21 * US, 24 * US), (40 * US, 41 * US), (24 * US, 45 * US))
    b.kernel("kC", (60 * US, 65 * US), (67 * US, 80 * US))
    # The tool's own drain, called from capture code that is not the tap: still not a read.
    tool = b.frame(
        "/repo/bubblescope/capture/profiled.py(95): profile_window", 150 * US, 200 * US, parent=user
    )
    b.frame("torch/cuda/__init__.py(1000): synchronize", 160 * US, 190 * US, parent=tool)
    b.device_synchronize(165 * US, 185 * US)
    result = analyze_traces([b.write(tmp_path / "trace.json")])
    (read,) = result["syncs"]
    assert (read["op"], read["api"], read["count"]) == ("aten::item", "cudaStreamSynchronize", 1)
    # The site is the user's frame (entered before tracing began: its own line), not the tap's.
    assert "gpt_fast_loop.py" in read["site"] and "user_reads" not in read["site"]
