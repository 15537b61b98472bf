"""Names of the ranges bubblescope itself writes into a trace, and the code whose synchronizes are the
tool's or the profiler's own, in one place (no imports: the capture side writes them, the analysis core
reads them).
"""

import re

# Each call of a tapped read (`capture/user_reads.py`): `bubblescope.read#<id>`, tying the trace's blocking
# call to the Python stack the tap recorded.
READ_MARKER_PREFIX = "bubblescope.read#"
# bubblescope's own synchronizes (profile session start/stop, the profiled window's drain): never the user's.
OWN_SYNC_MARKER = "bubblescope.own_sync"
WINDOW_DRAIN = "bubblescope.window_drain"
OWN_SYNC_ANNOTATIONS = frozenset({OWN_SYNC_MARKER, WINDOW_DRAIN})

# Functions of bubblescope whose synchronize is the tool's (matched by function name inside a
# `bubblescope/` path, not by module file: the `profile_*` modules move into `bubblescope/profile/`):
# the profiled window and its drain, the profile session's step close and stop, the timed repeats.
# A trace written before the markers existed, or by a session whose marker was lost, still names them.
OWN_SYNC_FUNCTIONS = frozenset(
    {
        "profile_window",
        "_close_step",
        "_stop_profiler",
        "_start_profiler",
        "run_timed",
        "_time_repeat_cuda",
        "_time_repeat_host",
    }
)
# torch.profiler's own code: `profile.stop()` / `step()` -> `_transit_action` -> `stop_trace` ->
# `torch/autograd/profiler.py` `__exit__` -> `torch.cuda.synchronize()` drains the device when a profile
# stops. Any synchronize called from these files is the profiler's, never the user's.
PROFILER_FRAME_RE = re.compile(r"(^|/)torch/(autograd/profiler|profiler/profiler)\.py\(\d+\): ")
_OWN_FUNCTION_FRAME_RE = re.compile(r"(^|/)bubblescope/(?!examples/).*\.py\(\d+\): (?P<func>\w+)$")


def is_own_sync_frame(frame_name: str) -> bool:
    """True for a Python frame whose synchronize is bubblescope's or torch.profiler's own (above)."""
    if PROFILER_FRAME_RE.search(frame_name):
        return True
    match = _OWN_FUNCTION_FRAME_RE.search(frame_name)
    return bool(match) and match["func"] in OWN_SYNC_FUNCTIONS
