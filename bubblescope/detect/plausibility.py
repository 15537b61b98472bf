"""Detector: traces whose GPU numbers would mislead (graph launches without kernels, no GPU activity).

Heuristic: a trace is implausible for GPU idle accounting when the host launched work but (almost)
none of it shows on the GPU: graph launches with no kernels (graph kernels were not recorded),
kernel launches with no GPU ops at all (CUDA activity off, or CUPTI lost the buffers), or fewer than
half of the kernel launches matched to a GPU op. Then idle time is not reported as if it were real.
"""

from __future__ import annotations

import pandas as pd

from bubblescope.trace import runtime_names as rt

MIN_MATCHED_LAUNCH_FRACTION = 0.5


def check_plausibility(gpu: pd.DataFrame, launches: dict[str, int]) -> list[str]:
    """Problems that make GPU busy/idle numbers untrustworthy; empty when the trace looks whole.

    Args:
        gpu: correlated GPU op table of one rank (all devices).
        launches: `correlate.launch_counts` of the same rank.
    """
    problems: list[str] = []
    kernels = int((gpu["kind"] == "kernel").sum())
    if launches["graph_launches"] and kernels == 0:
        problems.append(
            f"{launches['graph_launches']} graph launches (cudaGraphLaunch/hipGraphLaunch) but no GPU "
            "kernels in the trace: graph kernels were not recorded, so GPU idle time cannot be measured"
        )
    elif launches["kernel_launches"] and len(gpu) == 0:
        problems.append(
            f"{launches['kernel_launches']} kernel launches but no GPU activity in the trace "
            "(profile with ProfilerActivity.CUDA); GPU idle time cannot be measured"
        )
    elif launches["kernel_launches"] >= 10:
        names = gpu["launch_name"]
        flags = {name: rt.is_kernel_launch(str(name)) for name in names.unique()}
        launched = gpu[names.map(flags).to_numpy(dtype=bool)]
        matched = launched["launch_row"].nunique()
        if matched < MIN_MATCHED_LAUNCH_FRACTION * launches["kernel_launches"]:
            problems.append(
                f"only {matched} of {launches['kernel_launches']} kernel launches have a GPU "
                "kernel in the trace: GPU activity is missing, idle time would be overstated"
            )
    return problems
