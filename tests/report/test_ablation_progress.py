"""`ablate`'s progress in a pipe: each line is written when its repeat or configuration finishes."""

from __future__ import annotations

import io

from rich.console import Console

from bubblescope.report.run_console import ablation_progress


def test_piped_progress_writes_each_line_as_it_happens() -> None:
    stream = io.StringIO()
    console = Console(file=stream, force_terminal=False, width=80)
    with ablation_progress(console, repeats=2) as progress:
        progress.start(pending=2)
        progress.repeat_done(0)
        # Written already, before the ablation (and the display) ends.
        assert stream.getvalue().splitlines()[-1] == "configuration 1/2: timed repeat 1/2 done"
        progress.repeat_done(1)
        key = "bf16_gate+bf16_lm_head+fused_mla_glue+fused_moe+graph_metadata+no_readback+pdl"
        progress.config_done(key)
        # One line however long the key: it stays copyable.
        assert stream.getvalue().splitlines()[-1] == f"configuration 1/2 done: {key}"
        progress.repeat_done(0)
        assert stream.getvalue().splitlines()[-1] == "configuration 2/2: timed repeat 1/2 done"
    assert stream.getvalue().splitlines()[0] == "measuring 2 configurations of 2 timed repeats"
