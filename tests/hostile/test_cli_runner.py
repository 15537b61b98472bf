"""The fuzz harness's own hygiene: a child's pipes are closed by the harness, so a later in-process run
with warnings shown never prints a ResourceWarning that is not the command's (the long fuzz profile
once charged one to `gate`)."""

from __future__ import annotations

import gc
import warnings

from tests.hostile.cli_runner import run_subprocess


def test_a_subprocess_run_leaves_no_pipe_for_the_collector() -> None:
    outcome = run_subprocess(["--version"])
    assert outcome.exit_code == 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]
